import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { ServiceDefinition } from '@grpc/grpc-js';
import type { Options, PackageDefinition } from '@grpc/proto-loader';
import type { Logger } from '../mesh/types.js';
import {
  decodeEmpty,
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeHealthListResponse,
  encodeRateLimitResponse,
  type ServingStatus,
} from './codec.js';
import { GrpcStatus } from './grpc-status.js';
import {
  type GrpcTransport,
  MESSAGE_PREFIX,
  type Method,
  type Reply,
  type ServerStream,
  type ServerStreamMethod,
  startGrpcServer,
  type UnaryMethod,
} from './grpc-transport.js';
import type { H2Limits } from './h2.js';
import type { RlsErrorCode, RlsResult, RlsService } from './service.js';

/** The vendored proto folders (see proto/README.md), from src/envoy or dist/envoy alike. */
export const PROTO_INCLUDE_DIRS: readonly string[] = ['envoy-api', 'cncf-xds', 'protoc-gen-validate'].map(
  (d) => fileURLToPath(new URL(`../../proto/${d}`, import.meta.url)),
);
/** The RLS v3 service file, relative to {@link PROTO_INCLUDE_DIRS}. */
export const RLS_PROTO = 'envoy/service/ratelimit/v3/rls.proto';
/** The fully qualified service name (also its name in the health service). */
export const RLS_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
/**
 * The name envoyproxy/ratelimit registers in its health service
 * (`NewHealthChecker(health.NewServer(), "ratelimit", ...)`): an Envoy health
 * check copied from a deployment of theirs asks for it.
 */
export const ANCHOR_HEALTH_NAME = 'ratelimit';
/** The standard health service. */
export const HEALTH_SERVICE = 'grpc.health.v1.Health';

/**
 * How @grpc/proto-loader decodes the protos for clients (tests, bench,
 * examples): field names as in the .proto (snake_case), enums as their
 * names, 64-bit integers as numbers, defaults filled. The server's own codec
 * (codec.ts) decodes to the same shape.
 */
export const PROTO_LOADER_OPTIONS: Readonly<Options> = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [...PROTO_INCLUDE_DIRS],
};

let cached: PackageDefinition | undefined;

/**
 * The RLS v3 package definition from the vendored protos, by
 * @grpc/proto-loader (loaded once per process, and only when asked: the
 * server does not need it).
 */
export function rlsPackageDefinition(): PackageDefinition {
  if (cached === undefined) {
    const { loadSync } = createRequire(import.meta.url)(
      '@grpc/proto-loader',
    ) as typeof import('@grpc/proto-loader');
    cached = loadSync(RLS_PROTO, { ...PROTO_LOADER_OPTIONS });
  }
  return cached;
}

/** The RateLimitService definition, for @grpc/grpc-js clients. */
export function rlsServiceDefinition(): ServiceDefinition {
  const def = rlsPackageDefinition()[RLS_SERVICE];
  if (def === undefined || !('ShouldRateLimit' in def))
    throw new Error(`${RLS_SERVICE} missing from ${RLS_PROTO}`);
  return def as unknown as ServiceDefinition;
}

/** Defaults of the gRPC server. */
export const GRPC_DEFAULTS = {
  host: '127.0.0.1',
  /** Largest request accepted, bytes; a larger one is refused with RESOURCE_EXHAUSTED. */
  maxMessageBytes: 64 * 1024,
  /** Calls in flight on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: 256,
  /** A request not fully arrived after this long is answered DEADLINE_EXCEEDED. */
  requestTimeoutMs: 10_000,
} as const;

/** Options of {@link startRlsServer}. */
export interface RlsServerOptions {
  service: RlsService;
  host: string;
  /** 0 picks a free port. */
  port: number;
  maxMessageBytes?: number;
  maxConcurrentStreams?: number;
  requestTimeoutMs?: number;
  /** Connections open at once; one more is refused (grpc-transport.ts MAX_CONNECTIONS by default). */
  maxConnections?: number;
  /** HTTP/2 caps and timeouts of ratemesh's transport, each defaulting to H2_LIMITS (docs/envoy-transport.md). */
  limits?: Partial<H2Limits>;
  /** The HTTP/2 under the server; default RATEMESH_GRPC_TRANSPORT, else `ratemesh` (grpcTransport in grpc-transport.ts). */
  transport?: GrpcTransport;
  logger: Logger;
  /** Told of each ShouldRateLimit call's status code (0 = OK) for metrics. */
  onCall?: (code: number) => void;
}

/** A running RLS gRPC server. */
export interface RlsServer {
  /** The bound port (the real one when 0 was asked). */
  readonly port: number;
  readonly host: string;
  /** Sets the health of '', the RLS service and `ratelimit`: SERVING or NOT_SERVING. */
  setServing(serving: boolean): void;
  /** Stops taking calls, lets running ones finish for up to `graceMs`, then closes the rest. */
  stop(graceMs: number): Promise<void>;
}

const ERROR_STATUS: Readonly<Record<RlsErrorCode, number>> = {
  INVALID_ARGUMENT: GrpcStatus.INVALID_ARGUMENT,
  NOT_FOUND: GrpcStatus.NOT_FOUND,
  UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  INTERNAL: GrpcStatus.INTERNAL,
};

/**
 * Serves `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and
 * the standard `grpc.health.v1.Health` service (Check, Watch, List) over
 * gRPC (grpc-transport.ts) on ratemesh's own HTTP/2 (h2.ts), plaintext: run
 * it on a private network or loopback, as envoyproxy/ratelimit's default.
 */
export async function startRlsServer(opts: RlsServerOptions): Promise<RlsServer> {
  const { service, logger } = opts;

  const replyOf = (result: RlsResult): Reply => {
    if (result.ok) return { frame: encodeRateLimitResponse(result.response, MESSAGE_PREFIX) };
    const code = ERROR_STATUS[result.code];
    if (code === GrpcStatus.INTERNAL) logger.error({ message: result.message }, 'ShouldRateLimit failed');
    else logger.debug({ code: result.code, message: result.message }, 'ShouldRateLimit refused');
    return { code, message: result.message };
  };

  const shouldRateLimit: UnaryMethod = {
    kind: 'unary',
    call(message) {
      const req = decodeRateLimitRequest(message);
      if (!req.ok) {
        logger.debug({ code: req.code, message: req.message }, 'ShouldRateLimit refused');
        return { code: GrpcStatus[req.code], message: req.message };
      }
      let result: RlsResult;
      try {
        // owner placement (issue 27): a descriptor key owned on another node is asked of its owner
        const asked = service.shouldRateLimitOrAsk(req.value);
        if (asked instanceof Promise) return asked.then((r) => replyOf(r));
        result = asked;
        if (result.ok) return { frame: encodeRateLimitResponse(result.response, MESSAGE_PREFIX) };
      } catch (err) {
        // shouldRateLimit answers errors as values; this is only a last guard.
        logger.error(
          { err: { message: err instanceof Error ? err.message : String(err) } },
          'ShouldRateLimit failed',
        );
        return { code: GrpcStatus.INTERNAL, message: 'internal error' };
      }
      return replyOf(result);
    },
    ...(opts.onCall === undefined ? {} : { done: opts.onCall }),
  };

  // grpc.health.v1: the server (''), the RLS service, and envoyproxy/ratelimit's own name for it
  const names = ['', RLS_SERVICE, ANCHOR_HEALTH_NAME];
  const health = new Map<string, ServingStatus>(names.map((n) => [n, 'NOT_SERVING']));
  const watchers = new Map<string, Set<ServerStream>>();
  const check: UnaryMethod = {
    kind: 'unary',
    call(message) {
      const req = decodeHealthCheckRequest(message);
      if (!req.ok) return { code: GrpcStatus[req.code], message: req.message };
      const status = health.get(req.value.service);
      if (status === undefined) {
        return {
          code: GrpcStatus.NOT_FOUND,
          message: `Health status unknown for service ${req.value.service}`,
        };
      }
      return { frame: encodeHealthCheckResponse(status, MESSAGE_PREFIX) };
    },
  };
  const watch: ServerStreamMethod = {
    kind: 'server-stream',
    open(message, stream) {
      const req = decodeHealthCheckRequest(message);
      if (!req.ok) return { code: GrpcStatus[req.code], message: req.message };
      const name = req.value.service;
      const set = watchers.get(name) ?? new Set<ServerStream>();
      watchers.set(name, set);
      set.add(stream);
      stream.onClose(() => {
        set.delete(stream);
        if (set.size === 0 && watchers.get(name) === set) watchers.delete(name);
      });
      stream.write(encodeHealthCheckResponse(health.get(name) ?? 'SERVICE_UNKNOWN', MESSAGE_PREFIX));
      return undefined;
    },
  };
  const list: UnaryMethod = {
    kind: 'unary',
    call(message) {
      const req = decodeEmpty(message, 'HealthListRequest');
      if (!req.ok) return { code: GrpcStatus[req.code], message: req.message };
      return { frame: encodeHealthListResponse(health, MESSAGE_PREFIX) };
    },
  };

  const methods = new Map<string, Method>([
    [`/${RLS_SERVICE}/ShouldRateLimit`, shouldRateLimit],
    [`/${HEALTH_SERVICE}/Check`, check],
    [`/${HEALTH_SERVICE}/Watch`, watch],
    [`/${HEALTH_SERVICE}/List`, list],
  ]);
  const server = await startGrpcServer({
    host: opts.host,
    port: opts.port,
    methods,
    maxMessageBytes: opts.maxMessageBytes ?? GRPC_DEFAULTS.maxMessageBytes,
    maxConcurrentStreams: opts.maxConcurrentStreams ?? GRPC_DEFAULTS.maxConcurrentStreams,
    requestTimeoutMs: opts.requestTimeoutMs ?? GRPC_DEFAULTS.requestTimeoutMs,
    ...(opts.maxConnections === undefined ? {} : { maxConnections: opts.maxConnections }),
    ...(opts.limits === undefined ? {} : { limits: opts.limits }),
    ...(opts.transport === undefined ? {} : { transport: opts.transport }),
    onSessionError: (err) => logger.debug({ err: { message: err.message } }, 'gRPC connection error'),
  });

  const setStatus = (name: string, status: ServingStatus): void => {
    if (health.get(name) === status) return;
    health.set(name, status);
    const set = watchers.get(name);
    if (set === undefined) return;
    for (const w of set) w.write(encodeHealthCheckResponse(status, MESSAGE_PREFIX));
  };
  const setServing = (serving: boolean): void => {
    const s = serving ? 'SERVING' : 'NOT_SERVING';
    for (const n of names) setStatus(n, s);
  };

  let stopping: Promise<void> | undefined;
  const stop = (graceMs: number): Promise<void> => {
    stopping ??= (async () => {
      setServing(false);
      await server.close(graceMs);
    })();
    return stopping;
  };

  return { port: server.port, host: opts.host, setServing, stop };
}
