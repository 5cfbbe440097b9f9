import './polyfill.js';

export { TOPIC, TOPIC_PREFIX } from './constants.js';
export { type BootstrapEntry, parseBootstrap, type Resolver } from './discovery.js';
export type { EngineFactory, EngineInit, MeshEngine } from './engine-port.js';
export { createMeshLimiter } from './mesh-limiter.js';
export { type ClosableServer, SHUTDOWN_DEFAULTS, type ShutdownOptions } from './shutdown.js';
export { SYNC_PROTOCOL } from './sync.js';
export type {
  EmbeddedMeshLimiter,
  Logger,
  MeshHealth,
  MeshLimiter,
  MeshLimiterOptions,
  MeshState,
  MeshStats,
  OwnerMeshLimiter,
  RelayMode,
} from './types.js';
