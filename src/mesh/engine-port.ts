import type { Clock } from '../clock.js';
import type { PolicySet } from '../policy/index.js';
import type { PolicySpec, RateLimiter } from '../types.js';

/** The outcome of handing peer bytes to the engine; it never throws, it counts and explains. */
export interface Receipt {
  ok: boolean;
  reason?: string;
}

/** What the engine knows of one peer. */
export interface EnginePeer {
  id: string;
  ageMs: number;
  stale: boolean;
  clockOffsetMs: number;
}

/**
 * The part of the decision engine (src/decision/engine.ts) the network layer
 * drives. The mesh only carries bytes: it never looks inside them. `now` is
 * the reading of the shared clock at the event; an engine that reads the clock
 * itself may ignore it.
 */
export interface MeshEngine extends RateLimiter {
  /** Policy-set version hash (informational: the wire carries one version per policy). */
  readonly version: string;
  /** The version of each policy in force, by name. */
  policyVersions(): Record<string, string>;
  /** Policies some members run at another version than ours, with their versions. */
  versionMismatches(): { policy: string; ours: string; peers: Record<string, string> }[];
  /**
   * Replace the policy set at runtime, keeping the state of unchanged policies
   * (throws, changing nothing, when the set is invalid).
   */
  replacePolicies(
    policies: readonly PolicySpec[] | PolicySet,
    now?: number,
  ): { kept: string[]; changed: string[]; added: string[]; removed: string[]; version: string };
  /**
   * This tick's message: every touched key's window of own counts, or a heartbeat.
   * `reach`: members the message goes to directly, this node included.
   */
  buildGossip(now?: number, reach?: number): Uint8Array;
  /** Members this node counts, itself included (the N of L/N). */
  memberCount(): number;
  /** Cheap; true when unsynced own counts crossed the early-publish threshold. */
  wantsEarlyPublish(): boolean;
  /** Never throws; a refused message is counted inside and explained by `reason`. */
  receiveGossip(from: string, bytes: Uint8Array, now?: number): Receipt;
  buildSyncRequest(now?: number): Uint8Array;
  /** The response bytes, or a refusal (bad or foreign-version request). */
  answerSync(from: string, request: Uint8Array, now?: number): Uint8Array | Receipt;
  receiveSyncResponse(from: string, response: Uint8Array, now?: number): Receipt;
  peerDeparted(id: string): void;
  /** This node's own windows as bytes (written to `snapshotFile` on stop). */
  snapshot(): Uint8Array;
  /** Counts a snapshot's windows still inside the window; never throws. */
  restoreSnapshot(bytes: Uint8Array): Receipt & { restored?: number };
  peerViews(now?: number): EnginePeer[];
  stats(): object;
}

/** What the engine is built from. */
export interface EngineInit {
  policies: readonly PolicySpec[];
  /** Our libp2p peer id. */
  nodeId: string;
  clock: Clock;
  gossipIntervalMs: number;
  expectedDelayMs: number;
  /** 1 + the bootstrap entries: the engine enforces L/N with this N until it hears a peer. */
  expectedMembers?: number;
  /** Where the engine logs what an operator should see (a peer ignored for sending counts it could not have admitted). */
  logger?: { warn(obj: object, msg: string): void };
}

/** Builds an engine; the mesh limiter uses the real one unless a test injects another. */
export type EngineFactory = (init: EngineInit) => MeshEngine;
