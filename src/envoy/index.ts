/**
 * envoyproxy/ratelimit compatibility: their config files, their descriptor
 * matching, and the RLS v3 decision on a ratemesh limiter. The gRPC server
 * itself (`grpc-server.ts`, with its HTTP/2 and codec) is left out of this
 * barrel: the daemon starts it.
 */
export {
  ENVOY_ALGORITHMS,
  type EnvoyAlgorithm,
  type EnvoyConfig,
  EnvoyConfigError,
  type EnvoyConfigOptions,
  type EnvoyConfigSource,
  parseEnvoyConfig,
} from './config.js';
export { type CountingLimiter, type CountMode, canCount } from './counting.js';
export { counterKey } from './key.js';
export { type DescriptorEntry, matchDescriptor } from './matcher.js';
export { type InstallOverrides, LimitOverrides, MAX_OVERRIDES } from './overrides.js';
export {
  type CountHits,
  DEFAULT_HEADER_NAMES,
  MAX_DESCRIPTORS,
  MAX_ENTRIES,
  MAX_HITS,
  type RlsDescriptorStatus,
  type RlsErrorCode,
  type RlsResponse,
  type RlsResult,
  RlsService,
  type RlsServiceOptions,
  UNLIMITED_REMAINING,
  untilReset,
} from './service.js';
export type { DescriptorLevel, DescriptorNode, EnvoyRateLimit, WildcardEntry } from './tree.js';
export { wildcardMatch } from './tree.js';
export { type EnvoyUnit, parseUnit, UNIT_ENUM, UNIT_SECONDS } from './units.js';
