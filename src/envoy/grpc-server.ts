import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync, type Options, type PackageDefinition } from '@grpc/proto-loader';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from '../mesh/types.js';
import type { RlsErrorCode, RlsService } from './service.js';

/** The vendored proto folders (see proto/README.md), from src/envoy or dist/envoy alike. */
export const PROTO_INCLUDE_DIRS: readonly string[] = ['envoy-api', 'cncf-xds', 'protoc-gen-validate'].map(
  (d) => fileURLToPath(new URL(`../../proto/${d}`, import.meta.url)),
);
/** The RLS v3 service file, relative to {@link PROTO_INCLUDE_DIRS}. */
export const RLS_PROTO = 'envoy/service/ratelimit/v3/rls.proto';
/** The fully qualified service name (also its name in the health service). */
export const RLS_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';

/**
 * How the protos are decoded: field names as in the .proto (snake_case),
 * enums as their names, 64-bit integers as numbers (a hits_addend past 2^53
 * loses precision but is refused as too large all the same), defaults filled.
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

/** The RLS v3 package definition from the vendored protos (loaded once per process). */
export function rlsPackageDefinition(): PackageDefinition {
  cached ??= loadSync(RLS_PROTO, { ...PROTO_LOADER_OPTIONS });
  return cached;
}

/** The RateLimitService definition, for servers and clients alike. */
export function rlsServiceDefinition(): grpc.ServiceDefinition {
  const def = rlsPackageDefinition()[RLS_SERVICE];
  if (def === undefined || !('ShouldRateLimit' in def))
    throw new Error(`${RLS_SERVICE} missing from ${RLS_PROTO}`);
  return def as unknown as grpc.ServiceDefinition;
}

/** Defaults of the gRPC server. */
export const GRPC_DEFAULTS = {
  host: '127.0.0.1',
  /** Largest request accepted, bytes; a larger one is refused with RESOURCE_EXHAUSTED. */
  maxMessageBytes: 64 * 1024,
} as const;

/** Options of {@link startRlsServer}. */
export interface RlsServerOptions {
  service: RlsService;
  host: string;
  /** 0 picks a free port. */
  port: number;
  maxMessageBytes?: number;
  logger: Logger;
  /** Told of each call's status code (0 = OK) for metrics. */
  onCall?: (code: grpc.status) => void;
}

/** A running RLS gRPC server. */
export interface RlsServer {
  /** The bound port (the real one when 0 was asked). */
  readonly port: number;
  readonly host: string;
  /** Sets the health of '' and the RLS service: SERVING or NOT_SERVING. */
  setServing(serving: boolean): void;
  /** Stops taking calls, lets running ones finish for up to `graceMs`, then closes the rest. */
  stop(graceMs: number): Promise<void>;
}

const ERROR_STATUS: Readonly<Record<RlsErrorCode, grpc.status>> = {
  INVALID_ARGUMENT: grpc.status.INVALID_ARGUMENT,
  NOT_FOUND: grpc.status.NOT_FOUND,
  UNAVAILABLE: grpc.status.UNAVAILABLE,
  INTERNAL: grpc.status.INTERNAL,
};

/**
 * Serves `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and
 * the standard `grpc.health.v1.Health` service on @grpc/grpc-js, plaintext
 * (run it on a private network or loopback, as envoyproxy/ratelimit's default).
 */
export async function startRlsServer(opts: RlsServerOptions): Promise<RlsServer> {
  const maxBytes = opts.maxMessageBytes ?? GRPC_DEFAULTS.maxMessageBytes;
  const server = new grpc.Server({
    'grpc.max_receive_message_length': maxBytes,
    'grpc.max_send_message_length': 4 * 1024 * 1024,
    // channelz keeps per-call statistics and traces: measurable CPU on every call, unused here
    'grpc.enable_channelz': 0,
  });
  const { service, logger, onCall } = opts;
  server.addService(rlsServiceDefinition(), {
    ShouldRateLimit: (
      call: grpc.ServerUnaryCall<unknown, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) => {
      let result: ReturnType<RlsService['shouldRateLimit']>;
      try {
        result = service.shouldRateLimit(call.request);
      } catch (err) {
        // shouldRateLimit answers errors as values; this is only a last guard.
        logger.error(
          { err: { message: err instanceof Error ? err.message : String(err) } },
          'ShouldRateLimit failed',
        );
        result = { ok: false, code: 'INTERNAL', message: 'internal error' };
      }
      if (result.ok) {
        onCall?.(grpc.status.OK);
        callback(null, result.response);
      } else {
        const code = ERROR_STATUS[result.code];
        onCall?.(code);
        if (code === grpc.status.INTERNAL)
          logger.error({ message: result.message }, 'ShouldRateLimit failed');
        else logger.debug({ code: result.code, message: result.message }, 'ShouldRateLimit refused');
        callback({ code, details: result.message }, null);
      }
    },
  });
  const health = new HealthImplementation({ '': 'NOT_SERVING', [RLS_SERVICE]: 'NOT_SERVING' });
  health.addToServer(server);

  const hostPort = opts.host.includes(':') ? `[${opts.host}]:${opts.port}` : `${opts.host}:${opts.port}`;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(hostPort, grpc.ServerCredentials.createInsecure(), (err, p) => {
      if (err) reject(new Error(`cannot listen on ${hostPort} (gRPC): ${err.message}`));
      else resolve(p);
    });
  });

  const setServing = (serving: boolean): void => {
    const s = serving ? 'SERVING' : 'NOT_SERVING';
    health.setStatus('', s);
    health.setStatus(RLS_SERVICE, s);
  };

  let stopping: Promise<void> | undefined;
  const stop = (graceMs: number): Promise<void> => {
    stopping ??= new Promise<void>((resolve) => {
      setServing(false);
      const timer = setTimeout(() => server.forceShutdown(), graceMs);
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    return stopping;
  };

  return { port, host: opts.host, setServing, stop };
}
