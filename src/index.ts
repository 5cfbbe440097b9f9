/** ratemesh: the public API. Re-exports only. */
export * from './algorithms/index.js';
export { type Clock, ManualClock, systemClock } from './clock.js';
export {
  type DecodeError,
  decodeMessage,
  encodeGossip,
  encodeSyncRequest,
  encodeSyncResponse,
  type Message,
  type WireEntry,
  type WirePolicy,
} from './crdt/codec.js';
export { KeyWindow } from './crdt/window.js';
export {
  Engine,
  type EngineOptions,
  type EngineStats,
  type PolicyReplacement,
  type ReceiveResult,
  type VersionMismatch,
} from './decision/engine.js';
export type { PeerView } from './decision/peers.js';
export * from './envoy/index.js';
export { type ErrorCode, ErrorCodes, isRateMeshError, RateMeshError } from './errors.js';
export * from './http/index.js';
export * from './keys/index.js';
export type { WarnLogger } from './logger.js';
export {
  createMeshLimiter,
  type Logger,
  type MeshLimiter,
  type MeshLimiterOptions,
  type MeshStats,
  type OwnerMeshLimiter,
  SYNC_PROTOCOL,
  TOPIC,
  TOPIC_PREFIX,
} from './mesh/index.js';
export * from './policy/index.js';
export { gcraBound, runBaselines } from './sim/baselines.js';
export { slidingLogAdmits, worstAligned, worstRolling } from './sim/metrics.js';
export { type Cut, replayTrace, type SimOptions, Simulator } from './sim/simulator.js';
export { seedTrace, type Trace } from './sim/trace.js';
export * from './types.js';
