const NONE: number[] = [];

/** What this node knows of one other node. */
export interface PeerState {
  readonly id: string;
  /** Origin index in every KeyWindow (>= 1; 0 is this node). */
  readonly idx: number;
  /** Heard directly by gossip (a member); origins known only through sync are not. */
  member: boolean;
  /**
   * Made from a sync answer for a member gone at the responder (a replaced pod, Sync.answer),
   * never heard here: its counts are the responder's word. Cleared, and those counts dropped,
   * when it is heard itself: its own whole window then stands for them.
   */
  gone: boolean;
  /** Local time of the newest gossip from it (-Infinity when never). */
  lastHeard: number;
  /** Its wall time when it sent that gossip. */
  lastSentAt: number;
  /** Newest gossip sequence number seen. */
  seq: number;
  /**
   * Loss repair: -1 when every message of it up to `seq` reached us (or was
   * repaired since); else we hold all of them up to this number and ask it,
   * in each message of ours, to resend what it sent after (a nack).
   */
  nack: number;
  /** Our own newest gossip sequence number when we last heard it. */
  ourSeqHeard: number;
  /** Estimated one-way delay of its gossip, ms. */
  delayMs: number;
  /** Estimated clock offset: its wall clock minus ours, ms (from sync round trips). */
  clockOffsetMs: number;
  /** Whether a round trip has measured the offset. */
  offsetMeasured: boolean;
  /**
   * Offset samples from gossip (its send time minus our receive time plus the
   * expected delay): the largest of the current and the previous period is the
   * estimate used until a sync round trip measures it.
   */
  offCur: number;
  offPrev: number;
  offPeriod: number;
  /** Samples in the current and the previous period. */
  offSamples: number;
  offSamplesPrev: number;
  /** The offset its counts are moved by (changes only past a hysteresis, so counts do not flip between buckets). */
  appliedOffsetMs: number;
  /**
   * A lower bound of its clock offset from a sync round trip: its answer time minus our
   * receive time (the answer took at least no time to arrive). -Infinity before one.
   */
  syncLowerMs: number;
  /** Its clock is further off than the engine accepts: its counts are not merged and it counts as stale. */
  skewed: boolean;
  stale: boolean;
  /** Live members it reports, itself included. */
  members: number;
  messages: number;
  /** Messages of it whose counts passed what it could have admitted (capped), in the current strike period. */
  strikes: number;
  /** Start of the current strike period (ours). */
  strikeSince: number;
  /** Its gossip and sync are ignored until this time (ours); -Infinity when not. */
  ignoredUntil: number;
  /** It left by a farewell (Gossip.receive) and has not been heard since: no member. */
  left: boolean;
  /**
   * It has heard this node: its sync answer names this node (it counts the asker a member from
   * its request on: Sync.answer). One way through the start gate (EngineCore.startGate).
   */
  heardUs: boolean;
  /**
   * While this node starts: when (ours) it first built a message with this peer live (+Infinity:
   * not yet). The peer's own message sent D or more after it has heard that one (EngineCore.startGate).
   */
  sentToAt: number;
  /**
   * Until when (ours) it may hold counts of ours we did not merge: when it moved from another
   * version of one of our policies to ours, plus the longest window. Its farewell departs it at
   * once only after.
   */
  switchedUntil: number;
  /** The policy table (name, version) of its newest message: which version of each policy it runs. */
  policies: readonly { name: string; version: string }[];
  /** Since when (ours) the transport has reported no connection to it; +Infinity while connected or never reported. */
  linkLostAt: number;
  /**
   * The live peers ordered by when their newest data was sent, oldest first (EngineCore's
   * horizon): its neighbours in that order, valid while `order` is the core's current one.
   */
  older: PeerState | undefined;
  newer: PeerState | undefined;
  order: number;
}

/** One peer as reported to users: the engine's view of it, and on a mesh node its addresses. */
export interface PeerView {
  id: string;
  ageMs: number;
  stale: boolean;
  delayMs: number;
  clockOffsetMs: number;
  members: number;
  messages: number;
  /** Ignored (it sent counts it could not have admitted) for this many more ms; 0 when not. */
  ignoredMs: number;
  /** Its clock is off by more than the engine accepts (it counts as stale). */
  skewed: boolean;
  /** The addresses the transport is connected to it on (a mesh node's views; absent from the engine's own). */
  addrs?: string[];
}

/**
 * The peer table: origin indexes, freshness and the membership view the
 * decision rule needs (live count, stale count, N for the L/N fallback).
 */
export class PeerTable {
  private readonly byId = new Map<string, PeerState>();
  /** By origin index; [0] is unused (this node). */
  readonly byIdx: (PeerState | undefined)[] = [undefined];
  /** Members that are not stale, refreshed by {@link refresh}. */
  live: PeerState[] = [];
  /** Members that are stale. */
  stale: PeerState[] = [];
  /** Members (live + stale) plus this node, as last known while any peer was live. */
  knownN = 1;
  /**
   * Peers that left by a farewell and were heard within {@link leftKeepMs}: no members, but their
   * counts are still in the windows, so they stay in the N that L is split by ({@link splitN}),
   * as they would have as stale members.
   */
  left: PeerState[] = [];
  /** How long a peer that left stays in {@link left}: while its counts may be in a window (set by the engine, as it keeps a departed peer). */
  leftKeepMs = 0;
  /** There are members and none is live, or peers are expected and none has been heard yet: the view is stale. */
  allStale = false;
  /** Still starting: peers are expected (a mesh node with bootstrap peers) and not all have been heard. */
  private awaiting: boolean;
  /** Still starting: an expected member is not heard yet (see {@link refresh}). */
  get starting(): boolean {
    return this.awaiting;
  }
  private expected: number;
  /** Members expected at the start, this node included (grows with {@link expect}). */
  get expectedMembers(): number {
    return this.expected;
  }
  /** When the first peer was heard while starting. */
  private firstContact = Number.NEGATIVE_INFINITY;
  /**
   * The N of an L/N split (the fallback share, the start-up hold, the reserves of stale members
   * and members on another version): {@link knownN} and the peers that left within a window,
   * whose counts the split of L still has to make room for.
   */
  get splitN(): number {
    return this.knownN + this.left.length;
  }

  /**
   * Still starting: more members are expected than said at construction (a bootstrap DNS name
   * found to resolve to `n - 1` other addresses). Raises the start-up N; never lowers it, and
   * changes nothing once the start is over. True when it raised it.
   */
  expect(n: number): boolean {
    if (!this.awaiting || !(n > this.expected)) return false;
    this.expected = Math.min(n, this.maxOrigins);
    if (this.knownN < this.expected) this.knownN = this.expected;
    return true;
  }

  /**
   * Discovery has resolved the mesh's name to this node alone for a join wait, and no peer was
   * ever heard: no member is expected (the start-up L/N ends: the whole of L is this node's, as a
   * lone node's). A peer heard since the start keeps the start as it is. True when it changed it.
   */
  expectAlone(): boolean {
    if (!this.awaiting || this.byId.size > 0) return false;
    this.awaiting = false;
    this.expected = 1;
    this.knownN = 1;
    this.allStale = false;
    return true;
  }

  constructor(
    readonly selfId: string,
    private readonly staleAfterMs: number,
    private readonly departAfterMs: number,
    private readonly maxOrigins: number,
    expectedMembers = 1,
    private readonly dataDelayMs = 0,
  ) {
    this.knownN = expectedMembers;
    this.expected = expectedMembers;
    this.awaiting = expectedMembers > 1;
    this.allStale = this.awaiting;
  }

  /**
   * When a peer turns stale: its newest data (arrival time less its measured
   * delay, the delay capped at the expected age of data on arrival, D: d, or
   * more through relays; a skewed clock inflates the measure) plus staleAfterMs.
   * While the measured delay is within D, a live peer's data is never older
   * than staleAfterMs, so the unseen horizon (capped there) is never short.
   */
  staleAt(p: PeerState): number {
    return p.lastHeard - Math.min(p.delayMs, this.dataDelayMs) + this.staleAfterMs;
  }

  get size(): number {
    return this.byId.size;
  }

  get(id: string): PeerState | undefined {
    return this.byId.get(id);
  }

  /** The peer for `id`, created when new; undefined when the table is full. */
  ensure(id: string): PeerState | undefined {
    let p = this.byId.get(id);
    if (p !== undefined) return p;
    if (this.byId.size >= this.maxOrigins) return undefined;
    let idx = this.byIdx.indexOf(undefined, 1);
    if (idx === -1) idx = this.byIdx.length;
    p = {
      id,
      idx,
      member: false,
      gone: false,
      lastHeard: Number.NEGATIVE_INFINITY,
      lastSentAt: Number.NEGATIVE_INFINITY,
      seq: -1,
      nack: -1,
      ourSeqHeard: 0,
      delayMs: 0,
      clockOffsetMs: 0,
      offsetMeasured: false,
      offCur: Number.NEGATIVE_INFINITY,
      offPrev: Number.NEGATIVE_INFINITY,
      offPeriod: Number.NEGATIVE_INFINITY,
      offSamples: 0,
      offSamplesPrev: 0,
      appliedOffsetMs: 0,
      syncLowerMs: Number.NEGATIVE_INFINITY,
      skewed: false,
      stale: true,
      members: 1,
      messages: 0,
      strikes: 0,
      strikeSince: Number.NEGATIVE_INFINITY,
      ignoredUntil: Number.NEGATIVE_INFINITY,
      left: false,
      heardUs: false,
      sentToAt: Number.POSITIVE_INFINITY,
      switchedUntil: Number.NEGATIVE_INFINITY,
      policies: [],
      linkLostAt: Number.POSITIVE_INFINITY,
      older: undefined,
      newer: undefined,
      order: -1,
    };
    this.byId.set(id, p);
    this.byIdx[idx] = p;
    return p;
  }

  /**
   * Forget every peer that is no member (it departed, or was never heard) and
   * whose newest data is older than `retainMs` (so its counts have left every
   * window), unless it is being ignored. Their origin indexes are free for reuse;
   * the caller clears them from every window. Returns the freed indexes.
   */
  forgetDeparted(now: number, retainMs: number): number[] {
    let freed: number[] | undefined;
    for (const p of this.byId.values()) {
      if (p.member || now - p.lastHeard <= retainMs || now < p.ignoredUntil) continue;
      this.byId.delete(p.id);
      this.byIdx[p.idx] = undefined;
      if (freed === undefined) freed = [];
      freed.push(p.idx);
    }
    return freed ?? NONE;
  }

  /**
   * Put a member outside the mesh (it is being ignored): no member, and N less
   * one even while no other member is heard (N otherwise stays as last known).
   */
  expel(p: PeerState): void {
    if (!p.member) return;
    p.member = false;
    if (this.knownN > 1) this.knownN--;
  }

  /** Forget a peer entirely (its origin index may be reused). Returns its index. */
  remove(id: string): number {
    const p = this.byId.get(id);
    if (p === undefined) return -1;
    this.byId.delete(id);
    this.byIdx[p.idx] = undefined;
    return p.idx;
  }

  /**
   * Recompute freshness at `now`. A member is stale when its newest data is
   * older than staleAfterMs (measured from when it was sent). The depart rule,
   * the one there is: a stale member silent for longer than departAfterMs stops
   * being a member while any member is live; while none is, only once the
   * transport has also reported its connection gone for longer than
   * departAfterMs (a quiet view is not an empty one). N is updated while any
   * member is live; when every member is stale it stays as last known.
   * Returns the ids of members that departed.
   */
  refresh(now: number): string[] {
    const live: PeerState[] = [];
    const stale: PeerState[] = [];
    const left: PeerState[] = [];
    // heard on time, skewed clocks included: they are there, only their counts are not trusted
    let heard = 0;
    for (const p of this.byId.values()) {
      if (!p.member) {
        if (p.left && now - p.lastHeard <= this.leftKeepMs) left.push(p);
        continue;
      }
      const late = now > this.staleAt(p);
      if (!late) heard++;
      p.stale = p.skewed || late;
      (p.stale ? stale : live).push(p);
    }
    const departed: string[] = [];
    if (this.awaiting && heard > 0) {
      // Still starting: stay on L/N until every expected peer is heard, or for
      // one staleness period after the first one is (a peer that is not
      // heard yet holds a share this node cannot see).
      if (this.firstContact === Number.NEGATIVE_INFINITY) this.firstContact = now;
      if (heard + 1 >= this.expected || now - this.firstContact > this.staleAfterMs) this.awaiting = false;
    }
    for (let i = stale.length - 1; i >= 0; i--) {
      const p = stale[i]!;
      if (now - p.lastHeard > this.departAfterMs && (heard > 0 || now - p.linkLostAt > this.departAfterMs)) {
        p.member = false;
        departed.push(p.id);
        stale.splice(i, 1);
      }
    }
    if (heard > 0) {
      this.knownN = live.length + stale.length + 1;
      if (this.awaiting && this.knownN < this.expected) this.knownN = this.expected;
    } else if (!this.awaiting && stale.length === 0) {
      // every member departed or left (a farewell): alone
      this.knownN = 1;
    }
    this.live = live;
    this.stale = stale;
    this.left = left;
    this.allStale = (live.length === 0 && stale.length > 0) || this.awaiting;
    return departed;
  }

  views(now: number): PeerView[] {
    const out: PeerView[] = [];
    for (const p of this.byId.values()) {
      // an ignored peer is no member, but shown while ignored
      if (!p.member && !(now < p.ignoredUntil)) continue;
      out.push({
        id: p.id,
        ageMs: Math.max(0, now - p.lastHeard),
        stale: p.skewed || now > this.staleAt(p),
        delayMs: p.delayMs,
        clockOffsetMs: p.clockOffsetMs,
        members: p.members,
        messages: p.messages,
        ignoredMs: now < p.ignoredUntil ? p.ignoredUntil - now : 0,
        skewed: p.skewed,
      });
    }
    return out;
  }
}

/**
 * The peer's clock offset (its clock minus ours) after a gossip sample: the
 * round-trip measure of a sync when there is one, else the largest over the
 * last one or two seconds of (its send time - our receive time + the
 * expected delay), the sample with the shortest delay being the closest.
 */
export function sampleOffset(p: PeerState, sentAt: number, now: number, expectedDelayMs: number): number {
  const sample = sentAt - now + expectedDelayMs;
  if (now - p.offPeriod >= 1000) {
    const gap = now - p.offPeriod >= 2000;
    p.offPrev = gap ? Number.NEGATIVE_INFINITY : p.offCur;
    p.offSamplesPrev = gap ? 0 : p.offSamples;
    p.offCur = Number.NEGATIVE_INFINITY;
    p.offSamples = 0;
    p.offPeriod = now;
  }
  if (sample > p.offCur) p.offCur = sample;
  p.offSamples++;
  if (!p.offsetMeasured) p.clockOffsetMs = Math.max(p.offCur, p.offPrev);
  return p.clockOffsetMs;
}

/**
 * The offset a peer's counts are moved by: none within the estimate's own
 * noise (2d + 5 ms; a gossip estimate is trusted after 3 samples, a sync
 * round trip at once), and it changes only when the estimate moves by more
 * than d / 2 + 1 ms, so a peer's counts do not flip between two buckets.
 * (When it does change, counts already merged stay where they were: an
 * over-count for at most one window, never an under-count of the bucket
 * they move to, since merge is max per bucket.)
 */
export function appliedOffset(p: PeerState, expectedDelayMs: number): number {
  // Moved by a lower bound of the offset, never the estimate: every sample of (its send time -
  // our receive time) is one, since a message takes at least no time to arrive, and so is a
  // sync answer's (t1 - t2). Counts are then never moved earlier than they were admitted,
  // whatever the delays: a starved process, whose messages and sync answers arrive hundreds of
  // ms late and lopsided, made the round-trip midpoint move them early (an under-count: worst
  // 1 s 583 against L = 500 in the Docker partition drill under two CPU burners). The bound is
  // at most the shortest delay below the truth: the counts stay that much longer (an over-count).
  const gossipLower = Math.max(p.offCur, p.offPrev) - expectedDelayMs;
  const est = Math.max(gossipLower, p.syncLowerMs);
  const trusted = p.offsetMeasured || p.offSamples + p.offSamplesPrev >= 3;
  const target = trusted && Number.isFinite(est) && Math.abs(est) > 2 * expectedDelayMs + 5 ? est : 0;
  if (Math.abs(target - p.appliedOffsetMs) > expectedDelayMs / 2 + 1) p.appliedOffsetMs = target;
  return p.appliedOffsetMs;
}
