/**
 * The RLS gRPC server in a process of its own, for the abuse and interop
 * tests (test/envoy/h2-abuse.test.ts, interop-*.test.ts): its memory is its
 * own, and a client in the test process or a Debian binary drives it.
 *
 * Started with `node --import tsx h2-server-child.ts`; H2_CHILD_OPTS is JSON
 * of `{ limits?, maxConnections?, maxConcurrentStreams?, requestTimeoutMs?,
 * transport? }`. Without limits or a connection cap it is the RLS server of
 * grpc-server.ts, health service included; with them it is startGrpcServer
 * serving ShouldRateLimit alone from the same RlsService and codec (the
 * server the abuse tests were written against; startRlsServer now takes
 * `limits` and `maxConnections` too, as the daemon's `grpc` section gives
 * them). Prints `{"port": N}` on its first stdout line; answers the
 * IPC message `{ cmd: 'stats', id }` with its RSS, heap, open connections
 * and the errors its connections reported (counted by kind), after a GC
 * when it runs with --expose-gc.
 */
import { decodeRateLimitRequest } from '../../src/envoy/codec.js';
import { encodeRateLimitResponse } from '../../src/envoy/codec-encode.js';
import { RLS_SERVICE, startRlsServer } from '../../src/envoy/grpc-server.js';
import { GrpcStatus } from '../../src/envoy/grpc-status.js';
import { MESSAGE_PREFIX, type Method, startGrpcServer } from '../../src/envoy/grpc-transport.js';
import { RlsService } from '../../src/envoy/service.js';
import { config, EngineLimiter } from './helpers.js';

/** The config the child serves: `edge` with a huge limit (every call OK), `tight` with 5 a minute. */
export const CHILD_YAML = [
  `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
`,
  `
domain: tight
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 5 }
`,
];

/** What the child answers to `stats`. */
export interface ChildStats {
  rss: number;
  heapUsed: number;
  /** Errors its connections reported, by their message up to the first digit or colon. */
  errors: Record<string, number>;
  /** Uncaught exceptions seen (must stay 0). */
  uncaught: number;
  /** ShouldRateLimit calls answered, by gRPC status code (the RLS server only). */
  calls: Record<string, number>;
}

async function main(): Promise<void> {
  const opts = JSON.parse(process.env.H2_CHILD_OPTS ?? '{}') as {
    limits?: Record<string, number>;
    maxConnections?: number;
    maxConcurrentStreams?: number;
    requestTimeoutMs?: number;
    transport?: 'ratemesh' | 'node:http2';
  };
  if (opts.transport !== undefined) process.env.RATEMESH_GRPC_TRANSPORT = opts.transport;
  let uncaught = 0;
  process.on('uncaughtException', (err) => {
    uncaught++;
    process.stderr.write(`uncaught: ${err.stack ?? err.message}\n`);
  });
  const errors: Record<string, number> = {};
  const calls: Record<string, number> = {};
  const cfg = config(CHILD_YAML);
  const limiter = new EngineLimiter(cfg.policies);
  await limiter.start();
  const logger = {
    debug(obj: unknown) {
      const m = (obj as { err?: { message?: string } })?.err?.message;
      if (m !== undefined) {
        const kind = m.replace(/\d+/g, 'N');
        errors[kind] = (errors[kind] ?? 0) + 1;
      }
    },
    info() {},
    warn() {},
    error() {},
  };
  const service = new RlsService({ config: cfg, limiter });
  let port: number;
  let stop: (graceMs: number) => Promise<void>;
  if (opts.limits === undefined && opts.maxConnections === undefined) {
    const server = await startRlsServer({
      service,
      host: '127.0.0.1',
      port: 0,
      logger,
      onCall: (code) => {
        calls[code] = (calls[code] ?? 0) + 1;
      },
      ...(opts.maxConcurrentStreams === undefined ? {} : { maxConcurrentStreams: opts.maxConcurrentStreams }),
      ...(opts.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: opts.requestTimeoutMs }),
    });
    server.setServing(true);
    port = server.port;
    stop = (g) => server.stop(g);
  } else {
    const shouldRateLimit: Method = {
      kind: 'unary',
      call(message) {
        const req = decodeRateLimitRequest(message);
        if (!req.ok) return { code: GrpcStatus[req.code], message: req.message };
        const r = service.shouldRateLimit(req.value);
        return r.ok
          ? { frame: encodeRateLimitResponse(r.response, MESSAGE_PREFIX) }
          : { code: GrpcStatus.UNAVAILABLE, message: r.message };
      },
    };
    const server = await startGrpcServer({
      host: '127.0.0.1',
      port: 0,
      methods: new Map([[`/${RLS_SERVICE}/ShouldRateLimit`, shouldRateLimit]]),
      maxMessageBytes: 64 * 1024,
      maxConcurrentStreams: opts.maxConcurrentStreams ?? 256,
      requestTimeoutMs: opts.requestTimeoutMs ?? 10_000,
      onSessionError: (err) => logger.debug({ err: { message: err.message } }),
      ...(opts.limits === undefined ? {} : { limits: opts.limits }),
      ...(opts.maxConnections === undefined ? {} : { maxConnections: opts.maxConnections }),
    });
    port = server.port;
    stop = (g) => server.close(g);
  }
  process.stdout.write(`${JSON.stringify({ port, service: RLS_SERVICE })}\n`);
  process.on('message', (m: { cmd: string; id: number }) => {
    if (m.cmd !== 'stats') return;
    (globalThis as { gc?: () => void }).gc?.();
    const mem = process.memoryUsage();
    const stats: ChildStats = {
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      errors: { ...errors },
      uncaught,
      calls: { ...calls },
    };
    process.send?.({ id: m.id, stats });
  });
  process.on('disconnect', () => {
    void stop(100).then(() => process.exit(0));
  });
}

await main();
