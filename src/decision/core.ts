import { createAlgorithm } from '../algorithms/index.js';
import { type AlgoResult, type LocalAlgorithm, newAlgoResult } from '../algorithms/types.js';
import { checkTime } from '../clock.js';
import type { WirePolicy } from '../crdt/codec.js';
import { ErrorCodes, RateMeshError } from '../errors.js';
import { KeyBudget, KeyStore, takeRef } from '../keys/key-store.js';
import { type PolicySet, policyVersion } from '../policy/index.js';
import type { Policy } from '../types.js';
import { defaultIgnoreMs, MAX_TIME, RETAIN_MAX_MS, TICK_TIMES_MASK } from './constants.js';
import { EvictedSketch } from './evicted-sketch.js';
import { KeyState, type LocalKeyState } from './key-state.js';
import type { EngineConfig } from './options.js';
import { type PeerState, PeerTable } from './peers.js';
import { type EngineStats, emptyEngineStats, type ReceiveResult } from './types.js';

/** One policy in force and its keys. */
export interface PolicyRuntime {
  readonly policy: Policy;
  /** {@link policyVersion} of the policy: what the wire carries for it. */
  readonly version: string;
  /** Position in the policy set (KeyState.policy); changes when the set is replaced. */
  idx: number;
  /** Bucket width W / k. */
  readonly bw: number;
  /** Front local algorithm (global scope) or the algorithm (local scope). */
  readonly algo: LocalAlgorithm<unknown> | undefined;
  /** Unsent own cost of a key that asks for an early publish. */
  readonly earlyAt: number;
  readonly local: boolean;
  /** Row of this policy in our messages' policy table (global policies, name-sorted); -1 for a local one. */
  wire: number;
  /** The last key decided on and its state: a hot key skips the map lookup. Cleared when the key is dropped. */
  hotKey: string | undefined;
  hotKs: KeyState | undefined;
  /**
   * The fast path (Rule.evaluateFast): the key whose last full evaluation admitted, on which view
   * (stamp, refreshes) and in which bucket, and what it left of the two checks (the global one and
   * this node's share) and of `remaining`: until the view or the bucket changes, time only adds
   * room (the window sheds counts; the line between seen and unseen counts stays), so a request
   * within what is left passes without the full evaluation. Any full evaluation of the key drops
   * it (Rule.evaluate), so no decision on the key is taken without the room knowing.
   */
  fastKs: KeyState | undefined;
  fastStamp: number;
  fastRefresh: number;
  fastBucket: number;
  fastRoom: number;
  fastRemaining: number;
  windows: KeyStore<KeyState>;
  locals: KeyStore<LocalKeyState>;
  /** What evicted keys had counted (created on the first live eviction). */
  sketch: EvictedSketch | undefined;
  /**
   * Members that said, in their newest message, that they run another version
   * of this policy: their counts for it are not merged, and each counts as
   * spending at least L/N (see foreignReserve). Parallel arrays (no allocation
   * on the decision path): the peer, when it last said so (ours), its version.
   */
  foreign: PeerState[];
  foreignAt: number[];
  foreignVer: string[];
}

/**
 * The state every part of the engine shares (the rule, gossip, sync, policy replacement) and
 * what they do to it in common: time, the peer view, the policies in force and their key
 * stores, foreign-version marks, counters. {@link Engine} is the public face over it.
 */
export class EngineCore {
  readonly cfg: EngineConfig;
  readonly nodeId: string;
  /** The policies in force. */
  policySet: PolicySet;
  readonly peers: PeerTable;
  readonly budget: KeyBudget;
  readonly counters: EngineStats = emptyEngineStats();
  /** Keys touched since they were last carried in gossip, or with own counts still in their window. */
  readonly dirty = new Set<KeyState>();
  readonly algoOut: AlgoResult = newAlgoResult();
  rts: PolicyRuntime[] = [];
  rtByName = new Map<string, PolicyRuntime>();
  /** The policy of the last check: a caller checking one policy skips the name lookup. */
  lastRt: PolicyRuntime | undefined;
  /** Our global policies by their row in our messages' policy table. */
  rtByWire: PolicyRuntime[] = [];
  /** The policy table our messages carry: every global policy, name-sorted, with its version. */
  wireTable: WirePolicy[] = [];
  maxWindowMs = 0;
  /** A departed peer is forgotten once its newest data is this old: its counts have left every window. */
  retainMs = 0;
  ignoreMs = 0;
  /** The latest time used; an earlier one counts as standing still. */
  lastNow = Number.NEGATIVE_INFINITY;
  private nextRefresh = Number.NEGATIVE_INFINITY;
  tick = 0;
  /** When (ours) each of the last ticks was built, by tick number & TICK_TIMES_MASK (Gossip.build). */
  readonly tickTimes = new Float64Array(TICK_TIMES_MASK + 1).fill(Number.NEGATIVE_INFINITY);
  /** When (ours) the last gossip message was built: our demand reports age from their send to it, as peers age them. */
  builtAt = Number.NEGATIVE_INFINITY;
  seq = 0;
  /** Loss repair: the next message resends every key sent in messages numbered this and up (Infinity: none asked). */
  repairFrom = Number.POSITIVE_INFINITY;
  /** The last repair made: from which message number, and in which message. */
  lastRepairFrom = 0;
  lastRepairAt = 0;
  /** When (ours) gossip last sent every key whole (anti-entropy), and last looked at the keys not due. */
  antiAt = 0;
  sweepAt = Number.NEGATIVE_INFINITY;
  /** Changes whenever the view changes (gossip in, own tick): demand shares are recomputed. */
  stamp = 0;
  /** Counts the view's refreshes (freshness, departures, the horizon: see refresh). */
  refreshes = 0;
  /** Some key's unsynced own count crossed its early-publish threshold. */
  early = false;
  /**
   * Until when (ours) this node asks to gossip fast (Engine.wantsFastGossip): some key was tight
   * at a request (see Rule.evaluate), plus two intervals. -Infinity: never asked.
   */
  tightUntil = Number.NEGATIVE_INFINITY;
  /**
   * Decides global policies: false while a node that expects peers starts (the start gate,
   * {@link startGate}). A running mesh keeps nothing for a member it has not heard, so a share
   * taken before the members have heard this node would come on top of L (docs/decision-rule.md,
   * "Starting").
   */
  startOpen: boolean;
  /** The mesh's join rule said this node joined (Engine.joined): with no member heard, stop waiting. */
  joinedSaid = false;
  /** When the mesh's join wait ends (Engine.joinWaitEnds; +Infinity: not told): with no member heard, the gate opens then, and its Retry-After counts down to it. */
  joinEndsAt = Number.POSITIVE_INFINITY;
  /** When (ours) this engine's first gossip message was built (+Infinity: none yet). */
  firstSentAt = Number.POSITIVE_INFINITY;
  /** Min over live peers of the time (ours) their newest data was sent. */
  oldestSent = Number.POSITIVE_INFINITY;
  /**
   * When this node should pull its peers' state once more (Engine.lateSyncDue): +Infinity until
   * its first sync answer sets it, NaN once due.
   */
  lateSyncAt = Number.POSITIVE_INFINITY;
  /** When the late sync was asked for (NaN before). */
  lateAskedAt = Number.NaN;
  /**
   * Until when this node, having joined a mesh, holds each key to its start-up share (L/N of
   * its own admissions over the window): until an answer to its late sync is merged, at most a
   * staleness period after that sync was due. A pod that replaced one at about the moment it
   * joined sees that pod's counts only then.
   */
  holdUntil = Number.NEGATIVE_INFINITY;
  /**
   * Members that sync answers named (live at a responder) and this node has not heard itself:
   * while any is left, and until {@link holdUntil}, each key is held to the start-up share. One
   * that is never heard is a pod gone as this node joined; the late sync brings its counts.
   */
  readonly awaitNames = new Set<string>();
  /**
   * This node has said its farewell (Engine.farewell): it decides no global policy any more
   * (its peers count it as departed and keep no share of L for it).
   */
  left = false;
  /** When (ours) a key with own counts still in its window was last evicted (-Infinity: never). */
  ownEvictedAt = Number.NEGATIVE_INFINITY;
  /** The live peer whose newest data is {@link oldestSent} (undefined when none). */
  private oldestPeer: PeerState | undefined;
  /**
   * The live peers ordered by sentOf, oldest first, as a list through PeerState.older/newer:
   * rebuilt when the view is refreshed, kept by heardLive in O(1) for a peer heard anew (its
   * data is then about the newest). `order` marks the current list.
   */
  private newestPeer: PeerState | undefined;
  private order = 0;
  /** (peer, policy, version) marks already logged. */
  private readonly warnedForeign = new Set<string>();
  /** Policies (name and window) already warned about slow gossip: see warnSlowGossip. */
  private readonly warnedSlow = new Set<string>();

  constructor(cfg: EngineConfig) {
    this.cfg = cfg;
    this.nodeId = cfg.nodeId;
    this.policySet = cfg.policySet;
    this.peers = new PeerTable(
      cfg.nodeId,
      cfg.staleAfterMs,
      cfg.departAfterMs,
      cfg.maxPeers,
      cfg.expectedMembers,
      cfg.dataDelayMs,
    );
    this.startOpen = cfg.expectedMembers <= 1 || cfg.rebuilt;
    this.windowBounds();
    this.budget = new KeyBudget(cfg.maxKeys);
    this.installRts(this.policySet.policies.map((policy, idx) => this.makeRt(policy, idx)));
  }

  // ---- policies in force

  /** The runtime of one policy of the set in force, with empty stores. */
  makeRt(policy: Policy, idx: number): PolicyRuntime {
    const rt = {
      policy,
      version: this.policySet.versionOf(policy.name) ?? policyVersion(policy),
      idx,
      bw: policy.windowMs / policy.buckets,
      algo:
        policy.local === undefined ? undefined : (createAlgorithm(policy.local) as LocalAlgorithm<unknown>),
      earlyAt: Math.max(1, Math.ceil(policy.limit * this.cfg.earlyPublishFraction)),
      local: policy.scope === 'local',
      wire: -1,
      hotKey: undefined,
      hotKs: undefined,
      fastKs: undefined,
      fastStamp: -1,
      fastRefresh: -1,
      fastBucket: Number.NaN,
      fastRoom: 0,
      fastRemaining: 0,
      sketch: undefined,
      foreign: [],
      foreignAt: [],
      foreignVer: [],
    } as unknown as PolicyRuntime;
    rt.windows = new KeyStore<KeyState>(this.budget, {
      isExpired: (ks) => this.windowExpired(rt, ks),
      onEvict: (key, ks, live) => this.forget(rt, key, ks, live),
      takeUsed: takeRef,
    });
    rt.locals = new KeyStore<LocalKeyState>(this.budget, {
      isExpired: (e) => rt.algo?.isIdle(e.state, this.lastNow) === true,
      onEvict: (key, e, live) => this.forgetLocal(rt, key, e, live),
      takeUsed: takeRef,
    });
    return rt;
  }

  /** Make `rts` the policies in force: lookups, the wire table (global policies, name-sorted). */
  installRts(rts: PolicyRuntime[]): void {
    this.rts = rts;
    this.rtByName = new Map(rts.map((rt) => [rt.policy.name, rt]));
    this.lastRt = undefined;
    this.rtByWire = rts
      .filter((rt) => !rt.local)
      .sort((a, b) => (a.policy.name < b.policy.name ? -1 : a.policy.name > b.policy.name ? 1 : 0));
    for (const rt of rts) rt.wire = -1;
    this.rtByWire.forEach((rt, i) => {
      rt.wire = i;
    });
    this.wireTable = this.rtByWire.map((rt) => ({ name: rt.policy.name, version: rt.version }));
    this.warnSlowGossip();
  }

  /**
   * Whether gossip is slow against `policy`'s window: a peer's newest admissions can go unheard
   * for about g + D (one interval until sent, D on the way, more through relays), and the
   * window is under twice that. A key whose demand starts on many nodes at once is then shared
   * on views that disagree for much of the window (bench:slow-gossip).
   */
  slowGossip(policy: Policy): boolean {
    return policy.windowMs < 2 * (this.cfg.gossipIntervalMs + this.cfg.dataDelayMs);
  }

  /**
   * Warns once per policy and window where gossip is slow (see {@link slowGossip}): a burst
   * after a lull on every node passes L by up to 6.3 % there (test/sim/slow-gossip.test.ts,
   * docs/decision-rule.md, known costs), naive policies by more.
   */
  private warnSlowGossip(): void {
    for (const rt of this.rtByWire) {
      const p = rt.policy;
      if (!this.slowGossip(p)) continue;
      const said = `slow\u0000${p.name}\u0000${p.windowMs}`;
      if (this.warnedSlow.has(said)) continue;
      if (this.warnedSlow.size >= 4096) this.warnedSlow.clear();
      this.warnedSlow.add(said);
      this.cfg.logger?.warn(
        {
          policy: p.name,
          windowMs: p.windowMs,
          gossipIntervalMs: this.cfg.gossipIntervalMs,
          dataDelayMs: this.cfg.dataDelayMs,
        },
        'ratemesh policy window is under twice the gossip horizon (gossipIntervalMs + data delay): views of the peers are a large part of the window old, so bursts on many nodes at once can pass the limit (overAdmission controlled: by a few percent, up to 6.3 % in a burst after a lull on every node; naive: by much more); lower gossipIntervalMs or lengthen the window',
      );
    }
  }

  /** Window-derived bounds: the longest window, how long departed peers are kept, the ignore period. */
  windowBounds(): void {
    let maxW = 0;
    let maxBw = 0;
    for (const p of this.policySet.policies) {
      if (p.windowMs > maxW) maxW = p.windowMs;
      if (p.windowMs / p.buckets > maxBw) maxBw = p.windowMs / p.buckets;
    }
    this.maxWindowMs = maxW;
    // A departed peer's newest counts sit at most in our bucket c + 1 of when we heard it; it is
    // kept that long, but no longer than RETAIN_MAX_MS: then its counts are folded into each key's
    // unattributed floor (they stay counted until they leave the window) and its slot is free, so
    // the table stays bounded by live members under churn however long the windows (a year).
    this.retainMs = Math.min(maxW + 2 * maxBw + 1, RETAIN_MAX_MS);
    // a peer that left counts in the split of L as long as it is kept (its counts may be in a window)
    this.peers.leftKeepMs = this.retainMs;
    this.ignoreMs = this.cfg.ignoreMs ?? defaultIgnoreMs(maxW);
  }

  // ---- time

  /** The clock's reading, validated and never earlier than one already used. */
  now(): number {
    return this.at(this.cfg.clock.now());
  }

  /** `t` validated and never earlier than a time already used (an earlier one counts as standing still). */
  at(t: number): number {
    // NaN fails this comparison: checkTime throws the clear error
    if (!(t >= this.lastNow)) {
      checkTime(t);
      this.counters.clockBackwards++;
      return this.lastNow;
    }
    if (t >= this.nextRefresh) {
      checkTime(t); // +Infinity lands here: nextRefresh is always finite once set
      // Bucket ids must stay exact integers (a ring loop at 2^60 ms would never end).
      if (!(t <= MAX_TIME && t >= -MAX_TIME)) {
        throw new RateMeshError(
          ErrorCodes.CLOCK_INVALID,
          `time must be within ±2^50 ms of the epoch (got ${String(t)})`,
        );
      }
      this.refresh(t);
    }
    this.lastNow = t;
    return t;
  }

  /** Re-derive the view at `now`: foreign marks, freshness and departures, forgotten peers, the horizon. */
  refresh(now: number): void {
    this.refreshes++;
    this.expireForeign(now);
    const departed = this.peers.refresh(now);
    if (departed.length > 0) {
      this.stamp++;
      for (const id of departed) this.departed(id);
    }
    const freed = this.peers.forgetDeparted(now, this.retainMs);
    if (freed.length > 0) this.clearOrigins(freed);
    this.nextRefresh = now + Math.max(1, Math.min(this.cfg.gossipIntervalMs, this.cfg.staleAfterMs / 4));
    this.updateOldestSent();
  }

  /**
   * The start gate at `now`: true (and kept) once this node may decide global policies.
   *
   * With no member ever heard: once the mesh's join rule says so (Engine.joined: the first pod,
   * or its join timeout) or `joinTimeoutMs` after our first message; it then decides as a node
   * cut off does (L/N). Else once every member it knows of has heard it ({@link heardUs}), every
   * member expected is heard, no member a sync answer named is unheard (until the late sync,
   * EngineCore.awaitNames), and no live member says it hears more members than we know of
   * (until the join wait after our first message has passed): every member that decides then
   * counts what we admit.
   */
  startGate(now: number): boolean {
    if (this.startOpen) return true;
    const peers = this.peers;
    let open: boolean;
    if (peers.live.length === 0 && peers.stale.length === 0) open = this.joinedSaid || now >= this.joinEnds();
    else
      open = !peers.starting && !(this.awaitNames.size > 0 && now < this.holdUntil) && this.heardByAll(now);
    if (open) {
      this.startOpen = true;
      this.stamp++;
    }
    return open;
  }

  /**
   * Every member we know of has heard us: its sync answer named this node (the answerer counts
   * the asker a member from its request on), or its newest message was sent D or more after the
   * first message we built with it live (ours had reached it by then). And no live one reports
   * more live members than we know of, until the join wait after our first message has passed.
   */
  private heardByAll(now: number): boolean {
    const peers = this.peers;
    const known = peers.live.length + peers.stale.length + 1;
    const waited = now - this.firstSentAt >= this.cfg.joinTimeoutMs;
    for (const p of peers.live) if (!this.hasHeardUs(p) || (p.members > known && !waited)) return false;
    for (const p of peers.stale) if (!this.hasHeardUs(p)) return false;
    return true;
  }

  /** Member `p` has heard us: its sync answer named us, or it sent D after our first message with it live. */
  private hasHeardUs(p: PeerState): boolean {
    return p.heardUs || this.sentOf(p) >= p.sentToAt + this.cfg.dataDelayMs;
  }

  /**
   * How long the start gate may stay shut from `now`, ms: with no member known, what is left of
   * the join wait (the mesh's, or ours from our first message): nothing arriving, it opens then;
   * with members known, a round (our next message and D), as their answers come.
   */
  startWait(now: number): number {
    const cfg = this.cfg;
    const round = cfg.gossipIntervalMs + cfg.dataDelayMs;
    if (this.peers.live.length > 0 || this.peers.stale.length > 0) return round;
    const ends = this.joinEnds();
    if (ends === Number.POSITIVE_INFINITY) return round;
    return Math.max(1, Math.ceil(ends - now));
  }

  /** When the join wait ends with no member heard: the mesh's, or ours from our first message, whichever first (+Infinity: neither). */
  private joinEnds(): number {
    return Math.min(this.joinEndsAt, this.firstSentAt + this.cfg.joinTimeoutMs);
  }

  /** Count and log a member's departure. */
  departed(id: string): void {
    this.counters.peersDeparted++;
    this.cfg.logger?.info?.({ peer: id }, 'ratemesh peer departed');
  }

  /**
   * A peer's farewell is merged (Gossip.receive): it has stopped deciding and its whole window
   * is here, so it is no member from now on, as one departed (no share of L is kept for it, no
   * stale reserve, N shrinks); its counts stay in the windows until they age out, and sync
   * answers pass them on as a member gone's. A policy it runs at another version keeps it
   * marked for a window (its counts of that version are in none of ours). Heard again (a
   * restart), it is a member again.
   */
  peerLeft(p: PeerState, now: number, wasMember: boolean): void {
    p.member = false;
    p.left = true;
    if (wasMember) {
      this.counters.peersLeft++;
      this.counters.peersDeparted++;
      this.cfg.logger?.info?.({ peer: p.id }, 'ratemesh peer left (farewell)');
    }
    this.awaitNames.delete(p.id);
    this.stamp++;
    this.refresh(now);
  }

  /** Put an ignored peer outside the mesh: its counts dropped, no member until heard again after the ignore. */
  ignore(p: PeerState, now: number): void {
    this.dropOrigins([p.idx], false);
    // its counts are gone: when heard again, it is asked for its whole window
    p.nack = 0;
    this.peers.expel(p);
    this.stamp++;
    this.refresh(now);
  }

  /** Drop what the windows hold of peer `p`, not folded (counts not believed: a sync answer's word for it). */
  forgetCounts(p: PeerState): void {
    this.dropOrigins([p.idx], false);
  }

  /** Departed peers were forgotten: clear their origin slots in every window, so a slot is reused clean. */
  private clearOrigins(freed: readonly number[]): void {
    this.counters.peersForgotten += freed.length;
    this.dropOrigins(freed, true);
  }

  /** Drop origins from every window; `fold`: their counts move into each key's floor (see KeyWindow.dropOrigin). */
  private dropOrigins(origins: readonly number[], fold: boolean): void {
    for (const rt of this.rts) {
      for (const ks of rt.windows.map.values()) {
        for (const o of origins) ks.window.dropOrigin(o, fold);
      }
    }
  }

  /**
   * Recompute the unseen horizon, and refresh no later than the moment the
   * first live peer turns stale, so the view goes stale exactly on time.
   */
  updateOldestSent(): void {
    let firstStale = Number.POSITIVE_INFINITY;
    // the live peers in order of sentOf, oldest first
    const byAge = this.byAge;
    for (const p of this.peers.live) {
      // a peer is stale once its data age passes staleAfterMs
      const due = this.peers.staleAt(p);
      if (due < firstStale) firstStale = due;
      byAge.push(p);
    }
    byAge.sort((a, b) => this.sentOf(a) - this.sentOf(b));
    this.order++;
    let prev: PeerState | undefined;
    for (const p of byAge) {
      p.older = prev;
      p.newer = undefined;
      p.order = this.order;
      if (prev !== undefined) prev.newer = p;
      prev = p;
    }
    this.newestPeer = prev;
    this.setOldest(byAge[0]);
    byAge.length = 0;
    const due = firstStale + 1e-6;
    if (due < this.nextRefresh) this.nextRefresh = due;
  }

  /** Max over live peers of the time (ours) their newest data was sent (-Infinity: none). */
  get newestSent(): number {
    const p = this.newestPeer;
    return p === undefined || p.order !== this.order ? Number.NEGATIVE_INFINITY : this.sentOf(p);
  }

  /** Scratch of updateOldestSent. */
  private readonly byAge: PeerState[] = [];

  private setOldest(p: PeerState | undefined): void {
    this.oldestPeer = p;
    this.oldestSent = p === undefined ? Number.POSITIVE_INFINITY : this.sentOf(p);
  }

  /**
   * {@link updateOldestSent} after gossip from live peer `p`, the live set unchanged: the same
   * horizon, in O(1) for a peer whose new data is the newest or nearly (it moves to the end of
   * the order; others keep their place, their data unchanged). With broadcast each message
   * comes from the peer that held the oldest data, and a full pass made every message O(N).
   */
  heardLive(p: PeerState): void {
    if (p.order !== this.order) {
      this.updateOldestSent();
      return;
    }
    // unlink p
    const { older, newer } = p;
    if (older !== undefined) older.newer = newer;
    if (newer !== undefined) newer.older = older;
    else this.newestPeer = older;
    if (p === this.oldestPeer) this.oldestPeer = newer;
    // insert it after the newest peer whose data is no newer than its own
    const sent = this.sentOf(p);
    let at = this.newestPeer;
    while (at !== undefined && this.sentOf(at) > sent) at = at.older;
    p.older = at;
    if (at === undefined) {
      p.newer = this.oldestPeer;
      if (this.oldestPeer !== undefined) this.oldestPeer.older = p;
      this.oldestPeer = p;
    } else {
      p.newer = at.newer;
      if (at.newer !== undefined) at.newer.older = p;
      at.newer = p;
    }
    if (p.newer === undefined) this.newestPeer = p;
    this.setOldest(this.oldestPeer);
    const due = this.peers.staleAt(p) + 1e-6;
    if (due < this.nextRefresh) this.nextRefresh = due;
  }

  /** When (ours) a peer's newest data was sent, for the unseen horizon (-Infinity: never heard). */
  sentOf(p: PeerState): number {
    // A peer whose clock is far behind (or a rogue claiming old send times)
    // must not stretch the horizon past the window and switch the control
    // off: its delay counts for at most one staleness period.
    return p.lastHeard - Math.min(p.delayMs, this.cfg.staleAfterMs);
  }

  // ---- foreign-version marks

  /** Record that peer `p` runs version `version` of `rt`'s policy (another than ours), as of `at`. */
  markForeign(rt: PolicyRuntime, p: PeerState, version: string, at: number): void {
    const i = rt.foreign.indexOf(p);
    if (i >= 0) {
      rt.foreignAt[i] = at;
      rt.foreignVer[i] = version;
      return;
    }
    rt.foreign.push(p);
    rt.foreignAt.push(at);
    rt.foreignVer.push(version);
    this.stamp++;
    // once per (peer, policy, version): a mark that expires and returns is not news
    const said = `${p.id}\u0000${rt.policy.name}\u0000${version}`;
    if (this.warnedForeign.has(said)) return;
    if (this.warnedForeign.size >= 4096) this.warnedForeign.clear();
    this.warnedForeign.add(said);
    this.cfg.logger?.warn(
      { peer: p.id, policy: rt.policy.name, theirVersion: version, ourVersion: rt.version },
      'ratemesh peer runs another version of a policy: its counts for it are not merged, it counts as spending at least L/N of it',
    );
  }

  private unmarkForeign(rt: PolicyRuntime, i: number): void {
    const last = rt.foreign.length - 1;
    rt.foreign[i] = rt.foreign[last]!;
    rt.foreignAt[i] = rt.foreignAt[last]!;
    rt.foreignVer[i] = rt.foreignVer[last]!;
    rt.foreign.pop();
    rt.foreignAt.pop();
    rt.foreignVer.pop();
    this.stamp++;
  }

  /**
   * A peer's newest policy table: for each of our global policies, it runs the
   * same version (merged), another one (marked foreign), or does not have it
   * (ignored: it never spends on it). Returns, per row of the table, our policy
   * when the versions match, else undefined (its entries are not merged).
   */
  mapTable(
    p: PeerState | undefined,
    table: readonly WirePolicy[],
    at: number,
  ): (PolicyRuntime | undefined)[] {
    const map: (PolicyRuntime | undefined)[] = new Array(table.length);
    // their version of each of our global policies, by our wire row (names are unique in a table)
    const theirs: (string | undefined)[] = new Array(this.rtByWire.length);
    for (let i = 0; i < table.length; i++) {
      const row = table[i]!;
      const rt = this.rtByName.get(row.name);
      if (rt === undefined || rt.local) continue;
      theirs[rt.wire] = row.version;
      map[i] = rt.version === row.version ? rt : undefined;
    }
    if (p === undefined) return map;
    p.policies = table;
    for (const rt of this.rtByWire) {
      const v = theirs[rt.wire];
      if (v !== undefined && v !== rt.version) this.markForeign(rt, p, v, at);
      else {
        const i = rt.foreign.indexOf(p);
        if (i >= 0) {
          this.unmarkForeign(rt, i);
          // its counts of that policy were not merged while versions differed, and only changes
          // travel: ask for its whole window
          p.nack = 0;
          // what it admitted of the other version stays in the windows of nobody on ours for W
          p.switchedUntil = at + this.maxWindowMs;
        }
      }
    }
    return map;
  }

  /**
   * Forget foreign-version marks that expired (not repeated within staleAfterMs) or whose peer
   * departed. One that left by a farewell keeps its marks for the longest window after the last:
   * what it admitted of its version is in no window of ours (see Rule.foreignReserve).
   */
  private expireForeign(now: number): void {
    for (const rt of this.rtByWire) {
      for (let i = rt.foreign.length - 1; i >= 0; i--) {
        const p = rt.foreign[i]!;
        const age = now - rt.foreignAt[i]!;
        const keep = p.left ? age <= this.maxWindowMs : p.member && age <= this.cfg.staleAfterMs;
        if (!keep || this.peers.get(p.id) !== p) this.unmarkForeign(rt, i);
      }
    }
  }

  // ---- keys

  /** A new key of a global policy (the key already validated); a key evicted before starts from its sketch. */
  createKey(rt: PolicyRuntime, key: string): KeyState {
    const ks = new KeyState(rt.policy.buckets, rt.idx, key);
    const now = this.lastNow;
    ks.created = now;
    rt.windows.insert(key, ks);
    const sk = rt.sketch;
    if (sk !== undefined) {
      // evicted before with counts in its window: it starts from at least those
      const had = sk.estimate(key, now);
      if (had > 0) {
        const kw = ks.window;
        kw.roll(Math.floor(now / rt.bw));
        kw.mergeFloor(kw.cur, Math.min(had, rt.policy.limit));
      }
    }
    return ks;
  }

  /** Mark a key changed locally: it goes in the next gossip. */
  touch(ks: KeyState): void {
    ks.touchTick = this.tick;
    if (!ks.inDirty) {
      ks.inDirty = true;
      this.dirty.add(ks);
    }
  }

  /** A policy's eviction sketch, created on first use. */
  sketch(rt: PolicyRuntime): EvictedSketch {
    let sk = rt.sketch;
    if (sk === undefined) {
      sk = new EvictedSketch(rt.policy.windowMs, this.cfg.sketchSeed ^ rt.idx, 4, this.cfg.sketchWidth);
      rt.sketch = sk;
    }
    return sk;
  }

  /** A key leaves the store: a live one's counts go to the policy's sketch first. */
  private forget(rt: PolicyRuntime, key: string, ks: KeyState, live: boolean): void {
    if (rt.hotKs === ks) {
      rt.hotKey = undefined;
      rt.hotKs = undefined;
    }
    if (rt.fastKs === ks) rt.fastKs = undefined;
    if (ks.inDirty) {
      this.dirty.delete(ks);
      ks.inDirty = false;
    }
    if (!live) return;
    const kw = ks.window;
    const now = this.lastNow;
    const c = Math.floor(now / rt.bw);
    if (c > kw.cur) kw.roll(c);
    const w = c < kw.cur ? 1 : 1 - (now - c * rt.bw) / rt.bw;
    // the floor came from the sketch, which still holds it for as long as its counts can be in a window
    const counts = kw.estimate(w) - kw.floorEstimate(w);
    // a farewell can no longer carry every count of ours still in a window (Gossip.farewell)
    if (kw.ownEstimate(1) > 0) this.ownEvictedAt = now;
    if (counts > 1e-9) {
      this.sketch(rt).add(key, counts, now);
      this.counters.evictedLive++;
    }
  }

  /** A local-scope state leaves the store: what it had used goes to the policy's sketch. */
  private forgetLocal(rt: PolicyRuntime, key: string, e: LocalKeyState, live: boolean): void {
    if (!live) return;
    const algo = rt.algo!;
    const r = this.algoOut;
    algo.check(e.state, 1, this.lastNow, r);
    const left = r.allowed ? r.remaining + 1 : r.remaining;
    const used = algo.capacity - left;
    if (used > 0) {
      this.sketch(rt).add(key, used, this.lastNow);
      this.counters.evictedLive++;
    }
  }

  private windowExpired(rt: PolicyRuntime, ks: KeyState): boolean {
    const kw = ks.window;
    const c = Math.floor(this.lastNow / rt.bw);
    if (c > kw.cur + kw.k + 1) return true;
    return c === kw.cur && kw.isEmpty();
  }

  /** Count a refused message by reason. */
  drop(reason: string): ReceiveResult {
    this.counters.dropped[reason] = (this.counters.dropped[reason] ?? 0) + 1;
    return { ok: false, reason };
  }
}
