import { KeyWindow } from '../crdt/window.js';

/**
 * Slow gossip: a rise of our demand by more than this factor over what our peers hold is a new
 * claim (KeyState.claimAt). Measured on a burst after a lull (8 and 32 relay nodes, g = 250 to
 * 1,000 ms, six seeds): 2 let up to 8.8 % past L, 1.5 up to 3.5 %; 1.25 did no better than 1.5
 * and admitted less.
 */
export const CLAIM_RISE = 1.5;

/**
 * What the engine keeps for one key of a global policy: the key's windowed G-counter and the
 * engine's own bookkeeping around it (demand share, gossip scheduling, eviction), so one map
 * lookup finds both while the counter stays a pure CRDT.
 */
export class KeyState {
  /** The key's windowed G-counter: every origin's counts. */
  readonly window: KeyWindow;
  /** Controlled mode: this node's demand-weighted share of the key's headroom. */
  share = 0;
  /** The view stamp the share belongs to (-1: none yet). */
  shareStamp = -1;
  /**
   * Controlled mode: the key's L is dealt in whole units (slices under a few units, every
   * sharer's demand heard and ours sent; see wholeUnits in rule.ts).
   */
  dealsUnits = false;
  /**
   * Controlled mode, routing spread, thin slices: the window's L is dealt in whole units equally
   * over the members (see staticAllowance in rule.ts).
   */
  staticUnits = false;
  /** Controlled mode: the whole units of L in this node's slice, [unitsLo, unitsHi) (see wholeUnits). */
  unitsLo = 0;
  unitsHi = 0;
  /** Controlled mode: live peers whose demand for the key was heard in the last window. */
  peerReporters = 0;
  /** Controlled mode: this node's own demand is not reported (sent over a window ago or never). */
  ownCold = true;
  /** Controlled mode: the sharers the headroom is split over. */
  sharers = 1;
  /** When (ours) those units last changed. */
  slicedAt = 0;
  /** Where the whole units of a split headroom fall, in [0, 1): the same on every node (a hash of the key). */
  readonly phase: number;
  /** Gossip: the last tick this key changed locally (own counts or demand). */
  touchTick = -1;
  /** Gossip: whether the key is in the engine's dirty set. */
  inDirty = false;
  /** Own cost admitted since the last gossip that carried this key. */
  unsynced = 0;
  /** Gossip: left out of a full message, so due in the next one. */
  pending = false;
  /** Gossip: the tick whose message carried it. */
  sentTick = -1;
  /** Own demand (offered cost per window) as the last gossip carried it. */
  sentDemand = 0;
  /**
   * Where gossip is slow against the window (PolicyRuntime.slow): when (ours) our gossip carried
   * a claim not yet confirmed (+Infinity: none): a demand for the key after it was idle, or more
   * than CLAIM_RISE times `claimBase` (the last confirmed claim's, lowered as our demand
   * falls) or the pending claim's. Until every live peer has reported since it could reach
   * them, the claim counts for at most an equal share (Rule.evaluate).
   */
  claimAt = Number.POSITIVE_INFINITY;
  /** The demand the pending claim carried (claimAt), and the base a rise is measured against. */
  claimValue = 0;
  claimBase = 0;
  /** When (ours) the last gossip carried this key's demand. */
  sentDemandAt = Number.NEGATIVE_INFINITY;
  /** Gossip: the sequence number of the message that last carried it (-1: never). */
  sentSeq = -1;
  /**
   * Gossip: the next message carries own counts from this bucket on (the
   * current bucket when it was last sent: only that one and later ones can
   * have changed since); -Infinity: the whole window (never sent, or a repair).
   */
  sentBucket = Number.NEGATIVE_INFINITY;
  /**
   * Gossip: the current bucket when it was sent the time before last. A message carries counts
   * from here on, so one lost message is repaired by the next that carries the key, without a
   * round trip; -Infinity: the whole window.
   */
  prevBucket = Number.NEGATIVE_INFINITY;
  /** When this node first saw the key (its time). */
  created = 0;
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
    this.window = new KeyWindow(buckets);
    this.phase = keyPhase(key);
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

/** FNV-1a of the key's UTF-16 units, as a fraction in [0, 1): spreads keys' whole units over different nodes. */
function keyPhase(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) / 4294967296;
}

/**
 * Slow gossip: records our demand report `v` sent at `t` (our time). A claim to confirm: demand
 * after the key was idle, or more than CLAIM_RISE times the base (the last confirmed claim's) or
 * the pending claim's, which then starts over. The base follows demand down, so a rise after a
 * lull is a claim too.
 */
export function recordClaim(ks: KeyState, v: number, t: number): void {
  if (!(v > 0)) {
    dropClaims(ks);
    return;
  }
  if (v < ks.claimBase) ks.claimBase = v;
  if (v > CLAIM_RISE * (ks.claimAt === Number.POSITIVE_INFINITY ? ks.claimBase : ks.claimValue)) {
    ks.claimAt = t;
    ks.claimValue = v;
  }
}

/** Slow gossip: our demand for the key starts afresh, so its next claim is new. */
export function dropClaims(ks: KeyState): void {
  ks.claimAt = Number.POSITIVE_INFINITY;
  ks.claimBase = 0;
}

/**
 * Slow gossip: whether a claim is still unconfirmed at `oldestSent` (the oldest of the live
 * peers' newest data); one `lag` (the data's age on arrival) past it is confirmed here.
 */
export function claimPending(ks: KeyState, oldestSent: number, lag: number): boolean {
  if (ks.claimAt === Number.POSITIVE_INFINITY) return false;
  if (oldestSent < ks.claimAt + lag) return true;
  ks.claimAt = Number.POSITIVE_INFINITY;
  ks.claimBase = ks.claimValue;
  return false;
}
