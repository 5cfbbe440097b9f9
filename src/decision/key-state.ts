import { KeyWindow } from '../crdt/window.js';

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
  /** Controlled mode: the whole units of L in this node's slice, [unitsLo, unitsHi) (see wholeUnits). */
  unitsLo = 0;
  unitsHi = 0;
  /** Controlled mode, thin slices: sharers whose demand is not heard (cold), 0 elsewhere. */
  cold = 0;
  /** Controlled mode: live peers whose demand for the key was heard in the last window. */
  peerReporters = 0;
  /** Controlled mode: this node's own demand is not reported (sent over a window ago or never). */
  ownCold = true;
  /** Controlled mode: the sharers the headroom is split over. */
  sharers = 1;
  /** Controlled mode: the reporters' demand, uncapped (offered cost per window). */
  demandAll = 0;
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
  /** Own demand as the gossip before the last carried it (peers may still hold that one). */
  prevSentDemand = 0;
  /** When (ours) the gossip that began the current run of reports of our demand went out (see computeShare). */
  reportedFrom = Number.POSITIVE_INFINITY;
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
