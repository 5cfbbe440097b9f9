import type { Clock } from '../clock.js';
import type { OwnerStats } from '../decision/owner.js';
import type { PeerView } from '../decision/peers.js';
import type {
  EngineStats,
  PolicyReplacement,
  ReceiveResult,
  StartState,
  VersionMismatch,
} from '../decision/types.js';
import type { WarnLogger } from '../logger.js';
import type { PolicySet } from '../policy/index.js';
import type { Decision, Explanation, PolicySpec, RateLimiter } from '../types.js';

/**
 * The part of the decision engine (src/decision/engine.ts) the network layer
 * drives. The mesh carries bytes and never decodes them: the one header field
 * it acts on, a gossip message's `reach` (its relay decision), it asks the
 * engine for ({@link gossipReach}). Every call that depends on time takes
 * `now`, the shared clock's reading at the event, and the engine decides at
 * that time (its own clock's reading when `now` is not given; an earlier time
 * than one already used counts as standing still). Membership and the depart
 * rule are the engine's: the mesh only reports its connections
 * ({@link peerConnection}).
 */
export interface MeshEngine extends RateLimiter {
  /** Still starting: this many members (itself included) are expected (see Engine.expectMembers). */
  expectMembers(members: number): void;
  /** The mesh's join rule says this node joined: with no member heard, stop waiting (Engine.joined). */
  joined(): void;
  /** When the mesh's join wait ends: the `Retry-After` of a starting node that hears no member (Engine.joinWaitEnds). */
  joinWaitEnds?(at: number): void;
  /** Discovery found this node alone for a join wait, no peer ever heard: the whole of L (Engine.alone). */
  alone?(): void;
  /** True while the start gate is shut: no global policy decided yet (Engine.starting). */
  starting(): boolean;
  /** The start gate's state (Engine.startState), carried to an engine rebuilt while starting. */
  startState?(): StartState;
  /** Take on a replaced engine's start gate state (Engine.adoptStart). */
  adoptStart?(state: StartState): void;
  /** Every term of the decision a check would make now, changing nothing (see Engine.explain). */
  explain(policy: string, key: string, cost?: number, time?: number): Explanation;
  /** Policy-set version hash (informational: the wire carries one version per policy). */
  readonly version: string;
  /** The version of each policy in force, by name. */
  policyVersions(): Record<string, string>;
  /** Policies some members run at another version than ours, with their versions. */
  versionMismatches(now?: number): VersionMismatch[];
  /**
   * Replace the policy set at runtime, keeping the state of unchanged policies
   * (throws, changing nothing, when the set is invalid).
   */
  replacePolicies(policies: readonly PolicySpec[] | PolicySet, now?: number): PolicyReplacement;
  /**
   * This tick's message: every touched key's window of own counts, or a heartbeat.
   * `reach`: members the message goes to directly, this node included.
   */
  buildGossip(now?: number, reach?: number): Uint8Array;
  /**
   * A graceful stop: the engine stops deciding global policies and returns its farewell, the
   * last message to gossip (undefined when its keys do not fit one message). Optional: an
   * engine without it stops as if killed (its peers see it stale, then departed).
   */
  farewell?(now?: number, reach?: number): Uint8Array | undefined;
  /** Back after a farewell (a start after a stop): decide and gossip as a member again. */
  rejoin?(): void;
  /** A gossip message's `reach` from its header (0: not a gossip message of this format). */
  gossipReach(bytes: Uint8Array): number;
  /** Members this node counts, itself included (the N of L/N). */
  memberCount(): number;
  /** Cheap; true when unsynced own counts crossed the early-publish threshold. */
  wantsEarlyPublish(): boolean;
  /** Cheap; true while a key is tight: the mesh then ticks every fastGossipIntervalMs (Engine.wantsFastGossip). */
  wantsFastGossip(): boolean;
  /** True once, some time after the first sync answer: pull every member's state again. */
  lateSyncDue(now?: number): boolean;
  /** Never throws; a refused message is counted inside and explained by `reason`. */
  /** `relayed`: the copy came through another node (it is credited to `from`, its origin, but says nothing of the link's delay). */
  receiveGossip(from: string, bytes: Uint8Array, now?: number, relayed?: boolean): ReceiveResult;
  buildSyncRequest(now?: number): Uint8Array;
  /** The response bytes, or a refusal (bad or foreign-version request). */
  answerSync(from: string, request: Uint8Array, now?: number): Uint8Array | ReceiveResult;
  receiveSyncResponse(from: string, response: Uint8Array, now?: number): ReceiveResult;
  /** The transport's connection to a peer: up or not (reported for every member on each sweep). */
  peerConnection(id: string, connected: boolean, now?: number): void;
  /** This node's own windows as bytes (written to `snapshotFile` on stop). */
  snapshot(now?: number, withFloor?: boolean): Uint8Array;
  /**
   * Counts a snapshot's windows still inside the window; never throws. `asOwn`: this node's own
   * snapshot from this process (an engine handed over): own counts as own, its floor on the floor.
   */
  restoreSnapshot(bytes: Uint8Array, now?: number, asOwn?: boolean): ReceiveResult & { restored?: number };
  /** The members, as this node sees them. */
  peerViews(now?: number): PeerView[];
  stats(now?: number): EngineStats;
  // ---- owner placement (issue 27, src/decision/owner.ts); optional: an engine without it decides every key here
  /**
   * The member that owns (policy, key) when it is decided on another node; undefined: decided
   * here (among others when the counts seen already fill L for `cost`: denied without asking).
   */
  remoteOwner?(policy: string, key: string, now?: number, cost?: number): string | undefined;
  /** Decide an ask from member `from` as the key's owner (or refuse it, nothing spent). */
  answerAsk?(
    from: string,
    policy: string,
    key: string,
    cost: number,
    now?: number,
  ): Decision | { refused: string };
  /** Decide here without the owner's answer: the policy's failure mode. */
  decideWithoutOwner?(
    policy: string,
    key: string,
    cost: number,
    reason: 'timeout' | 'unreachable' | 'not-owner' | 'refused',
    now?: number,
  ): Decision;
  /** Owner placement on (asks can travel) or off. */
  enableOwnerPlacement?(on?: boolean): void;
  /** Whether any policy's keys are placed on owners now (links to the live members are kept open). */
  ownerPlacedAny?(): boolean;
  /** Key the owner hash with the mesh's psk. */
  setOwnerSecret?(secret: Uint8Array): void;
  ownerStats?(): OwnerStats;
}

/** What the engine is built from. */
export interface EngineInit {
  policies: readonly PolicySpec[];
  /** Our libp2p peer id. */
  nodeId: string;
  clock: Clock;
  gossipIntervalMs: number;
  expectedDelayMs: number;
  /** A silent member departs after this (the engine's depart rule, peers.ts). */
  departAfterMs: number;
  /** 1 + the bootstrap entries: the engine enforces L/N with this N until it hears a peer. */
  expectedMembers?: number;
  /** The id was made at this start: a sync answer's echo of it is only this run's (EngineOptions.freshId). */
  freshId?: boolean;
  /** Replaces an engine of this node its peers hear already: decides at once (EngineOptions.rebuilt). */
  rebuilt?: boolean;
  /** With no member heard, how long a starting node waits after its first message (EngineOptions.joinTimeoutMs). */
  joinTimeoutMs?: number;
  /** Relay mode: hops a member's gossip may take beyond the first (EngineOptions.relayHops); 0 or absent: broadcast. */
  relayHops?: number;
  /** Where the engine logs what an operator should see (a peer ignored, a peer departed). */
  logger?: WarnLogger;
}

/**
 * Builds an engine; the mesh limiter uses the real one unless a test injects another. Called
 * once per node, and at each start for two throwaway engines that warm the decision path up
 * (src/mesh/warm.ts: node ids `warm-a` and `warm-b`, their own ManualClock).
 */
export type EngineFactory = (init: EngineInit) => MeshEngine;
