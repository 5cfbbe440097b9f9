import { validateKey } from '../keys/key.js';
import type { DecisionMode, DecisionRule, Explanation } from '../types.js';
import type { EngineCore, PolicyRuntime } from './core.js';
import { faded, KeyState, type LocalKeyState, selfDemand } from './key-state.js';
import type { PeerState } from './peers.js';

const NO_PEERS: PeerState[] = [];

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
  /** Decided on the fast path (PolicyRuntime.fastKs): its commit takes the cost off what is left there. */
  fast: boolean;
  /** On the fast path: the time in buckets (now / bw), for its commit. */
  pos: number;
}

/**
 * Starts `out` for a decision on `key` of `rt` (its key state `ks` where known): the fields every
 * evaluation sets, the rule's and the owner's alike, so none is left from the decision before.
 */
export function beginEval(
  out: Eval,
  rt: PolicyRuntime,
  key: string,
  ks: KeyState | undefined,
  fast: boolean,
): void {
  out.rt = rt;
  out.key = key;
  out.delayMs = 0;
  out.fast = fast;
  out.ks = ks;
  out.entry = undefined;
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
    fast: false,
    pos: 0,
  };
}

/**
 * A key is tight (fast gossip asked) where our own counts at our average rate over the window
 * would take this part of our allowance or more over two horizons at the configured interval
 * (docs/decision-rule.md, "Rounds, and tight keys").
 */
const TIGHT_PART = 0.5;

/**
 * The decision rule, over the windowed counter's queries and the peer view (docs/decision-rule.md).
 * For a global policy with limit L:
 * - estimate E = sliding-window-counter sum over all origins;
 * - naive: admit when E + cost <= L;
 * - controlled (default): everything live peers admitted more than U ago has
 *   reached us (U = the longest any live peer has gone unseen); what they
 *   admitted since is unknown. The headroom left for the last U ms, L - E_old,
 *   is shared (computeShare: by demand, each sharer holding at least its part of
 *   the room L leaves), and this node admits only while its own admissions in
 *   the last U ms stay within its share. The shares sum to at most one, so the
 *   nodes' recent admissions stay within the headroom: at most L;
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
  /** The last computeShare's own weight, the sum of every sharer's, and the room (explain, narrowExcess). */
  private weight = 0;
  private weights = 0;
  private room = 0;
  /** Scratch of computeShare: the live sharers' demands as this node holds them. */
  private readonly demands: number[] = [];
  /** Scratch of waterLevel. */
  private readonly sorted: number[] = [];
  /**
   * Set by {@link explainInto} for one evaluation: the terms of the decision are written there, and
   * nothing changes (no key created, no demand counted).
   */
  private x: Explanation | undefined = undefined;

  /**
   * Live peers whose newest message reports fewer live members than this node has (itself
   * included): still starting (deciding on the start-up share, L/N of its own counts, not on a
   * share of the headroom), or not hearing members we hear. Kept per view stamp; see {@link narrowExcess}.
   */
  private narrow: PeerState[] = [];
  private narrowStamp = -1;

  /** The fast path on (PolicyRuntime.fastKs); off only to check it decides as the full evaluation does. */
  fastPath = true;
  /** The last evaluation's share terms, for keepFast: allowance (-1: none to keep), own recent, its start and the horizon's bucket. */
  private shareAllowance = -1;
  private shareOwn = 0;
  private shareTO = 0;
  private shareCU = 0;

  constructor(private readonly core: EngineCore) {}

  /**
   * The part of the window that two horizons at the configured interval, 2 (g + D), are (at most
   * all of it): our own counts' share there at their average rate over the window.
   */
  private tightPart(rt: PolicyRuntime): number {
    const cfg = this.core.cfg;
    return Math.min(1, (2 * (cfg.gossipIntervalMs + cfg.dataDelayMs)) / rt.policy.windowMs);
  }

  /**
   * Our own counts over the window, at their average rate over two horizons ({@link tightPart}),
   * take {@link TIGHT_PART} of `allowance` or more.
   */
  private tightByRate(kw: KeyState['window'], rt: PolicyRuntime, allowance: number): boolean {
    const own = kw.ownTotal();
    return own > 0 && own * this.tightPart(rt) >= TIGHT_PART * allowance;
  }

  private findNarrow(): void {
    const core = this.core;
    const live = core.peers.live;
    const n = live.length + 1;
    let out = NO_PEERS;
    for (let i = 0; i < live.length; i++) {
      const p = live[i]!;
      // one that never gossiped (a sync asker, starting: gated) decides nothing yet
      if (p.members >= n || p.messages === 0) continue;
      if (out === NO_PEERS) out = [];
      out.push(p);
    }
    this.narrow = out;
    this.narrowStamp = core.stamp;
  }

  /**
   * What live peers of a narrower view (see {@link narrow}) may admit beyond their share of the
   * headroom `H`: one still starting admits up to L/N of its own counts over the window, whatever
   * share we leave it. Each is a sharer, so its share s_j·H is left to it already; the rest of
   * L/N, less what we hold of it, comes off this node's allowance whole (taken off H instead, only
   * our share of it would leave us). Needs {@link computeShare} of the key just run (room, weights).
   */
  private narrowExcess(rt: PolicyRuntime, ks: KeyState, w: number, L: number, H: number): number {
    const perPeer = L / this.core.peers.splitN;
    const kw = ks.window;
    const foreign = rt.foreign;
    const W = rt.policy.windowMs;
    let extra = 0;
    for (let i = 0; i < this.narrow.length; i++) {
      const p = this.narrow[i]!;
      // one on another version of the policy is reserved by foreignReserve already
      if (foreign.length > 0 && foreign.indexOf(p) >= 0) continue;
      const o = p.idx;
      const d = kw.hasOrigin(o) ? faded(kw.demandOf(o), kw.demandAt(o), p.lastHeard, W, L) : 0;
      const share = this.weights > 0 ? Math.max(d, this.room) / this.weights : 0;
      const over = perPeer - kw.peerEstimate(o, w) - share * H;
      if (over > 0) extra += over;
    }
    return extra;
  }

  /** Evaluates `cost` on (`rt`, `key`) at `now` as {@link evaluate} does, changing nothing, with every term written to `x`. */
  explainInto(rt: PolicyRuntime, key: string, cost: number, now: number, out: Eval, x: Explanation): void {
    this.x = x;
    try {
      this.evaluate(rt, key, cost, now, out);
    } finally {
      this.x = undefined;
    }
    x.allowed = out.allowed;
    x.rule = out.rule;
    x.mode = out.mode;
    x.remaining = out.remaining;
    x.retryAfterMs = out.allowed ? 0 : out.retryAfterMs;
    x.resetMs = out.resetMs;
  }

  /**
   * The fast path (PolicyRuntime.fastKs): a single key's check on the policy's hot key, within
   * what the last full evaluation of that key left, on the same view and in the same bucket, is
   * allowed without evaluating the rule again. Decides as {@link evaluate} would and returns true
   * where it holds; returns false, having changed nothing, where it does not (then evaluate).
   */
  evaluateFast(rt: PolicyRuntime, key: string, cost: number, now: number, out: Eval): boolean {
    const ks = rt.fastKs;
    if (ks === undefined || key !== ks.key || !this.fastPath || this.x !== undefined) return false;
    const core = this.core;
    if (rt.fastStamp !== core.stamp || rt.fastRefresh !== core.refreshes || cost > rt.fastRoom) return false;
    // the bucket its full evaluation rolled the window to (so no roll is due)
    const pos = now / rt.bw;
    if (rt.fastBucket !== Math.floor(pos)) return false;
    beginEval(out, rt, key, ks, true);
    out.pos = pos;
    ks.ref = true;
    rt.hotKey = key;
    rt.hotKs = ks;
    ks.addOffered(cost);
    core.touch(ks);
    allow(out, 'global', rt.fastRemaining - cost);
    out.resetMs = Math.ceil((ks.cur + rt.policy.buckets + 1) * rt.bw - now);
    return true;
  }

  /**
   * Evaluate `cost` on (`rt`, `key`) at `now` into `out`; nothing is spent (see {@link commit}).
   * `fast`: the caller commits this evaluation before evaluating another (a single key's check),
   * so what it leaves may be kept for the fast path (two evaluations of one key before either
   * commits would each count on the same room).
   */
  evaluate(rt: PolicyRuntime, key: string, cost: number, now: number, out: Eval, fast = false): void {
    beginEval(out, rt, key, undefined, false);
    if (rt.local) {
      this.evaluateLocal(rt, key, cost, now, out);
      return;
    }
    const core = this.core;
    const p = rt.policy;
    const L = p.limit;
    let ks: KeyState | undefined;
    const x = this.x;
    // the same key as the last decided on this policy: worth keeping the fast path for
    let hot = false;
    if (x !== undefined) {
      // a key not tracked here is decided as a new one would be, without creating it
      ks = rt.windows.get(key) ?? new KeyState(p.buckets, rt.idx, validateKey(key));
    } else if (key === rt.hotKey && rt.hotKs !== undefined) {
      ks = rt.hotKs;
      ks.ref = true;
      hot = true;
    } else {
      ks = rt.windows.get(key);
      if (ks === undefined) ks = core.createKey(rt, validateKey(key));
      else ks.ref = true;
      rt.hotKey = key;
      rt.hotKs = ks;
    }
    out.ks = ks;
    const kw = ks.window;
    const c = Math.floor(now / rt.bw);
    if (c > kw.cur) kw.roll(c);
    if (x === undefined) {
      kw.addOffered(cost);
      core.touch(ks);
      // what the fast path kept of this key holds no more once a request is decided without it
      // (one it could not hold, or after another key): keepFast, below, keeps it anew
      if (rt.fastKs === ks) rt.fastKs = undefined;
    }
    // weight of the oldest bucket still inside the window (after the fast path, which needs none)
    // the fraction from the bucket start, not from now / bw: exact at epoch-sized times
    const w = c < kw.cur ? 1 : 1 - (now - c * rt.bw) / rt.bw;
    if (x !== undefined) {
      const all = kw.estimate(w);
      const own = kw.ownEstimate(w);
      const floor = kw.floorEstimate(w);
      x.seen = { total: all, own, peers: all - own - floor, unattributed: floor };
      const pt = core.peers;
      x.members = {
        live: pt.live.length,
        stale: pt.stale.length,
        left: pt.left.length,
        otherVersion: rt.foreign.length,
        n: pt.splitN,
      };
    }
    out.resetMs = kw.hasCounts() ? Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now) : 0;

    if (cost > L) {
      deny(out, 'cost-exceeds-limit', 'global', Math.max(0, Math.floor(L - kw.estimate(w))), -1);
      return;
    }
    // Said its farewell (Engine.farewell): its peers keep no share of L for it, so it holds none.
    if (core.left) {
      deny(out, 'left-mesh', 'fallback', 0, -1);
      return;
    }
    const peers = core.peers;
    // Starting (EngineCore.startGate): nothing until the members we hear have heard us. A running
    // mesh keeps no share for a member it has not heard, so one taken before would come on top of
    // L (a pod restarted into a running mesh and deciding at once: bench:join-running).
    if (!core.startOpen && p.fallback && !core.startGate(now)) {
      const waitingMs = core.startWait(now);
      if (x !== undefined)
        x.starting = { heard: peers.live.length + 1, expected: peers.expectedMembers, waitingMs };
      deny(out, 'starting', 'fallback', 0, waitingMs);
      return;
    }
    if (peers.allStale && p.fallback) {
      const share = Math.floor(L / peers.splitN);
      const own = kw.ownEstimate(w);
      if (x !== undefined) x.fallback = { share, own };
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
    let est = kw.estimate(w);
    const staleR = peers.stale.length > 0 && p.fallback ? this.staleReserve(ks, w, L, now, p.windowMs) : 0;
    const foreignR = rt.foreign.length > 0 ? this.foreignReserve(rt, ks, w, L) : 0;
    // the share's reserve for peers deciding otherwise (naive admits on what it has seen)
    const controlled = p.overAdmission === 'controlled' && peers.live.length > 0;
    if (controlled && this.narrowStamp !== core.stamp) this.findNarrow();
    est += staleR + foreignR;
    if (x !== undefined) x.reserves = { stale: staleR, otherVersion: foreignR, narrowView: 0 };
    if (this.overLimit(out, ks, est, cost, now, rt, 'global')) return;
    // for the fast path: the share's terms of this evaluation (shareAllowance -1: none to keep:
    // a reserve or a narrow-view peer counted)
    this.shareAllowance = staleR + foreignR > 0 ? -1 : Number.POSITIVE_INFINITY;
    if (controlled) {
      // Everything peers admitted more than U ago has reached us (U = the
      // longest any live peer has been unseen); what they admitted since is
      // unknown. So the headroom left for the last U ms, L - E_old, is shared
      // by demand, and this node's own admissions in the last U ms may not
      // exceed its share. Summed over nodes that is at most L. A horizon of a window or more
      // (gossip slower than the window: g, delay or relay hops near W) holds too: nothing peers
      // admitted inside the window is then known to have reached us, so the whole of L is shared
      // and each node's admissions over the window stay within its share of it.
      const U = now - core.oldestSent;
      const narrow = this.narrow.length > 0;
      if (ks.shareStamp !== core.stamp || x !== undefined || narrow) this.computeShare(ks, rt);
      const u = Math.max(U, 0);
      const tU = now - u;
      const cU = Math.floor(tU / rt.bw);
      // In the bucket that straddles the horizon, peers' counts count wholly
      // as old (they may all precede the horizon; when the limit closes they
      // do, and a pro-rata split would under-count E_old). Our own count as
      // recent from two horizons back (one until a count of ours reached every
      // peer, one more until the peers' counts of its time reached us: a share
      // checked at admission must hold over both), by part of a bucket, or from
      // the straddling bucket's start where that is later (buckets no longer than
      // the horizon: much shorter ones, 20 ms at g = 100, passed L a little at 2 L).
      const since = this.since;
      const tO = Math.max(cU * rt.bw, tU - u);
      kw.countsSince(cU, tO / rt.bw, since);
      const recentAll = since[0]!;
      const ownRecent = since[1]!;
      // at most L: with the horizon at or before the window's oldest bucket, `recentAll` counts
      // that bucket whole where `est` weighs it by the part still inside
      const H = Math.min(L, L - est + recentAll);
      const narrowX = narrow ? this.narrowExcess(rt, ks, w, L, H) : 0;
      const allowance = ks.share * H - narrowX;
      if (x !== undefined) x.reserves!.narrowView = narrowX;
      if (x !== undefined)
        x.share = {
          horizonMs: U,
          recentCounts: recentAll,
          headroom: H,
          weight: this.weight,
          weights: this.weights,
          sharers: ks.sharers,
          share: ks.share,
          allowance,
          ownRecent,
        };
      // Tight: the allowance holds the request, and our own counts at our average rate over the
      // window would take half of it or more over two horizons at the configured interval,
      // 2 (g + D): requests keep coming near a share denial, under the limit one our peers'
      // unseen counts would not have needed. Faster gossip turns our counts old sooner, so ask
      // for it (Engine.wantsFastGossip) for two intervals more. Only a request asks (traffic that
      // keeps coming, not a burst that has passed), and the average, not the last two horizons'
      // counts: at 0.9 L on 32 nodes those dip under the line now and then on a node or another
      // (2-3 counts against 3), each dip held that node's ticks at g, and every other node's
      // horizon, set by its slowest peer, with them (9.3 % denied against 7.4, bench:two-sided).
      // With an allowance under the request (headroom thinner than a unit a node: heavy accounts)
      // it would buy nothing.
      if (x === undefined && cost <= allowance && this.tightByRate(kw, rt, allowance))
        core.tightUntil = now + 2 * core.cfg.gossipIntervalMs;
      if (ownRecent + cost > allowance + 1e-9) {
        deny(
          out,
          'headroom-share',
          'global',
          Math.floor(allowance - ownRecent),
          this.shareRetry(ks, rt, cU, tO, U, ownRecent, cost, H, est, now, narrowX),
        );
        return;
      }
      if (narrow) this.shareAllowance = -1;
      else if (this.shareAllowance > 0) {
        this.shareAllowance = allowance;
        this.shareOwn = ownRecent;
        this.shareTO = tO;
        this.shareCU = cU;
      }
    }
    // Joined a mesh whose members named one this node has not heard, and its late sync not
    // merged yet: the start-up share, whatever the rule above gave (a pod gone as this one joined
    // may have admitted the key unseen; see EngineCore.awaitNames).
    if (core.awaitNames.size > 0 && now < core.holdUntil && p.fallback) {
      // the members named and not heard count in N
      const share = Math.floor(L / (peers.splitN + core.awaitNames.size));
      const own = kw.ownEstimate(w);
      if (x !== undefined) x.startupHold = { share, own, untilMs: core.holdUntil - now };
      if (own + cost > share + 1e-9) {
        deny(out, 'startup-hold', 'fallback', Math.max(0, Math.floor(share - own)), core.holdUntil - now);
        return;
      }
    }
    if (!this.frontAllows(rt, ks, cost, now, out, 'global')) return;
    allow(out, 'global', Math.floor(L - est - cost + 1e-9));
    out.resetMs = Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now);
    // a single key's check (committed before any other evaluation): what it leaves is kept
    if (fast && hot) this.keepFast(rt, ks, c, L - est - cost, cost, controlled, out.remaining);
  }

  /**
   * The fast path's room after a single key's full evaluation admitted (see PolicyRuntime.fastKs):
   * the least of what is left of the global check (`globalRoom`) and of this node's share, with
   * the terms the evaluation left in `share*`. Until the view or the bucket changes only time
   * passes: the window sheds counts (more headroom) and the line stays; our own counts may count
   * as recent back to the straddling bucket's start, so those are counted.
   */
  private keepFast(
    rt: PolicyRuntime,
    ks: KeyState,
    c: number,
    globalRoom: number,
    cost: number,
    controlled: boolean,
    remaining: number,
  ): void {
    const core = this.core;
    let room = globalRoom;
    if (rt.algo !== undefined || core.awaitNames.size > 0 || this.shareAllowance < 0) room = -1;
    else if (controlled) {
      let own = this.shareOwn;
      if (this.shareTO > this.shareCU * rt.bw) {
        ks.window.countsSince(this.shareCU, this.shareCU, this.since);
        own = this.since[1]!;
      }
      room = Math.min(room, this.shareAllowance - own - cost);
      // not tight yet: the fast path stops where our average rate would make the key tight, so
      // that a full evaluation asks for fast gossip (evaluate, "Tight")
      if (core.tightUntil <= core.lastNow) {
        room = Math.min(
          room,
          (TIGHT_PART * this.shareAllowance) / this.tightPart(rt) - ks.window.ownTotal() - cost,
        );
      }
    }
    if (room >= 1 - 1e-9) {
      rt.fastKs = ks;
      rt.fastStamp = core.stamp;
      rt.fastRefresh = core.refreshes;
      rt.fastBucket = c;
      rt.fastRoom = room + 1e-9;
      rt.fastRemaining = remaining;
    } else rt.fastKs = undefined;
  }

  /**
   * When a request denied by its share would pass if nothing else arrived (the horizon staying U,
   * the share as it is): as the horizon passes each recent bucket's end, our own counts there
   * leave the recent ones and every count there joins the older ones the headroom is left by; once
   * all are older, as the window sheds enough counts for the share of the headroom to hold the
   * cost. Never (-1) when the share of the whole of L cannot.
   */
  private shareRetry(
    ks: KeyState,
    rt: PolicyRuntime,
    cU: number,
    tO: number,
    U: number,
    ownRecent: number,
    cost: number,
    H: number,
    est: number,
    now: number,
    narrowX: number,
  ): number {
    const kw = ks.window;
    const share = ks.share;
    const L = rt.policy.limit;
    if (!(share > 0) || cost > L * share + 1e-9) return -1;
    const u = Math.max(U, 0);
    const uO = Math.max(now - tO, u);
    const from = tO / rt.bw;
    let own = ownRecent;
    let h = H;
    for (let b = Math.max(Math.min(Math.floor(from), cU), kw.cur - kw.k); b <= kw.cur; b++) {
      // peers' counts up to the horizon's bucket already count as older, and our own before tO
      const ownHere = kw.ownInBucket(b, from);
      own -= ownHere;
      h -= b <= cU ? ownHere : kw.sumOf(kw.slotOf(b));
      if (own + cost <= share * h - narrowX + 1e-9) return (b + 1) * rt.bw + (b <= cU ? uO : u) - now;
    }
    const after = (kw.cur + 1) * rt.bw + u - now;
    return Math.max(after, kw.timeToDrain(est - L + cost / share, false, now, rt.bw));
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
    let pos: number;
    if (e.fast && rt.fastKs === ks) {
      rt.fastRoom -= cost;
      rt.fastRemaining -= cost;
      pos = e.pos;
    } else pos = now / rt.bw;
    kw.addOwn(cost, pos - kw.cur);
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
    if (entry === undefined && this.x !== undefined) {
      // explain: a key not tracked here is decided as a new one would be, without creating it
      entry = { state: algo.init(now), last: now, ref: false };
      validateKey(key);
    } else if (entry === undefined) {
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

  /**
   * Controlled mode: this node's share of a key's headroom, until the view changes. Every sharer
   * (this node and each live peer on our version of the policy) weighs the more of its demand for
   * the key (cost offered over a window, up to L) and the room: the level r at which the weights
   * max(demand, r) fill L where the demands leave room (water-filling; 0 where they fill it). A
   * node whose demand its peers have not heard yet still holds the room; where the demands fill
   * L, the headroom goes by demand. This node weighs each peer by the report it holds of it, and
   * itself by the least of its own reports any peer may hold (selfDemand). A node's share, its
   * weight over L (or over the demands where they fill it), falls as any other's demand rises
   * (the level falls) and rises only with its own, so every node's share is at most the one it
   * would have on the view of the demands each node holds for itself, and those shares sum to
   * one: the shares the nodes take sum to at most one. (An equal part of L less the demands, as
   * the room was before, let a node's share rise when another's demand rose under it: with 50 of
   * L = 100 ours and 3 peers at 0, one peer's 0 -> 5 took our share from 0.571 to 0.597.)
   */
  private computeShare(ks: KeyState, rt: PolicyRuntime): void {
    const W = rt.policy.windowMs;
    const L = rt.policy.limit;
    const kw = ks.window;
    const core = this.core;
    const live = core.peers.live;
    const foreign = rt.foreign;
    const ds = this.demands;
    // members on another version of the policy are not sharers: foreignReserve counts them
    let sharers = 1;
    // a report every live peer has sent since (plus the data's delay) reached each of them
    const reached = core.oldestSent - core.cfg.dataDelayMs;
    const own = selfDemand(ks, reached, core.builtAt, W, L);
    let demands = own;
    let top = own;
    for (let i = 0; i < live.length; i++) {
      const peer = live[i]!;
      if (foreign.length > 0 && foreign.indexOf(peer) >= 0) continue;
      const o = peer.idx;
      const d = kw.hasOrigin(o) ? faded(kw.demandOf(o), kw.demandAt(o), peer.lastHeard, W, L) : 0;
      if (sharers > ds.length) ds.push(d);
      else ds[sharers - 1] = d;
      sharers++;
      demands += d;
      if (d > top) top = d;
    }
    // Peers that left by a farewell: their last demand, fading over a window by our time (it is not
    // renewed), still weighs, though they admit nothing more: the shares the live nodes take while
    // their views settle stay as they were.
    let gone = 0;
    const left = core.peers.left;
    for (let i = 0; i < left.length; i++) {
      const o = left[i]!.idx;
      if (kw.hasOrigin(o)) gone += faded(kw.demandOf(o), kw.demandAt(o), core.lastNow, W, L);
    }
    demands += gone;
    // the water level: the even one where every demand is under it (no sort)
    const even = (L - gone) / sharers;
    const room =
      demands >= L ? 0 : top <= even ? even : waterLevel(own, ds, sharers - 1, L - gone, this.sorted);
    const mine = own > room ? own : room;
    let total = mine + gone;
    for (let i = 0; i < sharers - 1; i++) total += ds[i]! > room ? ds[i]! : room;
    ks.share = mine / total;
    this.weight = mine;
    this.weights = total;
    this.room = room;
    ks.sharers = sharers;
    ks.shareStamp = core.stamp;
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
 * The water level r (> 0) at which the sharers' weights max(demand, r) add up to `fill`: `own`
 * and the first `n` of `peers`, whose demands add up to less than `fill`. Sorted ascending, the
 * k smallest demands are under the level, r = (fill − the rest) / k, for the largest k where the
 * k-th smallest is at most that (every demand under the even level fill / (n + 1): that level,
 * which computeShare finds without calling this).
 */
export function waterLevel(
  own: number,
  peers: readonly number[],
  n: number,
  fill: number,
  scratch: number[],
): number {
  const a = scratch;
  a.length = 0;
  a.push(own);
  for (let i = 0; i < n; i++) a.push(peers[i]!);
  a.sort((x, y) => x - y);
  let above = 0;
  for (let k = a.length; k >= 1; k--) {
    const r = (fill - above) / k;
    if (a[k - 1]! <= r) return r;
    above += a[k - 1]!;
  }
  return 0;
}
