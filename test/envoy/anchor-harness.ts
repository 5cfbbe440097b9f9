import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { loadConfig } from '../../src/daemon/config.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { rlsServiceDefinition } from '../../src/envoy/grpc-server.js';
import { memoryLogger } from '../daemon/fake-limiter.js';
import { waitFor } from '../mesh/helpers.js';

/** The vendored envoyproxy/ratelimit config files (test/envoy/anchor/README.md). */
export const ANCHOR_DIR = new URL('./anchor/', import.meta.url).pathname;

/** A descriptor as their tests write it (`[][2]string`), with an optional per-descriptor hits_addend or limit. */
export interface Desc {
  entries: [string, string][];
  hits?: number;
  limit?: { requests_per_unit: number; unit: string };
}

/** A RateLimitResponse as @grpc/proto-loader decodes it. */
export interface Answer {
  overall_code: 'OK' | 'OVER_LIMIT';
  statuses: {
    code: 'OK' | 'OVER_LIMIT';
    current_limit: { requests_per_unit: number; unit: string; name: string } | null;
    limit_remaining: number;
    duration_until_reset: { seconds: number; nanos: number } | null;
  }[];
  response_headers_to_add: { key: string; value: string }[];
  /** A google.protobuf.Struct as @grpc/proto-loader decodes it (see {@link fromStruct}). */
  dynamic_metadata: unknown;
}

// biome-ignore lint/suspicious/noExplicitAny: a decoded google.protobuf.Value
type Decoded = any;

/** A google.protobuf.Struct as @grpc/proto-loader decodes it (oneofs named by `kind`), as JSON; null when unset. */
export function fromStruct(s: Decoded): unknown {
  if (s === null || s === undefined) return null;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s.fields ?? {})) out[k] = fromValue(v);
  return out;
}

function fromValue(v: Decoded): unknown {
  // the well-known types come camelCased from proto-loader whatever keepCase says
  switch (v.kind) {
    case 'nullValue':
      return null;
    case 'numberValue':
      return v.numberValue;
    case 'stringValue':
      return v.stringValue;
    case 'boolValue':
      return v.boolValue;
    case 'structValue':
      return fromStruct(v.structValue);
    case 'listValue':
      return (v.listValue.values ?? []).map(fromValue);
    default:
      throw new Error(`not a google.protobuf.Value: ${JSON.stringify(v)}`);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the generated clients are untyped
type Client = any;

/**
 * One ratemesh deployment under test, reached over gRPC as Envoy would: a
 * single node, or two daemons in one mesh whose calls alternate between the
 * nodes (Envoy's round robin over the cluster).
 */
export class Target {
  private next = 0;
  private constructor(
    readonly kind: 'single node' | '2-node mesh',
    readonly daemons: Daemon[],
    private readonly rls: Client[],
    private readonly health: Client[],
    readonly dir: string,
  ) {}

  /**
   * Starts daemons serving the anchor's files `files` from a folder (their
   * runtime config folder) and the files `extra` (name: text), with `grpc`
   * settings added to each daemon's.
   */
  static async start(
    kind: Target['kind'],
    files: string[],
    grpcExtra = '',
    extra: Record<string, string> = {},
  ): Promise<Target> {
    const dir = mkdtempSync(join(tmpdir(), 'ratemesh-anchor-'));
    mkdirSync(join(dir, 'config'));
    for (const f of files) copyFileSync(join(ANCHOR_DIR, f), join(dir, 'config', f));
    for (const [name, text] of Object.entries(extra)) writeFileSync(join(dir, 'config', name), text);
    const daemons: Daemon[] = [];
    const n = kind === 'single node' ? 1 : 2;
    try {
      for (let i = 0; i < n; i++) {
        const bootstrap = i === 0 ? '[]' : JSON.stringify(daemons[0]!.limiter.multiaddrs().slice(0, 1));
        const file = join(dir, `daemon-${i}.yaml`);
        writeFileSync(
          file,
          `http: { host: 127.0.0.1, port: 0, drainTimeoutMs: 500 }
mesh: { listen: [/ip4/127.0.0.1/tcp/0], bootstrap: ${bootstrap}, gossipIntervalMs: 50 }
log: { level: silent }
envoy: { files: [config] }
grpc:
  port: 0
  responseHeaders: true
${grpcExtra}`,
        );
        const load = () => loadConfig({ argv: ['--config', file], env: {}, cwd: dir });
        daemons.push(await startDaemon({ config: load(), load, watch: true, logger: memoryLogger() }));
      }
      if (n === 2) {
        // each has heard the other say it hears two members: no peer of a narrower view (still
        // starting: the rule reserves L/N for it) is left, and each is past its start gate
        await waitFor('the two nodes see each other live', () =>
          daemons.every(
            (d) =>
              d.limiter.peers().filter((p) => !p.stale && p.members === 2).length === 1 &&
              !d.limiter.stats().engine.starting,
          ),
        );
      }
    } catch (err) {
      await Promise.all(daemons.map((d) => d.stop()));
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    const Rls = grpc.makeGenericClientConstructor(rlsServiceDefinition(), 'RateLimitService');
    const Health = grpc.makeGenericClientConstructor(
      healthService as unknown as grpc.ServiceDefinition,
      'Health',
    );
    const at = (d: Daemon) => `127.0.0.1:${d.grpc!.port}`;
    const rls = daemons.map((d) => new Rls(at(d), grpc.credentials.createInsecure()));
    const health = daemons.map((d) => new Health(at(d), grpc.credentials.createInsecure()));
    return new Target(kind, daemons, rls, health, dir);
  }

  get mesh(): boolean {
    return this.daemons.length > 1;
  }

  /** `ShouldRateLimit` on the next node (round robin); rejects with the gRPC error. */
  call(domain: string, descriptors: Desc[], hits = 0, node?: number): Promise<Answer> {
    const i = node ?? this.next++ % this.rls.length;
    const request = {
      domain,
      hits_addend: hits,
      descriptors: descriptors.map((d) => ({
        entries: d.entries.map(([key, value]) => ({ key, value })),
        ...(d.hits === undefined ? {} : { hits_addend: { value: d.hits } }),
        ...(d.limit === undefined ? {} : { limit: d.limit }),
      })),
    };
    return new Promise((resolve, reject) => {
      this.rls[i]!.ShouldRateLimit(request, (err: grpc.ServiceError | null, res: Answer) =>
        err === null ? resolve(res) : reject(err),
      );
    });
  }

  /** `grpc.health.v1.Health/Check` on node `node`: the status name, or the gRPC error code. */
  check(service: string, node = 0): Promise<string | number> {
    return new Promise((resolve) => {
      this.health[node]!.check({ service }, (err: grpc.ServiceError | null, res: { status: string }) =>
        resolve(err === null ? res.status : err.code),
      );
    });
  }

  async stop(): Promise<void> {
    for (const c of [...this.rls, ...this.health]) c.close();
    await Promise.all(this.daemons.map((d) => d.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Their `CalculateReset`: whole seconds to the end of the clock-aligned window of `unitSeconds`, at `nowMs`. */
export function anchorReset(unitSeconds: number, nowMs: number): number {
  return unitSeconds - (Math.floor(nowMs / 1000) % unitSeconds);
}

/** A value unique to this run, as their tests draw a random key for each case. */
export function fresh(): string {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}
