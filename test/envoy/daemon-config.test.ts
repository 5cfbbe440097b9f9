import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/daemon/config.js';
import { limiterOptions } from '../../src/daemon/daemon.js';
import { restartOnlyChange } from '../../src/daemon/reload.js';
import { GRPC_LIMIT_RANGES, ignoredOnNodeHttp2, rlsServerOptions } from '../../src/envoy/daemon-config.js';
import { GRPC_DEFAULTS } from '../../src/envoy/grpc-server.js';
import { MAX_CONNECTIONS } from '../../src/envoy/grpc-transport.js';
import { H2_LIMITS } from '../../src/envoy/h2.js';
import { isRateMeshError } from '../../src/errors.js';
import { memoryLogger } from '../daemon/fake-limiter.js';

const RL = 'domain: d\ndescriptors:\n  - { key: k, rate_limit: { unit: second, requests_per_unit: 5 } }\n';

/** loadConfig over an in-memory file system rooted at /cfg; folders are keys ending in '/'. */
function load(
  files: Record<string, string>,
  daemonYaml: string,
  more: { argv?: string[]; env?: Record<string, string> } = {},
) {
  const all: Record<string, string> = { '/cfg/daemon.yaml': daemonYaml, ...files };
  return loadConfig({
    argv: ['--config', 'daemon.yaml', ...(more.argv ?? [])],
    ...(more.env === undefined ? {} : { env: more.env }),
    cwd: '/cfg',
    readFile: (p) => {
      const f = all[p];
      if (f === undefined) throw new Error('ENOENT: no such file');
      return Buffer.from(f);
    },
    listDir: (p) => {
      const prefix = `${p}/`;
      const names = Object.keys(all)
        .filter((f) => f.startsWith(prefix))
        .map((f) => f.slice(prefix.length))
        .filter((f) => !f.includes('/'));
      return names.length > 0 ? names : undefined;
    },
  });
}

function errorOf(fn: () => unknown): { field: string | undefined; message: string } {
  try {
    fn();
  } catch (err) {
    if (isRateMeshError(err)) return { field: err.field, message: err.message };
    throw err;
  }
  throw new Error('expected an error');
}

describe('daemon config: envoy and grpc', () => {
  it('loads envoy files (a folder gives its YAML files in name order) and the gRPC server settings', () => {
    const cfg = load(
      {
        '/cfg/rl/b.yaml': RL.replace('domain: d', 'domain: b'),
        '/cfg/rl/a.yml': RL,
        '/cfg/rl/notes.txt': 'not yaml',
        '/cfg/extra.yaml': RL.replace('domain: d', 'domain: x'),
      },
      'envoy: { files: [rl, extra.yaml], algorithm: sliding-window, buckets: 20 }\ngrpc: { port: 8081 }\n',
    );
    expect(cfg.envoy?.files).toEqual(['/cfg/rl/a.yml', '/cfg/rl/b.yaml', '/cfg/extra.yaml']);
    expect([...cfg.envoy!.config.domains.keys()]).toEqual(['d', 'b', 'x']);
    expect(cfg.envoy?.config.policies[0]).toMatchObject({ limit: 5, windowMs: 1000, buckets: 20 });
    expect(cfg.grpc).toEqual({
      host: '127.0.0.1',
      port: 8081,
      maxMessageBytes: 65536,
      responseHeaders: undefined,
      unknownDomain: 'ok',
      countHits: 'every',
      limitOverrides: true,
      dynamicMetadata: false,
      transport: 'ratemesh',
      maxConnections: MAX_CONNECTIONS,
      maxConcurrentStreams: GRPC_DEFAULTS.maxConcurrentStreams,
      requestTimeoutMs: GRPC_DEFAULTS.requestTimeoutMs,
      limits: H2_LIMITS,
    });
    // envoy-only: no policies of its own, the limiter gets the descriptors' policies
    expect(cfg.policies).toEqual([]);
    const opts = limiterOptions(cfg, memoryLogger());
    expect(opts.policies.map((p) => p.name)).toEqual(cfg.envoy!.config.policies.map((p) => p.name));
  });

  it('keeps the daemon own policies beside the descriptors', () => {
    const cfg = load(
      { '/cfg/rl.yaml': RL },
      'policies: [ { name: api, limit: 10, windowMs: 1000 } ]\nenvoy: { files: [rl.yaml] }\ngrpc: { port: 0, responseHeaders: { reset: X-Reset } }\n',
    );
    expect(limiterOptions(cfg, memoryLogger()).policies.map((p) => p.name)).toEqual([
      'api',
      cfg.envoy!.config.policies[0]!.name,
    ]);
    expect(cfg.grpc?.responseHeaders).toEqual({
      limit: 'RateLimit-Limit',
      remaining: 'RateLimit-Remaining',
      reset: 'X-Reset',
    });
  });

  it('a config without envoy and grpc is unchanged', () => {
    const cfg = load({}, 'policies: [ { name: api, limit: 10, windowMs: 1000 } ]\n');
    expect(cfg.envoy).toBeUndefined();
    expect(cfg.grpc).toBeUndefined();
  });

  it.each([
    ['grpc without envoy', 'grpc: { port: 1 }\n', 'config.grpc', /needs descriptors/],
    ['envoy without grpc', 'envoy: { files: [rl.yaml] }\n', 'config.envoy', /add grpc.port/],
    ['no files', 'envoy: {}\ngrpc: { port: 1 }\n', 'config.envoy.files', /required/],
    ['a missing port', 'envoy: { files: [rl.yaml] }\ngrpc: {}\n', 'config.grpc.port', /required/],
    ['a bad port', 'envoy: { files: [rl.yaml] }\ngrpc: { port: 70000 }\n', 'config.grpc.port', /0\.\.65535/],
    [
      'an unknown grpc field',
      'envoy: { files: [rl.yaml] }\ngrpc: { port: 1, tls: true }\n',
      'config.grpc.tls',
      /unknown field/,
    ],
    [
      'a bad algorithm',
      'envoy: { files: [rl.yaml], algorithm: leaky-bucket }\ngrpc: { port: 1 }\n',
      'config.envoy.algorithm',
      /one of/,
    ],
    [
      'a missing file',
      'envoy: { files: [nope.yaml] }\ngrpc: { port: 1 }\n',
      'config.envoy.files[0]',
      /cannot read \/cfg\/nope.yaml/,
    ],
    [
      'a bad header name',
      'envoy: { files: [rl.yaml] }\ngrpc: { port: 1, responseHeaders: { limit: "a b" } }\n',
      'config.grpc.responseHeaders.limit',
      /header name/,
    ],
    [
      'a bad unknownDomain',
      'envoy: { files: [rl.yaml] }\ngrpc: { port: 1, unknownDomain: allow }\n',
      'config.grpc.unknownDomain',
      /error, ok/,
    ],
    [
      'a bad countHits',
      'envoy: { files: [rl.yaml] }\ngrpc: { port: 1, countHits: sometimes }\n',
      'config.grpc.countHits',
      /every, stop-when-over, when-allowed/,
    ],
  ])('refuses %s', (_name, yaml, field, message) => {
    const e = errorOf(() => load({ '/cfg/rl.yaml': RL }, yaml));
    expect(e.field).toBe(field);
    expect(e.message).toMatch(message);
  });

  it('an error inside an envoy file names that file, the YAML path and the reason', () => {
    const e = errorOf(() =>
      load(
        { '/cfg/rl.yaml': RL.replace('unit: second', 'unit: weekly') },
        'envoy: { files: [rl.yaml] }\ngrpc: { port: 1 }\n',
      ),
    );
    expect(e.field).toBe('descriptors[0].rate_limit.unit');
    expect(e.message).toBe(
      "/cfg/rl.yaml: descriptors[0].rate_limit.unit (line 3): invalid rate limit unit 'weekly' (expected one of second, minute, hour, day, week, month, year)",
    );
  });

  it('refuses envoy files that count nothing when there is no other policy', () => {
    const e = errorOf(() =>
      load(
        { '/cfg/rl.yaml': 'domain: d\ndescriptors:\n  - { key: k, rate_limit: { unlimited: true } }\n' },
        'envoy: { files: [rl.yaml] }\ngrpc: { port: 1 }\n',
      ),
    );
    expect(e.field).toBe('config.envoy.files');
    expect(e.message).toMatch(/counts anything/);
  });
});

describe('daemon config: the gRPC transport and its limits', () => {
  const HARDENED = `envoy: { files: [rl.yaml] }
grpc:
  port: 8081
  transport: node:http2
  maxConnections: 64
  maxConcurrentStreams: 32
  requestTimeoutMs: 2000
  maxContinuations: 2
  maxSettingsEntries: 16
  nuisancePerTick: 200
  headerFramesPerTick: 1000
  prefaceTimeoutMs: 1500
  frameTimeoutMs: 1200
  idleTimeoutMs: 60000
  stallTimeoutMs: 5000
  maxUnreadBytes: 131072
`;

  it('every value given reaches the RLS server options', () => {
    const cfg = load({ '/cfg/rl.yaml': RL }, HARDENED);
    expect(rlsServerOptions(cfg.grpc!)).toEqual({
      host: '127.0.0.1',
      port: 8081,
      maxMessageBytes: 65536,
      transport: 'node:http2',
      maxConnections: 64,
      maxConcurrentStreams: 32,
      requestTimeoutMs: 2000,
      limits: {
        maxContinuations: 2,
        maxSettingsEntries: 16,
        nuisancePerTick: 200,
        headerFramesPerTick: 1000,
        prefaceTimeoutMs: 1500,
        frameTimeoutMs: 1200,
        idleTimeoutMs: 60000,
        stallTimeoutMs: 5000,
        maxUnreadBytes: 131072,
      },
    });
    // on node:http2, the limits nghttp2 keeps its own of are named (the daemon warns with them)
    expect(ignoredOnNodeHttp2(cfg.grpc!)).toEqual([
      'grpc.maxContinuations',
      'grpc.nuisancePerTick',
      'grpc.headerFramesPerTick',
      'grpc.frameTimeoutMs',
      'grpc.maxUnreadBytes',
    ]);
  });

  it('left out, each is its transport default; a partial set keeps the rest', () => {
    const cfg = load(
      { '/cfg/rl.yaml': RL },
      'envoy: { files: [rl.yaml] }\ngrpc: { port: 1, idleTimeoutMs: 1000 }\n',
    );
    const opts = rlsServerOptions(cfg.grpc!);
    expect(opts.transport).toBe('ratemesh');
    expect(opts.maxConnections).toBe(MAX_CONNECTIONS);
    expect(opts.limits).toEqual({ ...H2_LIMITS, idleTimeoutMs: 1000 });
    expect(ignoredOnNodeHttp2(cfg.grpc!)).toEqual([]);
  });

  it('--grpc-transport wins over RATEMESH_GRPC_TRANSPORT, which wins over grpc.transport', () => {
    const files = { '/cfg/rl.yaml': RL };
    const yaml = 'envoy: { files: [rl.yaml] }\ngrpc: { port: 1, transport: ratemesh }\n';
    expect(load(files, yaml).grpc?.transport).toBe('ratemesh');
    const env = { RATEMESH_GRPC_TRANSPORT: 'node:http2' };
    expect(load(files, yaml, { env }).grpc?.transport).toBe('node:http2');
    expect(load(files, yaml, { env, argv: ['--grpc-transport', 'ratemesh'] }).grpc?.transport).toBe(
      'ratemesh',
    );
  });

  it.each([
    ['RATEMESH_GRPC_TRANSPORT', { env: { RATEMESH_GRPC_TRANSPORT: 'nghttp2' } }],
    ['--grpc-transport', { argv: ['--grpc-transport', 'h2'] }],
  ])('refuses a bad transport from %s, naming it and the choices', (field, more) => {
    const e = errorOf(() =>
      load({ '/cfg/rl.yaml': RL }, 'envoy: { files: [rl.yaml] }\ngrpc: { port: 1 }\n', more),
    );
    expect(e.field).toBe(field);
    expect(e.message).toMatch(/ratemesh, node:http2/);
  });

  it('--grpc-transport without a grpc section is an error; the environment variable is then unused', () => {
    const yaml = 'policies: [ { name: api, limit: 10, windowMs: 1000 } ]\n';
    const e = errorOf(() => load({}, yaml, { argv: ['--grpc-transport', 'node:http2'] }));
    expect(e.field).toBe('--grpc-transport');
    expect(e.message).toMatch(/grpc section/);
    expect(load({}, yaml, { env: { RATEMESH_GRPC_TRANSPORT: 'node:http2' } }).grpc).toBeUndefined();
  });

  const bad: [string, string, RegExp][] = [
    ['transport: h2', 'config.grpc.transport', /one of ratemesh, node:http2 \(got "h2"\)/],
    ['maxConnections: 0', 'config.grpc.maxConnections', /integer 1\.\.1000000 \(got 0\)/],
    ['maxConnections: 2.5', 'config.grpc.maxConnections', /integer 1\.\.1000000/],
    ['maxConnections: "10"', 'config.grpc.maxConnections', /integer 1\.\.1000000 \(got "10"\)/],
    ['maxConcurrentStreams: 70000', 'config.grpc.maxConcurrentStreams', /integer 1\.\.65535/],
    ['requestTimeoutMs: 10', 'config.grpc.requestTimeoutMs', /integer 250\.\.600000/],
    ['idle: 1000', 'config.grpc.idle', /unknown field \(expected one of: .*idleTimeoutMs/],
    ...Object.entries(GRPC_LIMIT_RANGES).flatMap(([k, [min, max]]): [string, string, RegExp][] => [
      [`${k}: ${min - 1}`, `config.grpc.${k}`, new RegExp(`integer ${min}\\.\\.${max} \\(got ${min - 1}\\)`)],
      [`${k}: ${max + 1}`, `config.grpc.${k}`, new RegExp(`integer ${min}\\.\\.${max} \\(got ${max + 1}\\)`)],
      [`${k}: null`, `config.grpc.${k}`, /must be an integer/],
    ]),
  ];
  it.each(bad)('refuses grpc { %s }', (entry, field, message) => {
    const e = errorOf(() =>
      load({ '/cfg/rl.yaml': RL }, `envoy: { files: [rl.yaml] }\ngrpc: { port: 1, ${entry} }\n`),
    );
    expect(e.field).toBe(field);
    expect(e.message).toMatch(message);
  });

  it('a reload that changes the transport or a limit is refused, naming the field', () => {
    const files = { '/cfg/rl.yaml': RL };
    const base = 'envoy: { files: [rl.yaml] }\ngrpc: { port: 1 }\n';
    const old = load(files, base);
    expect(restartOnlyChange(old, load(files, base))).toBeUndefined();
    expect(restartOnlyChange(old, load(files, base.replace('port: 1', 'port: 1, idleTimeoutMs: 9000')))).toBe(
      'config.grpc.idleTimeoutMs',
    );
    expect(
      restartOnlyChange(old, load(files, base.replace('port: 1', 'port: 1, transport: node:http2'))),
    ).toBe('config.grpc.transport');
    expect(restartOnlyChange(old, load(files, base.replace('port: 1', 'port: 1, maxConnections: 9')))).toBe(
      'config.grpc.maxConnections',
    );
  });
});

describe('examples/envoy', () => {
  it('the example daemon config and its envoyproxy/ratelimit file load', () => {
    const cfg = loadConfig({ argv: ['--config', 'examples/envoy/daemon.yaml'] });
    expect(cfg.envoy?.files.map((f) => f.split('/').slice(-2).join('/'))).toEqual(['ratelimit/config.yaml']);
    expect(
      cfg.envoy?.config.rateLimits.map((r) => [r.fullKey, r.requestsPerUnit, r.windowMs, r.shadow]),
    ).toEqual([
      ['edge.remote_address', 100, 60_000, false],
      ['edge.remote_address_198.51.100.66', 0, 1000, false],
      ['edge.path_/api/*.user', 20, 10_000, false],
      ['edge.path_/healthz', 0, 0, false],
      ['edge.tenant', 5000, 3_600_000, true],
    ]);
    expect(cfg.envoy?.config.policies).toHaveLength(3);
    expect(cfg.grpc).toMatchObject({ port: 8081, unknownDomain: 'error', countHits: 'every' });
  });
});
