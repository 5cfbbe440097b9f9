import { decodeMessage, encodeSyncResponse, TYPE_SYNC_RESPONSE, type WireEntry } from '../crdt/codec.js';
import type { OwnerStats } from '../decision/owner.js';
import type { PeerView } from '../decision/peers.js';
import type { EngineStats, PolicyReplacement, ReceiveResult, VersionMismatch } from '../decision/types.js';
import type { PolicySet } from '../policy/index.js';
import type {
  CountingLimiter,
  CountMode,
  Decision,
  Explanation,
  KeyOutcome,
  Policy,
  PolicyKey,
  PolicySpec,
} from '../types.js';
import type { EngineFactory, EngineInit, MeshEngine } from './engine-port.js';

/**
 * The mesh's engine, replaceable at run time by one built with another relayHops
 * (`relayFanout: 'auto'` switching between broadcast and relay: src/mesh/auto-relay.ts).
 * Every part of the mesh holds this slot; it hands each call to the engine in it.
 *
 * The engine's relayHops is read once, when it is built (src/decision is not changed for
 * this): it sets how old a peer's data may arrive (dataDelayMs), staleness, and whether
 * entries carry whole windows (a relay forwards each origin's newest message only). A switch
 * builds the new engine and hands it, through the engine's own sync protocol, what the old
 * one holds: this node's windows (its snapshot: own counts restored as own, so they stay in
 * its sync answers and gossip; a member that joins after the switch learns them from this node,
 * test/mesh/auto-relay.test.ts) and, for every member, the old engine's answer to that member's sync request (what
 * it holds of the member's own counts) presented as the member's own answer. Policies
 * replaced at run time and owner placement carry over. What does not: the counts of
 * `scope: 'local'` policies (in no snapshot: such a limit starts a new window at a switch, as
 * after a restart) and per-peer estimates the new engine measures again (clock offsets,
 * delays).
 */
export class EngineSlot implements MeshEngine, CountingLimiter {
  private inner: MeshEngine;
  private policiesNow: readonly PolicySpec[] | PolicySet | undefined;
  private ownerSecret: Uint8Array | undefined;
  private ownerOn: boolean | undefined;
  /** Engines built for a switch (the first one not counted). */
  rebuilds = 0;

  farewell?: MeshEngine['farewell'];
  rejoin?: MeshEngine['rejoin'];
  remoteOwner?: MeshEngine['remoteOwner'];
  answerAsk?: MeshEngine['answerAsk'];
  decideWithoutOwner?: MeshEngine['decideWithoutOwner'];
  enableOwnerPlacement?: MeshEngine['enableOwnerPlacement'];
  setOwnerSecret?: MeshEngine['setOwnerSecret'];
  ownerStats?: MeshEngine['ownerStats'];
  ownerPlacedAny?: MeshEngine['ownerPlacedAny'];

  private init: EngineInit;

  constructor(
    private readonly factory: EngineFactory,
    init: EngineInit,
  ) {
    this.init = { ...init };
    const e = factory(this.init);
    this.inner = e;
    // the optional parts, where the engine has them (a test's engine may not)
    if (e.farewell !== undefined)
      this.farewell = (now?: number, reach?: number) => this.inner.farewell!(now, reach);
    if (e.rejoin !== undefined) this.rejoin = () => this.inner.rejoin!();
    if (e.remoteOwner !== undefined)
      this.remoteOwner = (policy: string, key: string, now?: number, cost?: number) =>
        this.inner.remoteOwner!(policy, key, now, cost);
    if (e.answerAsk !== undefined)
      this.answerAsk = (from, policy, key, cost, now) => this.inner.answerAsk!(from, policy, key, cost, now);
    if (e.decideWithoutOwner !== undefined)
      this.decideWithoutOwner = (policy, key, cost, reason, now) =>
        this.inner.decideWithoutOwner!(policy, key, cost, reason, now);
    if (e.enableOwnerPlacement !== undefined)
      this.enableOwnerPlacement = (on?: boolean) => {
        this.ownerOn = on ?? true;
        this.inner.enableOwnerPlacement!(on);
      };
    if (e.setOwnerSecret !== undefined)
      this.setOwnerSecret = (secret: Uint8Array) => {
        this.ownerSecret = secret;
        this.inner.setOwnerSecret!(secret);
      };
    if (e.ownerStats !== undefined) this.ownerStats = (): OwnerStats => this.inner.ownerStats!();
    if (e.ownerPlacedAny !== undefined) this.ownerPlacedAny = (): boolean => this.inner.ownerPlacedAny!();
    const counting = e as MeshEngine & Partial<CountingLimiter>;
    if (typeof counting.checkAllCounted !== 'function')
      (this as Partial<CountingLimiter>).checkAllCounted = undefined;
  }

  /** The engine in the slot now. */
  get engine(): MeshEngine {
    return this.inner;
  }

  /** The relayHops the engine in the slot was built with (0: broadcast). */
  get relayHops(): number {
    return this.init.relayHops ?? 0;
  }

  /**
   * Replaces the engine by one built with `relayHops` (see the class comment), at time `now`.
   * Returns the members whose counts were handed over.
   */
  rebuild(relayHops: number, now: number): number {
    const old = this.inner;
    const starting = old.starting();
    const init: EngineInit = {
      ...this.init,
      relayHops,
      // the new engine holds every member the old one counts to L/N until it hears them
      expectedMembers: Math.max(1, old.memberCount()),
      // its peers hear this node already: it decides at once, unless the old one did not yet
      rebuilt: !starting,
    };
    const next = this.factory(init);
    if (this.policiesNow !== undefined) next.replacePolicies(this.policiesNow, now);
    if (this.ownerSecret !== undefined) next.setOwnerSecret?.(this.ownerSecret);
    if (this.ownerOn !== undefined) next.enableOwnerPlacement?.(this.ownerOn);
    // this node's windows: own counts as own, its floor on the floor
    next.restoreSnapshot(old.snapshot(now, true), now, true);
    let handed = 0;
    let withGone = true;
    for (const p of old.peerViews(now)) {
      if (p.ignoredMs > 0) continue;
      const req = next.buildSyncRequest(now);
      const ans = old.answerSync(p.id, req, now);
      if (!(ans instanceof Uint8Array)) continue;
      const relabelled = answerAsMember(ans, p.id, withGone);
      if (relabelled === undefined) continue;
      withGone = false;
      if (next.receiveSyncResponse(p.id, relabelled, now).ok) handed++;
    }
    // still starting: the gate as the old engine had it (the relabelled answers prove nothing)
    if (starting) {
      const state = old.startState?.();
      if (state !== undefined) next.adoptStart?.(state);
    }
    this.init = init;
    this.inner = next;
    this.rebuilds++;
    return handed;
  }

  // ---- MeshEngine: each call to the engine in the slot ----

  get ready(): boolean {
    return this.inner.ready;
  }
  get version(): string {
    return this.inner.version;
  }
  get left(): boolean {
    return (this.inner as MeshEngine & { left?: boolean }).left === true;
  }
  check(policy: string, keys: string | readonly string[], cost?: number): Decision {
    return this.inner.check(policy, keys, cost);
  }
  checkAll(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): Decision & { outcomes: KeyOutcome[] } {
    return this.inner.checkAll(pairs, cost);
  }
  checkAllCounted(
    pairs: readonly PolicyKey[],
    costs: readonly number[],
    mode: CountMode,
    over?: boolean,
  ): Decision & { outcomes: KeyOutcome[] } {
    return (this.inner as MeshEngine & CountingLimiter).checkAllCounted(pairs, costs, mode, over);
  }
  policy(name: string): Policy | undefined {
    return this.inner.policy(name);
  }
  expectMembers(members: number): void {
    this.inner.expectMembers(members);
  }
  joined(): void {
    this.inner.joined();
  }
  joinWaitEnds(at: number): void {
    this.inner.joinWaitEnds?.(at);
  }
  alone(): void {
    this.inner.alone?.();
  }
  starting(): boolean {
    return this.inner.starting();
  }

  explain(policy: string, key: string, cost?: number, time?: number): Explanation {
    return this.inner.explain(policy, key, cost, time);
  }
  policyVersions(): Record<string, string> {
    return this.inner.policyVersions();
  }
  versionMismatches(now?: number): VersionMismatch[] {
    return this.inner.versionMismatches(now);
  }
  replacePolicies(policies: readonly PolicySpec[] | PolicySet, now?: number): PolicyReplacement {
    const r = this.inner.replacePolicies(policies, now);
    this.policiesNow = policies;
    return r;
  }
  buildGossip(now?: number, reach?: number): Uint8Array {
    return this.inner.buildGossip(now, reach);
  }
  gossipReach(bytes: Uint8Array): number {
    return this.inner.gossipReach(bytes);
  }
  memberCount(): number {
    return this.inner.memberCount();
  }
  wantsEarlyPublish(): boolean {
    return this.inner.wantsEarlyPublish();
  }
  wantsFastGossip(): boolean {
    return this.inner.wantsFastGossip();
  }
  lateSyncDue(now?: number): boolean {
    return this.inner.lateSyncDue(now);
  }
  receiveGossip(from: string, bytes: Uint8Array, now?: number, relayed?: boolean): ReceiveResult {
    return this.inner.receiveGossip(from, bytes, now, relayed);
  }
  buildSyncRequest(now?: number): Uint8Array {
    return this.inner.buildSyncRequest(now);
  }
  answerSync(from: string, request: Uint8Array, now?: number): Uint8Array | ReceiveResult {
    return this.inner.answerSync(from, request, now);
  }
  receiveSyncResponse(from: string, response: Uint8Array, now?: number): ReceiveResult {
    // an engine built for a switch holds every count of this node already (the handover): an
    // answer's copy of them would be merged again as counts from before a restart
    const r = this.rebuilds > 0 ? withoutOwnEcho(response, this.init.nodeId) : response;
    return this.inner.receiveSyncResponse(from, r, now);
  }
  peerConnection(id: string, connected: boolean, now?: number): void {
    this.inner.peerConnection(id, connected, now);
  }
  snapshot(now?: number, withFloor?: boolean): Uint8Array {
    return this.inner.snapshot(now, withFloor);
  }
  restoreSnapshot(bytes: Uint8Array, now?: number, asOwn?: boolean): ReceiveResult & { restored?: number } {
    return this.inner.restoreSnapshot(bytes, now, asOwn);
  }
  peerViews(now?: number): PeerView[] {
    return this.inner.peerViews(now);
  }
  stats(now?: number): EngineStats {
    return this.inner.stats(now);
  }
}

/** A sync answer less its entries of origin `self` (the responder's copy of our own counts). */
function withoutOwnEcho(response: Uint8Array, self: string): Uint8Array {
  const dec = decodeMessage(response);
  if (!dec.ok || dec.message.type !== TYPE_SYNC_RESPONSE) return response;
  const m = dec.message;
  const i = m.origins.indexOf(self);
  if (i <= 0 || !m.entries.some((e) => e.origin === i)) return response;
  return encodeSyncResponse({ ...m, entries: m.entries.filter((e) => e.origin !== i) });
}

/**
 * An engine's sync answer to `member` (its own windows as origin 0, what it holds of the
 * member's as origin 1, members gone from 2 on, then live members by name) made into the
 * answer `member` would give: the member's counts as origin 0, this node's left out (restored
 * from its snapshot), members gone kept when `withGone` (else dropped: one answer carries
 * them), and t1 = t0 (no clock offset: the counts are in this node's buckets already).
 */
function answerAsMember(ans: Uint8Array, member: string, withGone: boolean): Uint8Array | undefined {
  const dec = decodeMessage(ans);
  if (!dec.ok || dec.message.type !== TYPE_SYNC_RESPONSE) return undefined;
  const m = dec.message;
  if (m.origins[1] !== member) return undefined;
  const self = m.origins[0]!;
  const origins = [member, self, ...m.origins.slice(2)];
  const entries: WireEntry[] = [];
  for (const e of m.entries) {
    if (e.origin === 0) continue;
    if (e.origin === 1) entries.push({ ...e, origin: 0 });
    else if (withGone) entries.push(e);
  }
  return encodeSyncResponse({ policies: m.policies, t0: m.t0, t1: m.t0, origins, entries });
}
