import { validateKey } from '../keys/key.js';
import type { DecisionMode, DecisionRule } from '../types.js';
import type { EngineCore, PolicyRuntime } from './core.js';
import { claimPending, dropClaims, type KeyState, type LocalKeyState } from './key-state.js';
import type { PeerTable } from './peers.js';

/** Scratch result of evaluating one (policy, key). */
export interface Eval {
  allowed: boolean;
  rule: DecisionRule;
  mode: DecisionMode;
  remaining: number;
  retryAfterMs: number;
  resetMs: number;
  delayMs: number;
  rt: PolicyRuntime | undefined;
  key: string;
  ks: KeyState | undefined;
  entry: LocalKeyState | undefined;
}

export function newEval(): Eval {
  return {
    allowed: false,
    rule: 'allow',
    mode: 'global',
    remaining: 0,
    retryAfterMs: 0,
    resetMs: 0,
    delayMs: 0,
    rt: undefined,
    key: '',
    ks: undefined,
    entry: undefined,
  };
}

/**
 * The decision rule, over the windowed counter's queries and the peer view (README, "How a
 * node decides"). For a global policy with limit L:
 * - estimate E = sliding-window-counter sum over all origins;
 * - naive: admit when E + cost <= L;
 * - controlled (default): everything live peers admitted more than U ago has
 *   reached us (U = the longest any live peer has gone unseen); what they
 *   admitted since is unknown. The headroom left for the last U ms, L - E_old,
 *   is shared by demand (offered cost, which every node gossips), and this node
 *   admits only while its own admissions in the last U ms stay within its share.
 *   Summed over the nodes that is at most L;
 * - every member stale, or still starting and not all expected peers heard (and
 *   fallback on): admit while own counts + cost <= L/N;
 * - some members stale: each stale peer counts as spending max(seen + unseen,
 *   L/N), unseen being what it may have admitted at its reported demand rate
 *   until its own view went stale (see staleReserve).
 * A local-scope policy is its algorithm alone. Nothing here allocates or awaits.
 */
export class Rule {
  /** Scratch of KeyWindow.countsSince: all, own. */
  private readonly since = new Float64Array(2);
  /** The key's oldest bucket with a peer's counts, the policy, time and horizon {@link binds} asks about (set before each static-units decision). */
  private bindFirst = 0;
  private bindBw = 1;
  private bindNow = 0;
  private bindU = 0;
  /** {@link assignmentBinds}, bound once (no closure per decision). */
  private readonly binds = (until: number): boolean => this.assignmentBinds(until);

  constructor(private readonly core: EngineCore) {}

  /** Evaluate `cost` on (`rt`, `key`) at `now` into `out`; nothing is spent (see {@link commit}). */
  evaluate(rt: PolicyRuntime, key: string, cost: number, now: number, out: Eval): void {
    out.rt = rt;
    out.key = key;
    out.delayMs = 0;
    out.ks = undefined;
    out.entry = undefined;
    if (rt.local) {
      this.evaluateLocal(rt, key, cost, now, out);
      return;
    }
    const core = this.core;
    const p = rt.policy;
    const L = p.limit;
    let ks: KeyState | undefined;
    if (key === rt.hotKey && rt.hotKs !== undefined) {
      ks = rt.hotKs;
      ks.ref = true;
    } else {
      ks = rt.windows.get(key);
      if (ks === undefined) ks = core.createKey(rt, validateKey(key));
      else ks.ref = true;
      rt.hotKey = key;
      rt.hotKs = ks;
    }
    out.ks = ks;
    const kw = ks.window;
    const pos = now / rt.bw;
    const c = Math.floor(pos);
    if (c > kw.cur) kw.roll(c);
    // weight of the oldest bucket still inside the window
    // the fraction from the bucket start, not from now / bw: exact at epoch-sized times
    const w = c < kw.cur ? 1 : 1 - (now - c * rt.bw) / rt.bw;
    // slow gossip: our demand for the key starts afresh, so its next claim is new (see claimAt)
    if (rt.slow && !kw.hasOffered()) dropClaims(ks);
    kw.addOffered(cost);
    core.touch(ks);
    out.resetMs = kw.hasCounts() ? Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now) : 0;

    if (cost > L) {
      deny(out, 'cost-exceeds-limit', 'global', Math.max(0, Math.floor(L - kw.estimate(w))), -1);
      return;
    }
    // Said its farewell (Engine.farewell): its peers keep no share of L for it, so it holds none.
    if (core.left) {
      deny(out, 'fallback-share', 'fallback', 0, -1);
      return;
    }
    const peers = core.peers;
    if (peers.allStale && p.fallback) {
      const share = Math.floor(L / peers.splitN);
      const own = kw.ownEstimate(w);
      if (own + cost > share + 1e-9) {
        const retry = cost > share ? -1 : kw.timeToDrain(own + cost - share, true, now, rt.bw);
        deny(out, 'fallback-share', 'fallback', Math.max(0, Math.floor(share - own)), retry);
        return;
      }
      // What the view does hold still counts: a node starting with its peers'
      // windows pulled by sync, or cut off with their last counts, never admits
      // past L on them (the counts are real admissions; they only age out).
      const seen = kw.estimate(w);
      if (this.overLimit(out, ks, seen, cost, now, rt, 'fallback')) return;
      if (!this.frontAllows(rt, ks, cost, now, out, 'fallback')) return;
      allow(out, 'fallback', Math.floor(Math.min(share - own, L - seen) - cost + 1e-9));
      out.resetMs = Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now);
      return;
    }
    // Where slices are thin a key runs at L on whole units, and one count too few is a large
    // part of L: peers' counts in the oldest bucket, which carry no times, count whole there
    // (they may all be inside the window), not by the part of the bucket still inside.
    let est = thinSlices(L, peers.live.length + 1) ? kw.estimateWhole(w) : kw.estimate(w);
    if (peers.stale.length > 0 && p.fallback) est += this.staleReserve(ks, w, L, now, p.windowMs);
    if (rt.foreign.length > 0) est += this.foreignReserve(rt, ks, w, L);
    if (this.overLimit(out, ks, est, cost, now, rt, 'global')) return;
    if (p.overAdmission === 'controlled' && peers.live.length > 0) {
      // Everything peers admitted more than U ago has reached us (U = the
      // longest any live peer has been unseen); what they admitted since is
      // unknown. So the headroom left for the last U ms, L - E_old, is shared
      // by demand, and this node's own admissions in the last U ms may not
      // exceed its share. Summed over nodes that is at most L. A horizon of a window or more
      // (gossip slower than the window: g, delay or relay hops near W) holds too: nothing peers
      // admitted inside the window is then known to have reached us, so the whole of L is shared
      // and each node's admissions over the window stay within its share of it.
      const U = now - core.oldestSent;
      if (ks.shareStamp !== core.stamp) this.computeShare(ks, rt);
      const tU = now - Math.max(U, 0);
      const cU = Math.floor(tU / rt.bw);
      // In the bucket that straddles the horizon, peers' counts count wholly
      // as old (they may all precede the horizon; when the limit closes they
      // do, and a pro-rata split would under-count E_old) and our own wholly
      // as recent (they may all follow it). Both err on the safe side.
      const since = this.since;
      kw.countsSince(cU, since);
      const recentAll = since[0]!;
      let ownRecent = since[1]!;
      // at most L: with the horizon at or before the window's oldest bucket, `recentAll` counts
      // that bucket whole where `est` weighs it by the part still inside
      const H = Math.min(L, L - est + recentAll);
      let allowance = ks.share * H;
      // how spread this policy's keys look from here (see PolicyRuntime.spread: reported only)
      if (ks.peerReporters > 0 || !ks.ownCold)
        rt.spread += ((ks.peerReporters > 0 ? 1 : 0) - rt.spread) * SPREAD_RATE;
      // Gossip slow against the window: nodes on which a key's demand starts or jumps at once
      // each claim it before hearing the others' claims, and for much of the window. Until
      // every live peer has reported since our claim could reach it, the claim counts for at
      // most an equal share; a peer whose demand rises later then hears ours. Not where an
      // equal share of the headroom is under one unit: it would admit nothing, and there the
      // whole units of a settled view decide (below). Measured on 1,024 relay nodes (bench:scale),
      // where each node sees two requests a second and nearly each is a new claim: 0.17 of the
      // exact limiter with the guard there, 0.38 without, the worst 1 s under L by 382.
      if (
        claimPending(ks, core.oldestSent, core.cfg.dataDelayMs) &&
        allowance > H / ks.sharers &&
        H >= ks.sharers
      )
        allowance = Math.min(ks.share, 1 / ks.sharers) * H;
      if (ks.staticUnits) {
        // Thin slices on a policy whose keys the load balancer spreads: the window's L is dealt
        // in whole units equally over the members, and this node's own admissions over the
        // whole window may not pass the units it holds (see staticAllowance).
        kw.countsSince(kw.cur - p.buckets, since);
        ownRecent = since[1]!;
        this.bindFirst = kw.firstPeerBucket();
        this.bindBw = rt.bw;
        this.bindNow = now;
        this.bindU = Math.max(U, 0);
        allowance = staticAllowance(core.peers, L, ks.phase, now, core.unitSpan(p.windowMs), this.binds);
      } else if (ks.dealsUnits && now - ks.slicedAt >= p.windowMs) {
        // Slices of a few units (L/N small: a login limit on a large service): the window's
        // L is dealt in whole units over the sharers' slices, and this node's own admissions
        // over the whole window may not pass the units in its slice (see wholeUnits). Only
        // on a view whose slices have not changed for a window: each node then admitted
        // all its window's counts under the slices every node now uses.
        kw.countsSince(kw.cur - p.buckets, since);
        ownRecent = since[1]!;
        allowance = ks.unitsHi - ks.unitsLo;
      }
      if (ownRecent + cost > allowance) {
        // static units this node holds come back as its own admissions leave the window
        const retry =
          ks.staticUnits && allowance >= cost
            ? kw.timeToDrain(ownRecent + cost - allowance, true, now, rt.bw)
            : core.cfg.gossipIntervalMs;
        deny(out, 'headroom-share', 'global', Math.floor(allowance - ownRecent), retry);
        return;
      }
    }
    // Joined a mesh whose members named one this node has not heard, and its late sync not
    // merged yet: the start-up share, whatever the rule above gave (a pod gone as this one joined
    // may have admitted the key unseen; see EngineCore.awaitNames).
    if (core.awaitNames.size > 0 && now < core.holdUntil && p.fallback) {
      // the members named and not heard count in N
      const share = Math.floor(L / (peers.splitN + core.awaitNames.size));
      const own = kw.ownEstimate(w);
      if (own + cost > share + 1e-9) {
        deny(out, 'fallback-share', 'fallback', Math.max(0, Math.floor(share - own)), core.holdUntil - now);
        return;
      }
    }
    if (!this.frontAllows(rt, ks, cost, now, out, 'global')) return;
    allow(out, 'global', Math.floor(L - est - cost + 1e-9));
    out.resetMs = Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now);
  }

  /**
   * Static units: whether a member assignment replaced at `until` may still bind the key being
   * decided. It does while a peer may have admitted the key under it within the window: the
   * peers see a change up to a staleness period and the data's age after this node, so while
   * the key's window holds a peer's counts from before then, or those counts may still be on
   * their way (the horizon has not passed then). A key no peer admitted before the change
   * takes the units of the members in force at once: its first request after a pod joins, or
   * after this node started, finds its units there.
   */
  private assignmentBinds(until: number): boolean {
    const cfg = this.core.cfg;
    const b = Math.floor((until + cfg.staleAfterMs + cfg.dataDelayMs) / this.bindBw);
    if (this.bindNow - this.bindU <= (b + 1) * this.bindBw) return true;
    return this.bindFirst <= b;
  }

  /** Spend `cost` on an evaluation that allowed. */
  commit(e: Eval, cost: number, now: number): void {
    const rt = e.rt!;
    if (rt.local) {
      rt.algo!.commit(e.entry!.state, cost, now);
      e.entry!.last = now;
      return;
    }
    const ks = e.ks!;
    const kw = ks.window;
    kw.addOwn(cost, now / rt.bw - kw.cur);
    ks.unsynced += cost;
    if (ks.local !== undefined) rt.algo!.commit(ks.local, cost, now);
    if (ks.unsynced >= rt.earlyAt) this.core.early = true;
  }

  /** Denies with rule global-limit (in `mode`) when `est + cost` passes L; true when it did. */
  private overLimit(
    out: Eval,
    ks: KeyState,
    est: number,
    cost: number,
    now: number,
    rt: PolicyRuntime,
    mode: DecisionMode,
  ): boolean {
    const L = rt.policy.limit;
    // the tolerance absorbs float error of the bucket weight at whole-ms boundaries
    if (est + cost <= L + 1e-9) return false;
    deny(
      out,
      'global-limit',
      mode,
      Math.max(0, Math.floor(L - est)),
      ks.window.timeToDrain(est + cost - L, false, now, rt.bw),
    );
    return true;
  }

  private frontAllows(
    rt: PolicyRuntime,
    ks: KeyState,
    cost: number,
    now: number,
    out: Eval,
    mode: DecisionMode,
  ): boolean {
    const algo = rt.algo;
    if (algo === undefined || cost === 0) return true;
    if (ks.local === undefined) ks.local = algo.init(now);
    const r = this.core.algoOut;
    if (!algo.check(ks.local, cost, now, r)) {
      deny(out, 'local-limit', mode, r.remaining, r.retryAfterMs);
      return false;
    }
    out.delayMs = r.delayMs;
    return true;
  }

  private evaluateLocal(rt: PolicyRuntime, key: string, cost: number, now: number, out: Eval): void {
    const algo = rt.algo!;
    const store = rt.locals;
    let entry = store.get(key);
    if (entry === undefined) {
      entry = { state: algo.init(now), last: now, ref: false };
      store.insert(validateKey(key), entry);
      // a key evicted with state left starts from at least what it had used
      const sk = rt.sketch;
      if (sk !== undefined) {
        const used = Math.min(sk.estimate(key, now), algo.capacity);
        if (used >= 1 && algo.check(entry.state, Math.floor(used), now, this.core.algoOut)) {
          algo.commit(entry.state, Math.floor(used), now);
        }
      }
    } else entry.ref = true;
    out.entry = entry;
    const r = this.core.algoOut;
    if (cost === 0) {
      // A look without spending (checkAll with a list of costs): 0 never goes
      // over. The algorithms take costs from 1, so ask what 1 would leave.
      algo.check(entry.state, 1, now, r);
      out.resetMs = r.resetMs;
      out.delayMs = 0;
      allow(out, 'local', r.allowed ? r.remaining + 1 : r.remaining);
      return;
    }
    algo.check(entry.state, cost, now, r);
    out.resetMs = r.resetMs;
    out.delayMs = r.delayMs;
    if (r.allowed) allow(out, 'local', r.remaining);
    else
      deny(
        out,
        cost > algo.capacity ? 'cost-exceeds-limit' : 'local-limit',
        'local',
        r.remaining,
        r.retryAfterMs,
      );
  }

  /** Controlled mode: this node's demand-weighted share for a key, until the view changes. */
  private computeShare(ks: KeyState, rt: PolicyRuntime): void {
    const W = rt.policy.windowMs;
    // Our demand as we last gossiped it, not as it is now: the peers share the
    // headroom by the demands they have heard, so the shares sum to one only
    // when every node uses the same numbers. A node whose demand just rose
    // (a restart, a new burst) waits one tick before claiming the larger share.
    // Every demand counts for at most L, ours as well, the same on every node
    // (so the shares still sum to one): a claim of demand backed by no counts
    // can take at most the share of a node offering L, never starve the others.
    const L = rt.policy.limit;
    const kw = ks.window;
    const core = this.core;
    const own = Math.min(ks.sentDemand, L);
    let total = own;
    const live = core.peers.live;
    // members on another version of the policy are not sharers: foreignReserve counts them
    let sharers = live.length + 1;
    if (rt.foreign.length > 0)
      for (let i = 0; i < live.length; i++) if (rt.foreign.indexOf(live[i]!) >= 0) sharers--;
    // Routing spread, thin slices: static units, the window's L dealt equally over the members
    // (see staticAllowance), thin under any member assignment that may still bind. Members on
    // another version of the policy hold units of it too: the nodes on each version then admit
    // at most their L times their part of the members, as foreignReserve has it.
    const statics =
      rt.policy.routing === 'spread' && thinSlices(L, core.peers.unitMembers(core.lastNow, core.unitSpan(W)));
    // Elsewhere, whole units are dealt by demand counted up to half a fair share, a step rather
    // than a fade (see unitWeight): a key that every sharer keeps offering is dealt in equal
    // slices that noisy demand does not move. Ours is aged as the peers age it.
    const thin = !statics && thinSlices(L, sharers);
    const cap = (UNIT_WEIGHT_CAP * L) / sharers;
    const ownUnit = thin ? unitWeight(ks.sentDemand, ks.sentDemandAt, core.builtAt, W, cap) : 0;
    let unitTotal = ownUnit;
    let unitBefore = 0;
    let beforeN = 0;
    let reporters = 0;
    for (let i = 0; i < live.length; i++) {
      const peer = live[i]!;
      if (rt.foreign.length > 0 && rt.foreign.indexOf(peer) >= 0) continue;
      if (peer.before) beforeN++;
      const o = peer.idx;
      if (kw.hasOrigin(o)) {
        const demand = kw.demandOf(o);
        const at = kw.demandAt(o);
        const d = reportedDemand(demand, at, peer.lastHeard, W, L);
        if (d > 0) reporters++;
        total += d;
        if (thin) {
          const u = unitWeight(demand, at, peer.lastHeard, W, cap);
          unitTotal += u;
          if (peer.before) unitBefore += u;
        }
      }
    }
    // Peers that left by a farewell: their last demand, fading over a window by our time (it is not
    // renewed), still weighs in the total, though they admit nothing more. Nodes whose own reports
    // have not reached each other yet each count theirs (see above): the departed peer's demand
    // keeps the shares they take while their views settle as they were, not up to the whole headroom.
    const left = core.peers.left;
    for (let i = 0; i < left.length; i++) {
      const o = left[i]!.idx;
      if (kw.hasOrigin(o)) total += reportedDemand(kw.demandOf(o), kw.demandAt(o), core.lastNow, W, L);
    }
    const share = total > 0 ? own / total : 1 / sharers;
    ks.peerReporters = reporters;
    ks.ownCold = !(ks.sentDemand > 0 && core.builtAt - ks.sentDemandAt < W);
    ks.sharers = sharers;
    ks.staticUnits = statics;
    if (thin) {
      // the whole units of L its slice holds: [lo, hi); the view is steady while they stay
      const from = unitTotal > 0 ? unitBefore / unitTotal : beforeN / sharers;
      const lo = unitEdge(from, L, ks.phase);
      const hi = unitEdge(from + (unitTotal > 0 ? ownUnit / unitTotal : 1 / sharers), L, ks.phase);
      if (lo !== ks.unitsLo || hi !== ks.unitsHi) {
        ks.unitsLo = lo;
        ks.unitsHi = hi;
        ks.slicedAt = this.core.lastNow;
      }
    } else {
      // no slices: when slices are thin again, they start their wait of a window afresh
      ks.unitsLo = -1;
      ks.unitsHi = -1;
    }
    ks.share = share;
    // whole units by demand only where slices are thin, and on a settled view: every sharer's
    // demand heard, ours sent
    ks.dealsUnits = thin && own > 0 && reporters === sharers - 1;
    ks.shareStamp = this.core.stamp;
  }

  /**
   * Extra count assumed for stale members. A stale peer may have admitted,
   * unseen, from its newest data we hold until its own view went stale as
   * well (about staleAfter + d later; it then falls back to L/N on its own
   * counts): at most its offered rate for the key over that stretch, the part
   * of it still inside the window, and never more than L less what we saw.
   * From then on it keeps its own window total within max(what it had, L/N).
   * So a stale peer counts as spending max(seen + unseen, L/N).
   */
  private staleReserve(ks: KeyState, w: number, L: number, now: number, W: number): number {
    const { peers, cfg } = this.core;
    const perPeer = L / peers.splitN;
    const kw = ks.window;
    let extra = 0;
    for (const p of peers.stale) {
      const seen = kw.peerEstimate(p.idx, w);
      let unseen = 0;
      const demand = kw.demandOf(p.idx);
      if (demand > 0) {
        // D, the age its data may have on arrival (d; more with relay hops)
        const sent = p.lastHeard - Math.min(p.delayMs, cfg.dataDelayMs);
        const end = Math.min(now, sent + cfg.staleAfterMs + cfg.dataDelayMs);
        const span = end - Math.max(sent, now - W);
        if (span > 0) unseen = Math.min((demand / W) * span, Math.max(0, L - seen));
      }
      extra += Math.max(unseen, perPeer - seen);
    }
    return extra;
  }

  /**
   * Extra count assumed for members on another version of the policy (a
   * rolling change of its definition): their counts for it are not merged, so
   * each counts as spending at least L/N (our L), less what we still hold of
   * it from before it changed. A stale one is left to staleReserve, which
   * counts it at least as much. Summed over the mesh, the nodes on each
   * version then admit at most their L times their share of the members, so
   * the total stays within max(L_old, L_new) while the rollout runs.
   */
  private foreignReserve(rt: PolicyRuntime, ks: KeyState, w: number, L: number): number {
    const perPeer = L / this.core.peers.splitN;
    const skipStale = rt.policy.fallback;
    const kw = ks.window;
    let extra = 0;
    for (let i = 0; i < rt.foreign.length; i++) {
      const p = rt.foreign[i]!;
      // one that left by a farewell: what it admitted of its version is in none of our windows
      if (!p.left && (!p.member || (p.stale && skipStale))) continue;
      const seen = kw.peerEstimate(p.idx, w);
      if (perPeer > seen) extra += perPeer - seen;
    }
    return extra;
  }
}

/** The weight of one request in the moving mean of PolicyRuntime.spread. */
const SPREAD_RATE = 1 / 64;

/** When L is under this many units per sharer, a settled view deals the window's L in whole units ({@link wholeUnits}). */
const WHOLE_UNITS_BELOW = 4;
/** Whether L holds under WHOLE_UNITS_BELOW units per sharer: slices thin enough to deal in whole units. */
function thinSlices(L: number, sharers: number): boolean {
  return L < WHOLE_UNITS_BELOW * sharers;
}
/** When whole units are dealt, a sharer's demand weighs at most this much of a fair share (L / sharers). */
const UNIT_WEIGHT_CAP = 0.5;

/**
 * The whole units of a headroom H that fall in a sharer's slice [before·H, (before + share)·H),
 * shifted by `phase`: the integers in it. Over sharers whose slices tile [0, H) (every node
 * orders them by id and sums the same shares) they add up to floor(H) or floor(H) + 1, where
 * N floors of slices under one unit would give nothing: at 64 nodes and L = 20 per window,
 * 20 nodes hold one unit each instead of none holding any. A key's phase (a hash of it)
 * decides which nodes, so different keys favour different nodes.
 */
export function wholeUnits(before: number, share: number, H: number, phase: number): number {
  if (!(H > 0) || !(share > 0)) return 0;
  return unitEdge(before + share, H, phase) - unitEdge(before, H, phase);
}

/** The first whole unit of H at or past the point `at` (a fraction of H) of the slices, shifted by `phase`. */
function unitEdge(at: number, H: number, phase: number): number {
  return Math.floor(at * H + phase);
}

/**
 * Static units (routing spread, thin slices): the whole units of the window's L this node may
 * spend over the whole window. Every member's slice of [0, floor(L)) is an equal one, in id
 * order (the live members and this node; the stale reserve counts what a stale one may spend),
 * shifted by the key's phase, and holds the integers in it: over the
 * n members of one assignment they add up to floor(L) exactly, whatever the traffic, with no demand to hear.
 * A load balancer that spreads the keys sends a key's next request to any node, so equal
 * slices are what an exact limiter's units would be on average; where L is under one unit per
 * member, L of the members hold one each (a login limit of 20 per 10 s on 64 instances).
 *
 * The members change (a pod joins, one turns stale, as a replaced one does): own admissions made
 * under the assignment before stay in the window for W, and the other members see the change up
 * to a staleness period and the data's age apart. So a node holds the fewest units of any
 * assignment it was in within that `span` (PeerTable.unitRank): it gives up a unit at once and takes
 * a new one only once no admission under the old assignment can still be in a window. The
 * first assignment follows start-up (rank -1), which holds none: a node joining a running mesh
 * waits a window before it takes units of a key its peers, or the pod it replaces, admitted.
 * Only where a peer may have admitted the key under the assignment before (`binds`, see
 * Rule.assignmentBinds): a key no peer admitted before the change is dealt by the members in
 * force at once. The node's own admissions need no such wait: they count against its units.
 * A node with no peer live (rank -2) holds none for the whole span after, whatever the key.
 */
export function staticAllowance(
  peers: PeerTable,
  L: number,
  phase: number,
  now: number,
  span: number,
  binds?: (until: number) => boolean,
): number {
  if (peers.unitLostNoneUntil > now - span) return 0;
  const Lf = Math.floor(L);
  let units = Number.POSITIVE_INFINITY;
  const last = peers.unitRank.length - 1;
  let i = last;
  for (; i >= 0; i--) {
    const until = peers.unitUntil[i]!;
    if (until <= now - span) break;
    const rank = peers.unitRank[i]!;
    // No peer live (cut off): none, for the whole span, whatever the key. The node missed what
    // its peers admitted meanwhile (until the lost messages are repaired), so no key is known
    // to be free of it.
    if (rank === -2) return 0;
    // one replaced later does not bind the key: none replaced earlier does
    if (i < last && binds !== undefined && !binds(until)) break;
    const n = peers.unitN[i]!;
    // Start-up binds the key: none. With the start-up share, L/N, a replaced pod's successor
    // passed L by up to L/N at once: it sees what the pod it replaces admitted only once that
    // pod is stale at its peers (their sync answers then carry it as a member gone), and its
    // peers' counts from before stand for those until then (docs/scale.md).
    if (rank < 0) return 0;
    const u = unitEdge((rank + 1) / n, Lf, phase) - unitEdge(rank / n, Lf, phase);
    if (u < units) units = u;
  }
  // assignments dropped for room: they bind as none where the oldest kept one still did
  const lost = peers.unitLostUntil;
  if (i < 0 && lost > now - span && (binds === undefined || binds(lost))) return 0;
  return units;
}

/**
 * A sharer's weight in the whole-unit slices: its reported demand up to `cap`, whole while the
 * report is under a window old (aged from the message that carried it to the sharer's newest,
 * `at`), then none. A step, where the headroom's shares fade: the slices of sharers that keep
 * offering a key stay where they are, so the units settle.
 */
function unitWeight(demand: number, reportedAt: number, at: number, W: number, cap: number): number {
  return at - reportedAt < W ? Math.min(demand, cap) : 0;
}

function allow(out: Eval, mode: DecisionMode, remaining: number): void {
  out.allowed = true;
  out.rule = 'allow';
  out.mode = mode;
  out.remaining = Math.max(remaining, 0);
  out.retryAfterMs = 0;
}

function deny(
  out: Eval,
  rule: DecisionRule,
  mode: DecisionMode,
  remaining: number,
  retryAfterMs: number,
): void {
  out.allowed = false;
  out.rule = rule;
  out.mode = mode;
  out.remaining = Math.max(remaining, 0);
  out.retryAfterMs = retryAfterMs < 0 ? -1 : Math.max(1, Math.ceil(retryAfterMs));
}

/**
 * A peer's reported demand for a key (cost offered over a window), fading over
 * one window after the report (made at `reportedAt`), by the report's age at `at`
 * (the peer's newest message: a peer that keeps sending without the key fades
 * it, a silent one does not).
 */
function reportedDemand(demand: number, reportedAt: number, at: number, W: number, cap: number): number {
  const age = at - reportedAt;
  if (!(age < W)) return 0;
  return Math.min(demand, cap) * (1 - age / W);
}
