/** The HTTP response layer: adapters for node:http, Express 5 and Fastify 5 over one shared core. */
export type { ProxyHeader } from './client-ip.js';
export { type AdapterHooks, type FailureReason, type HttpStats, RateMeshCore } from './core.js';
export { type RateMeshExpressMiddleware, rateMeshExpress } from './express.js';
export { type FastifyRouteRateMesh, type RateMeshFastifyPlugin, rateMeshFastify } from './fastify.js';
export {
  formatRateLimit,
  formatRateLimitPolicy,
  type HeaderDraft,
  type HeaderMember,
  partitionKey,
  retryAfterSeconds,
} from './headers.js';
export { type NodeGuard, rateMeshGuard } from './node-http.js';
export type {
  KeySource,
  LimitInfo,
  MaybePromise,
  PolicyRef,
  RateMeshHttpOptions,
  RouteRule,
} from './options.js';
