import { KeyWindow, SCALARS } from '../crdt/window.js';

/** Where KeyState's numbers live in its window's array (KeyWindow.d): no boxed number fields. */
const SHARE = SCALARS + 0;
const UNSYNCED = SCALARS + 1;
const SENTDEMAND = SCALARS + 2;
const SENTDEMANDAT = SCALARS + 3;
const HELD = SCALARS + 4;
const HELDAT = SCALARS + 5;
const FLY1 = SCALARS + 6;
const FLY1AT = SCALARS + 7;
const FLY2 = SCALARS + 8;
const FLY2AT = SCALARS + 9;
const SENTBUCKET = SCALARS + 10;
const PREVBUCKET = SCALARS + 11;
const CREATED = SCALARS + 12;
const FLY1_PREV = SCALARS + 13;
const FLY2_PREV = SCALARS + 14;
const NUMBERS = 15;

/**
 * What the engine keeps for one key of a global policy: the key's windowed G-counter and the
 * engine's own bookkeeping around it (demand share, gossip scheduling, eviction), in one object
 * (a subclass of the window: one map lookup finds both, and the CRDT's methods stay the window's).
 * The bookkeeping's numbers are kept in the window's array (a number field of an object is a
 * 16-byte box of its own in V8; with a dozen of them, a key's memory went mostly to boxes).
 */
export class KeyState extends KeyWindow {
  /** The view stamp the share belongs to (-1: none yet). */
  shareStamp = -1;
  /** Controlled mode: the sharers the headroom is split over. */
  sharers = 1;
  /** Gossip: the last tick this key changed locally (own counts or demand). */
  touchTick = -1;
  /** Gossip: whether the key is in the engine's dirty set. */
  inDirty = false;
  /** Gossip: left out of a full message, so due in the next one. */
  pending = false;
  /** Gossip: the tick whose message carried it. */
  sentTick = -1;
  /** Gossip: the sequence number of the message that last carried it (-1: never). */
  sentSeq = -1;
  /** A local front limiter's state, when the policy has one. */
  local: unknown = undefined;
  /** Used since inserted or last passed over by eviction (second chance). */
  ref = false;

  /**
   * @param buckets buckets per window (k)
   * @param policy the index of the policy in the set in force
   * @param key the key
   */
  constructor(
    buckets: number,
    public policy: number,
    readonly key: string,
  ) {
    super(buckets, NUMBERS);
    const d = this.d;
    d[SENTDEMANDAT] = Number.NEGATIVE_INFINITY;
    d[HELDAT] = Number.NEGATIVE_INFINITY;
    d[FLY1AT] = Number.NaN;
    d[FLY2AT] = Number.NaN;
    d[SENTBUCKET] = Number.NEGATIVE_INFINITY;
    d[PREVBUCKET] = Number.NEGATIVE_INFINITY;
  }

  /** The key's windowed G-counter, every origin's counts: the key state itself (one object a key, one pointer less to follow on a decision). */
  get window(): KeyWindow {
    return this;
  }

  /** Controlled mode: this node's demand-weighted share of the key's headroom. */
  get share(): number {
    return this.d[SHARE]!;
  }
  set share(v: number) {
    this.d[SHARE] = v;
  }
  /** Own cost admitted since the last gossip that carried this key. */
  get unsynced(): number {
    return this.d[UNSYNCED]!;
  }
  set unsynced(v: number) {
    this.d[UNSYNCED] = v;
  }
  /** Own demand (offered cost per window) as the last gossip carried it. */
  get sentDemand(): number {
    return this.d[SENTDEMAND]!;
  }
  set sentDemand(v: number) {
    this.d[SENTDEMAND] = v;
  }
  /** When (ours) the last gossip carried this key (its counts from `prevBucket` on, and its demand). */
  get sentDemandAt(): number {
    return this.d[SENTDEMANDAT]!;
  }
  set sentDemandAt(v: number) {
    this.d[SENTDEMANDAT] = v;
  }
  /** Our demand report every live peer holds (see {@link reportDemand}). */
  get held(): number {
    return this.d[HELD]!;
  }
  set held(v: number) {
    this.d[HELD] = v;
  }
  /** When `held` was sent. */
  get heldAt(): number {
    return this.d[HELDAT]!;
  }
  set heldAt(v: number) {
    this.d[HELDAT] = v;
  }
  /** A later report that may still be on its way. */
  get fly1(): number {
    return this.d[FLY1]!;
  }
  set fly1(v: number) {
    this.d[FLY1] = v;
  }
  /** When `fly1` was sent (NaN: none). */
  get fly1At(): number {
    return this.d[FLY1AT]!;
  }
  set fly1At(v: number) {
    this.d[FLY1AT] = v;
  }
  /** A later one still. */
  get fly2(): number {
    return this.d[FLY2]!;
  }
  set fly2(v: number) {
    this.d[FLY2] = v;
  }
  /** When `fly2` was sent (NaN: none). */
  get fly2At(): number {
    return this.d[FLY2AT]!;
  }
  set fly2At(v: number) {
    this.d[FLY2AT] = v;
  }
  /** Gossip: the next message carries own counts from this bucket on (the current bucket when it was last sent: only that one and later ones can have changed since); -Infinity: the whole window (never sent, or a repair). */
  get sentBucket(): number {
    return this.d[SENTBUCKET]!;
  }
  set sentBucket(v: number) {
    this.d[SENTBUCKET] = v;
  }
  /** Gossip: the current bucket when it was sent the time before last. A message carries counts from here on, so one lost message is repaired by the next that carries the key, without a round trip; -Infinity: the whole window. */
  get prevBucket(): number {
    return this.d[PREVBUCKET]!;
  }
  set prevBucket(v: number) {
    this.d[PREVBUCKET] = v;
  }
  /**
   * When our message before `fly1`'s was sent: a peer that has not had `fly1` holds at most that
   * message after `held`'s, and fades `held` by its age then (-Infinity: none).
   */
  get fly1Prev(): number {
    return this.d[FLY1_PREV]!;
  }
  set fly1Prev(v: number) {
    this.d[FLY1_PREV] = v;
  }
  /** The same for `fly2`. */
  get fly2Prev(): number {
    return this.d[FLY2_PREV]!;
  }
  set fly2Prev(v: number) {
    this.d[FLY2_PREV] = v;
  }
  /** When this node first saw the key (its time). */
  get created(): number {
    return this.d[CREATED]!;
  }
  set created(v: number) {
    this.d[CREATED] = v;
  }
}

/** What the engine keeps for one key of a local-scope policy. */
export interface LocalKeyState {
  /** The policy algorithm's state. */
  state: unknown;
  last: number;
  /** Used since inserted or last passed over by eviction (second chance). */
  ref: boolean;
}

/**
 * Records our demand report `v` for the key, sent at `t` (ours) in the message after the one sent
 * at `prev`. Peers may hold it or any report before it back to the last one that reached them
 * all. With two already on their way, the newer is folded with it (their minimum, at the later
 * time): still at most what a peer may hold, and the older one reaches every peer at its own time.
 */
export function reportDemand(ks: KeyState, v: number, t: number, prev: number): void {
  if (Number.isNaN(ks.fly1At)) {
    ks.fly1 = v;
    ks.fly1At = t;
    ks.fly1Prev = prev;
  } else if (Number.isNaN(ks.fly2At)) {
    ks.fly2 = v;
    ks.fly2At = t;
    ks.fly2Prev = prev;
  } else {
    if (v < ks.fly2) ks.fly2 = v;
    ks.fly2At = t;
  }
}

/**
 * The weight peers give our demand for the key, at the least: reports sent before `reached`
 * (every live peer has sent since it could hold them) are held by all of them, so the newest of
 * those replaces `held`; the later ones may not have arrived. A peer fades a report by its age at
 * our newest message it holds: the newest report by its age at `builtAt`, an earlier one by its
 * age at our message before the next report's (a peer that has not had the next one holds no
 * later message of ours; holding `held` unfaded there gave us more weight than such a peer
 * gives us: a warm key's burst over 2 nodes admitted 51 of L = 50). Over a window, up to `cap`.
 */
export function selfDemand(ks: KeyState, reached: number, builtAt: number, W: number, cap: number): number {
  while (!Number.isNaN(ks.fly1At) && ks.fly1At <= reached) {
    ks.held = ks.fly1;
    ks.heldAt = ks.fly1At;
    ks.fly1 = ks.fly2;
    ks.fly1At = ks.fly2At;
    ks.fly1Prev = ks.fly2Prev;
    ks.fly2At = Number.NaN;
  }
  if (Number.isNaN(ks.fly1At)) return faded(ks.held, ks.heldAt, builtAt, W, cap);
  const d = faded(ks.held, ks.heldAt, ks.fly1Prev, W, cap);
  if (Number.isNaN(ks.fly2At)) return Math.min(d, faded(ks.fly1, ks.fly1At, builtAt, W, cap));
  return Math.min(
    d,
    faded(ks.fly1, ks.fly1At, ks.fly2Prev, W, cap),
    faded(ks.fly2, ks.fly2At, builtAt, W, cap),
  );
}

/**
 * A demand report (cost offered over a window), fading over one window after it was made (at
 * `reportedAt`), by its age at `at`; counted up to `cap`.
 */
export function faded(demand: number, reportedAt: number, at: number, W: number, cap: number): number {
  const age = at - reportedAt;
  if (!(age < W)) return 0;
  return Math.min(demand, cap) * (1 - Math.max(0, age) / W);
}
