/** ratemesh: the public API. Re-exports only (`ratemesh/express` and `ratemesh/fastify` are their own entry points). */
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
// The Express and Fastify adapters are the subpaths `ratemesh/express` and
// `ratemesh/fastify`, so that this barrel's types import neither framework.
export type { ProxyHeader } from './http/client-ip.js';
export { type AdapterHooks, type FailureReason, type HttpStats, RateMeshCore } from './http/core.js';
export {
  formatRateLimit,
  formatRateLimitPolicy,
  type HeaderDraft,
  type HeaderMember,
  partitionKey,
  retryAfterSeconds,
} from './http/headers.js';
export { type NodeGuard, rateMeshGuard } from './http/node-http.js';
export type {
  KeySource,
  LimitInfo,
  MaybePromise,
  PolicyRef,
  RateMeshHttpOptions,
  RouteRule,
} from './http/options.js';
export * from './keys/index.js';
export type { WarnLogger } from './logger.js';
export {
  type ClosableServer,
  createMeshLimiter,
  type EmbeddedMeshLimiter,
  type Logger,
  type MeshHealth,
  type MeshLimiter,
  type MeshLimiterOptions,
  type MeshState,
  type MeshStats,
  type OwnerMeshLimiter,
  SHUTDOWN_DEFAULTS,
  type ShutdownOptions,
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
