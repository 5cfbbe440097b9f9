import { createHmac } from 'node:crypto';
import { validateKey } from '../keys/key.js';
import type { DecisionRule, OwnerInfo } from '../types.js';
import type { EngineCore, PolicyRuntime } from './core.js';
import type { KeyState } from './key-state.js';
import { beginEval, type Eval, type Rule } from './rule.js';

/**
 * Thin keys decided by their owner (issue 27, docs/owner.md).
 *
 * A key of a policy placed on an owner (`placement: 'owner'`, or `'auto'` while L < 4 N) is
 * decided by one member, its owner: the highest rendezvous score of (policy, key, member) over
 * the live members and this node, the same on every node with the same view. The owner decides
 * exactly against its window: its own admissions of the key are logged with their times (exact,
 * not by bucket), every other origin's counts count whole (they carry no times), members stale
 * count as spending at least L/N as the local rule has it; it admits while that sum + cost <= L,
 * the naive rule's check on a state no other node adds to. Its admissions are its own counts,
 * gossiped as every count is, so a new owner starts from the window it already holds.
 *
 * The invariant that keeps the change of owner on the safe side: **a node decides a key alone
 * only while no other node may be deciding it, and what others decided before has reached it**:
 * no member joined its view within a hold period (a staleness period, the data's age and a
 * gossip interval: the joiner and the previous owner hear each other, and the previous owner's
 * last admissions reach us, within that), and it owned the key under every view that ended
 * within g + D (a member gone stale has been silent for a staleness period, so its admissions
 * are here; what askers decided without it meanwhile arrives within g + D). Until then, and on any node that cannot reach the owner (policy
 * `failureMode: open`), the key is decided by the local rule (rule.ts), which never passes L on
 * its own: the change costs at most false denials for a hold period, never a window past L.
 */

/** `auto` places a policy on owners while L is under this many units per live member (L < 4 N). */
export const OWNER_BELOW_UNITS = 4;

/** Membership views kept for the hold (older ones are remembered as one time: {@link Owners.lostUntil}). */
const VIEW_HISTORY = 32;
/** Owned keys whose hash is cached (cleared whole past this). */
const HASH_CACHE = 65_536;
/** Most admissions one key's log keeps (past this the oldest are dropped, and own counts count by bucket). */
const LOG_MAX = 4_096;

/** One membership view: the live members and this node, sorted by id, and their hashes. */
interface View {
  ids: string[];
  hashes: number[];
  /** When (ours) it was replaced; +Infinity for the current one. */
  until: number;
}

/** Own admissions of one key, with their times: the owner's exact count. */
class OwnLog {
  t: Float64Array;
  c: Float64Array;
  head = 0;
  n = 0;
  sum = 0;
  /** The newest admission dropped for room (own counts count by bucket while it is in the window). */
  lostAt = Number.NEGATIVE_INFINITY;
  /** Own counts made before logging started are in the window until then (counted by bucket). */
  unloggedUntil: number;

  constructor(cap: number, unloggedUntil: number) {
    this.t = new Float64Array(cap);
    this.c = new Float64Array(cap);
    this.unloggedUntil = unloggedUntil;
  }

  /** Drop what left the window (t <= now - W). */
  expire(now: number, W: number): void {
    const cap = this.t.length;
    while (this.n > 0 && this.t[this.head]! <= now - W) {
      this.sum -= this.c[this.head]!;
      this.head = (this.head + 1) % cap;
      this.n--;
    }
    if (this.n === 0) this.sum = 0;
  }

  add(at: number, cost: number, limitCap: number): void {
    let cap = this.t.length;
    if (this.n === cap) {
      if (cap < limitCap) {
        const t = new Float64Array(Math.min(limitCap, cap * 2));
        const c = new Float64Array(t.length);
        for (let i = 0; i < this.n; i++) {
          t[i] = this.t[(this.head + i) % cap]!;
          c[i] = this.c[(this.head + i) % cap]!;
        }
        this.t = t;
        this.c = c;
        this.head = 0;
        cap = t.length;
      } else {
        this.lostAt = this.t[this.head]!;
        this.sum -= this.c[this.head]!;
        this.head = (this.head + 1) % cap;
        this.n--;
      }
    }
    const i = (this.head + this.n) % cap;
    this.t[i] = at;
    this.c[i] = cost;
    this.n++;
    this.sum += cost;
  }

  /** When `need` of the logged cost will have left the window (-1: the log does not hold that much). */
  drainedAt(need: number, W: number): number {
    const cap = this.t.length;
    let freed = 0;
    for (let k = 0; k < this.n; k++) {
      const i = (this.head + k) % cap;
      freed += this.c[i]!;
      if (freed >= need - 1e-9) return this.t[i]! + W;
    }
    return -1;
  }
}

/** Counters of owner placement (Engine.ownerStats). */
export interface OwnerStats {
  /** Decisions made here as the settled owner (exact). */
  decidedAsOwner: number;
  /** Decisions made here by the local rule on a key this node owns, its ownership settling. */
  settling: number;
  /** Decisions made here by the local rule on a key this node owns, peers deciding it too (OwnerInfo reason `shared`). */
  shared: number;
  /** Asks from other members answered, and refused (by reason: not-owner, bad-policy, bad-key, bad-cost). */
  answered: number;
  refused: Record<string, number>;
  /**
   * Denials of keys owned elsewhere made here without asking: the counts seen that are certainly
   * inside the window already fill L (OwnerInfo reason `full`).
   */
  deniedFull: number;
  /** Decisions on keys owned elsewhere made here without the owner's answer, by reason (OwnerInfo.reason). */
  fallback: Record<string, number>;
  /** Of those, denied because the policy fails closed. */
  failedClosed: number;
  /** Membership views seen (each change of the live members). */
  views: number;
}

/**
 * Owner placement for one engine: who owns a key, whether this node's ownership is settled,
 * and the owner's exact decision. Hooked into the engine by a few calls (engine.ts, the block
 * marked "owner placement").
 */
export class Owners {
  readonly stats: OwnerStats = {
    decidedAsOwner: 0,
    settling: 0,
    shared: 0,
    answered: 0,
    deniedFull: 0,
    refused: {},
    fallback: {},
    failedClosed: 0,
    views: 0,
  };
  private secret: Buffer = Buffer.from('ratemesh/owner/1');
  private readonly memberHash = new Map<string, number>();
  private readonly keyHash = new Map<string, number>();
  private cur: View;
  private history: View[] = [];
  /** Views dropped from the history for room: the newest one's end (it may still bind). */
  private lostUntil = Number.NEGATIVE_INFINITY;
  private liveRef: unknown;
  /** When (ours) a view last gained a member: every key waits a hold period after. */
  private addedAt = Number.NEGATIVE_INFINITY;
  private readonly logs = new WeakMap<KeyState, OwnLog>();
  /**
   * How long a view that gained a member binds every key: a staleness period, the data's age and
   * a gossip interval (the member and the previous owner each hear the other within about g + D,
   * and what the previous owner admitted until then reaches us within g + D more).
   */
  readonly holdMs: number;
  /**
   * How long a view that lost a member binds the keys it owned: a gossip interval and the data's
   * age (what nodes that could not ask it decided meanwhile, by the local rule, reaches us by then).
   */
  readonly goneHoldMs: number;

  constructor(
    private readonly core: EngineCore,
    private readonly rule: Rule,
  ) {
    const cfg = core.cfg;
    this.holdMs = cfg.staleAfterMs + cfg.dataDelayMs + cfg.gossipIntervalMs;
    this.goneHoldMs = cfg.gossipIntervalMs + cfg.dataDelayMs;
    const self = core.nodeId;
    this.cur = { ids: [self], hashes: [this.hashMember(self)], until: Number.POSITIVE_INFINITY };
    this.liveRef = undefined;
  }

  /**
   * Key the rendezvous hash with a secret (the mesh's psk when one is set): who owns which key is
   * then unknown to anyone without it (docs/security.md). Every member must use the same secret.
   */
  setSecret(secret: Uint8Array): void {
    this.secret = Buffer.concat([Buffer.from('ratemesh/owner/1\u0000'), Buffer.from(secret)]);
    this.memberHash.clear();
    this.keyHash.clear();
    this.cur = {
      ids: this.cur.ids,
      hashes: this.cur.ids.map((id) => this.hashMember(id)),
      until: this.cur.until,
    };
    for (const v of this.history) v.hashes = v.ids.map((id) => this.hashMember(id));
  }

  /**
   * Asks can travel (a mesh node with the owner protocol, the simulator's OwnerSim): until the
   * transport says so the engine decides every key by the local rule, as an engine that only
   * answers synchronous checks must (no node could ask the owner).
   */
  enabled = false;

  /** Whether `rt`'s keys are decided by their owner now (a global policy, placement owner or auto and thin). */
  placed(rt: PolicyRuntime): boolean {
    const pl = rt.policy.placement;
    if (!this.enabled || pl === 'local' || rt.local) return false;
    if (pl === 'owner') return true;
    return rt.policy.limit < OWNER_BELOW_UNITS * (this.core.peers.live.length + 1);
  }

  /** Placement under a past view of `n` members. */
  private placedAt(rt: PolicyRuntime, n: number): boolean {
    const pl = rt.policy.placement;
    if (pl === 'owner') return true;
    return rt.policy.limit < OWNER_BELOW_UNITS * n;
  }

  /** The owner of (`rt`, `key`) in this node's current view. */
  ownerOf(rt: PolicyRuntime, key: string, now: number): string {
    this.refreshView(now);
    return this.pick(this.cur, this.hashKey(rt.policy.name, key));
  }

  /**
   * Whether this node may decide (`rt`, `key`) alone: it owns it in the current view and in every
   * view that ended within a hold period, the policy was placed on owners in each, no view
   * gained a member within a hold period (that member may have decided the key under a view
   * without this node: a join, a partition healed), and the view is not all stale (a node cut
   * off from every peer decides by the local rule's fallback).
   */
  settled(rt: PolicyRuntime, key: string, now: number): boolean {
    const peers = this.core.peers;
    // starting (EngineCore.startGate): decides nothing, as owner neither
    if (peers.allStale || !this.core.startGate(now)) return false;
    this.refreshView(now);
    // a member heard anew (a join, a heal, a start) may have decided under a view without us,
    // until its newest message names the members we have: it then decides with this view (asks
    // the owner), and that message carried what it admitted before (see viewsAgree)
    if (this.lostUntil > now - this.goneHoldMs) return false;
    if (this.addedAt > now - this.holdMs && !this.viewsAgree()) return false;
    // a member gone (stale): what it admitted before it went silent reached us long before; what
    // nodes that could not ask it decided meanwhile (the local rule) reaches us within g + D
    const h = this.hashKey(rt.policy.name, key);
    const self = this.core.nodeId;
    if (this.pick(this.cur, h) !== self) return false;
    for (let i = this.history.length - 1; i >= 0; i--) {
      const v = this.history[i]!;
      if (v.until <= now - this.goneHoldMs) break;
      if (v.ids.length === 0) return false;
      if (!this.placedAt(rt, v.ids.length) || this.pick(v, h) !== self) return false;
    }
    return true;
  }

  /**
   * Whether every live peer's newest message names as many members as we hear (this node
   * included): none of them still decides under a view without some of us. Each formed that
   * view before it sent the message, and the message carries every count it had admitted
   * until then (by its own view's rule); since, it asks the owner. Kept per view stamp.
   */
  private viewsAgree(): boolean {
    const core = this.core;
    if (this.agreeStamp === core.stamp) return this.agree;
    const live = core.peers.live;
    const n = live.length + 1;
    let agree = true;
    for (let i = 0; i < live.length; i++)
      if (live[i]!.members !== n) {
        agree = false;
        break;
      }
    this.agree = agree;
    this.agreeStamp = core.stamp;
    return agree;
  }
  private agree = false;
  private agreeStamp = -1;

  /**
   * Evaluate a key of a placed policy into `out` (nothing spent: the engine commits, then calls
   * {@link committed}). The settled owner decides exactly; otherwise the local rule decides and
   * the returned info says why (`reason`: `asked` by an ask's caller, else `sync-check` for a key
   * owned elsewhere, `settling` for one owned here).
   */
  evaluate(
    rt: PolicyRuntime,
    key: string,
    cost: number,
    now: number,
    out: Eval,
    reason?: OwnerInfo['reason'],
  ): OwnerInfo {
    const owner = this.ownerOf(rt, key, now);
    const self = this.core.nodeId;
    if (owner === self && this.settled(rt, key, now) && !this.othersDecide(rt, key, now)) {
      this.exact(rt, key, cost, now, out);
      this.stats.decidedAsOwner++;
      return { id: owner, decidedBy: 'owner' };
    }
    if (owner !== self && this.seenFull(rt, key, cost, now, out)) {
      this.stats.deniedFull++;
      return { id: owner, decidedBy: 'local', reason: 'full' };
    }
    this.rule.evaluate(rt, key, cost, now, out);
    const why =
      owner !== self ? (reason ?? 'sync-check') : this.settled(rt, key, now) ? 'shared' : 'settling';
    if (why === 'settling') this.stats.settling++;
    else if (why === 'shared') this.stats.shared++;
    else this.stats.fallback[why] = (this.stats.fallback[why] ?? 0) + 1;
    return { id: owner, decidedBy: 'local', reason: why };
  }

  /**
   * Whether a live peer carried demand for the key in gossip that reached us within a hold period:
   * it decided the key by the local rule lately (a synchronous check, an ask that failed open),
   * so the owner shares the headroom by the same rule for now instead of deciding alone (its
   * exact decision would not count what that peer admitted and we have not seen yet). A node
   * that asks again carries the key no more, and within a hold period the owner decides alone
   * again on a window that holds what the peer admitted.
   */
  private othersDecide(rt: PolicyRuntime, key: string, now: number): boolean {
    const ks = rt.windows.get(key);
    if (ks === undefined) return false;
    const kw = ks.window;
    const live = this.core.peers.live;
    for (let i = 0; i < live.length; i++) {
      const o = live[i]!.idx;
      if (kw.hasOrigin(o) && kw.demandOf(o) > 0 && now - kw.demandAt(o) < this.holdMs) return true;
    }
    return false;
  }

  /**
   * Whether the counts this node holds of (`rt`, `key`) that are certainly inside the window
   * already leave no room for `cost`: the full-weight buckets (every one of them starts after
   * now - W, so each count there was admitted inside the window; the oldest, straddling bucket
   * is left out), every origin's counts and the floor. Then the key's owner, and an exact
   * limiter on the same admissions, deny it too, and this node denies it without asking
   * (`out` is the denial, Retry-After when enough of those buckets have left): an attacker's
   * spray or a hot key costs asks only until its admissions have reached the nodes. Nothing is
   * created or offered (a denial here reports no demand: the owner keeps deciding alone).
   */
  seenFull(rt: PolicyRuntime, key: string, cost: number, now: number, out: Eval): boolean {
    const ks = rt.windows.get(key);
    if (ks === undefined) return false;
    const kw = ks.window;
    const bw = rt.bw;
    const c = Math.floor(now / bw);
    if (c > kw.cur) kw.roll(c);
    const L = rt.policy.limit;
    const seen = kw.full;
    if (!(seen + cost > L + 1e-9)) return false;
    // bucket b leaves the full-weight ones when it becomes the oldest, at (b + k) * bw
    const k = kw.k;
    let need = seen + cost - L;
    let at = (kw.cur + 1 + k) * bw;
    for (let b = kw.cur - k + 1; b <= kw.cur + 1; b++) {
      need -= kw.sumOf(kw.slotOf(b));
      if (need <= 1e-9) {
        at = (b + k) * bw;
        break;
      }
    }
    beginEval(out, rt, key, ks, false);
    out.resetMs = Math.ceil((kw.cur + rt.policy.buckets + 1) * bw - now);
    deny(
      out,
      cost > L ? 'cost-exceeds-limit' : 'global-limit',
      Math.floor(L - seen),
      cost > L ? -1 : at - now,
    );
    return true;
  }

  /** After the engine committed an evaluation of a placed policy: the owner's log of its own admissions. */
  committed(e: Eval, cost: number, now: number): void {
    const ks = e.ks;
    const rt = e.rt;
    if (ks === undefined || rt === undefined || rt.local) return;
    const W = rt.policy.windowMs;
    let log = this.logs.get(ks);
    if (log === undefined) {
      // own counts already in the window (this commit's just added) were made before logging
      const before = ks.window.ownEstimate(1) - cost;
      log = new OwnLog(
        Math.min(LOG_MAX, Math.max(8, Math.ceil(rt.policy.limit) + 1)),
        before > 1e-9 ? now + W + rt.bw : Number.NEGATIVE_INFINITY,
      );
      this.logs.set(ks, log);
    }
    log.expire(now, W);
    log.add(now, cost, LOG_MAX);
  }

  /** The owner's exact decision (see the module comment). */
  private exact(rt: PolicyRuntime, key: string, cost: number, now: number, out: Eval): void {
    const core = this.core;
    const p = rt.policy;
    const L = p.limit;
    let ks = rt.windows.get(key);
    if (ks === undefined) ks = core.createKey(rt, validateKey(key));
    else ks.ref = true;
    beginEval(out, rt, key, ks, false);
    const kw = ks.window;
    const c = Math.floor(now / rt.bw);
    if (c > kw.cur) kw.roll(c);
    const w = c < kw.cur ? 1 : 1 - (now - c * rt.bw) / rt.bw;
    kw.addOffered(cost);
    core.touch(ks);
    out.resetMs = kw.hasCounts() ? Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now) : 0;
    if (cost > L) {
      deny(out, 'cost-exceeds-limit', Math.floor(L - kw.estimateWhole(w)), -1);
      return;
    }
    if (core.left) {
      deny(out, 'fallback-share', 0, -1);
      return;
    }
    const W = p.windowMs;
    // others' counts whole (they carry no times), our own exactly from the log
    const ownBucketed = kw.ownEstimate(w);
    const others = Math.max(0, kw.estimateWhole(w) - ownBucketed);
    const log = this.logs.get(ks);
    let own: number;
    let exactOwn = false;
    if (log === undefined) {
      own = ownBucketed > 1e-9 ? sum(kw.ownCounts()) : 0;
      exactOwn = !(own > 0);
    } else {
      log.expire(now, W);
      if (log.unloggedUntil > now || log.lostAt > now - W) own = sum(kw.ownCounts());
      else {
        own = log.sum;
        exactOwn = true;
      }
    }
    let est = others + own;
    // members stale may be deciding alone (cut off, their fallback share): at least L/N each
    const peers = core.peers;
    if (peers.stale.length > 0 && p.fallback) {
      const perPeer = L / peers.splitN;
      for (const sp of peers.stale) {
        const seen = kw.peerEstimate(sp.idx, 1);
        if (perPeer > seen) est += perPeer - seen;
      }
    }
    if (est + cost > L + 1e-9) {
      const need = est + cost - L;
      let retry = -1;
      if (exactOwn && log !== undefined && others <= 1e-9) {
        const at = log.drainedAt(need, W);
        if (at >= 0) retry = at - now;
      }
      if (retry < 0) retry = kw.timeToDrain(need, false, now, rt.bw);
      deny(out, 'global-limit', Math.floor(L - est), retry);
      return;
    }
    // a front local limiter, when the policy has one, on the node that decides
    const algo = rt.algo;
    if (algo !== undefined && cost > 0) {
      if (ks.local === undefined) ks.local = algo.init(now);
      const r = core.algoOut;
      if (!algo.check(ks.local, cost, now, r)) {
        deny(out, 'local-limit', r.remaining, r.retryAfterMs);
        return;
      }
      out.delayMs = r.delayMs;
    }
    out.allowed = true;
    out.rule = 'allow';
    out.mode = 'global';
    out.remaining = Math.max(0, Math.floor(L - est - cost + 1e-9));
    out.retryAfterMs = 0;
    out.resetMs = Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now);
  }

  /** Count an ask refused by reason. */
  refuse(reason: string): void {
    this.stats.refused[reason] = (this.stats.refused[reason] ?? 0) + 1;
  }

  // ---- views and hashes

  /**
   * Take the live members' view when the peer table changed it (the engine calls this on every
   * gossip message in and out, so a change is dated within a gossip interval of when the peer
   * table made it; dated late is the safe side: the hold runs from then).
   */
  refreshView(now: number): void {
    const live = this.core.peers.live;
    if (live === this.liveRef) return;
    this.liveRef = live;
    const ids = [this.core.nodeId];
    for (let i = 0; i < live.length; i++) ids.push(live[i]!.id);
    ids.sort();
    const prev = this.cur.ids;
    if (ids.length === prev.length) {
      let same = true;
      for (let i = 0; i < ids.length; i++)
        if (ids[i] !== prev[i]) {
          same = false;
          break;
        }
      if (same) return;
    }
    // a member in the new view and not in the old one
    const had = new Set(prev);
    for (const id of ids)
      if (!had.has(id)) {
        this.addedAt = now;
        break;
      }
    this.cur.until = now;
    this.history.push(this.cur);
    // past views stay while they bind, at most VIEW_HISTORY of them
    while (this.history.length > 0 && this.history[0]!.until <= now - this.goneHoldMs) this.history.shift();
    while (this.history.length > VIEW_HISTORY) {
      const v = this.history.shift()!;
      if (v.until > this.lostUntil) this.lostUntil = v.until;
    }
    this.cur = { ids, hashes: ids.map((id) => this.hashMember(id)), until: Number.POSITIVE_INFINITY };
    this.stats.views++;
    if (this.memberHash.size > 4 * ids.length + 1024) {
      this.memberHash.clear();
      this.cur.hashes = ids.map((id) => this.hashMember(id));
    }
  }

  /** The member of `v` with the highest rendezvous score for key hash `h` (ties: the lower id). */
  private pick(v: View, h: number): string {
    let best = -1;
    let at = 0;
    for (let i = 0; i < v.ids.length; i++) {
      const s = score(h, v.hashes[i]!);
      if (s > best) {
        best = s;
        at = i;
      }
    }
    return v.ids[at]!;
  }

  private hashMember(id: string): number {
    let h = this.memberHash.get(id);
    if (h === undefined) {
      h = createHmac('sha256', this.secret).update('m\u0000').update(id).digest().readUInt32LE(0);
      this.memberHash.set(id, h);
    }
    return h;
  }

  private hashKey(policy: string, key: string): number {
    const k = `${policy}\u0000${key}`;
    let h = this.keyHash.get(k);
    if (h === undefined) {
      h = createHmac('sha256', this.secret).update('k\u0000').update(k).digest().readUInt32LE(0);
      if (this.keyHash.size >= HASH_CACHE) this.keyHash.clear();
      this.keyHash.set(k, h);
    }
    return h;
  }
}

/** Rendezvous score of a member (hash `m`) for a key (hash `h`): murmur3's finaliser over both. */
export function score(h: number, m: number): number {
  let x = (h ^ Math.imul(m, 0x9e3779b1)) >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  x = Math.imul(x ^ m, 0x27d4eb2f);
  x ^= x >>> 15;
  return x >>> 0;
}

function sum(xs: readonly number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s;
}

function deny(out: Eval, rule: DecisionRule, remaining: number, retryAfterMs: number): void {
  out.allowed = false;
  out.rule = rule;
  out.mode = 'global';
  out.remaining = Math.max(remaining, 0);
  out.retryAfterMs = retryAfterMs < 0 ? -1 : Math.max(1, Math.ceil(retryAfterMs));
}
