import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/daemon/config.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { RLS_SERVICE, rlsServiceDefinition } from '../../src/envoy/grpc-server.js';
import { memoryLogger } from '../daemon/fake-limiter.js';
import { EngineLimiter } from './helpers.js';

const RATELIMIT_YAML = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 2 }
  - key: path
    value: /free
    rate_limit: { unlimited: true }
`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ratemesh-rls-'));
  mkdirSync(join(dir, 'rl'));
  writeFileSync(join(dir, 'rl', 'edge.yaml'), RATELIMIT_YAML);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function daemonYaml(extra = ''): string {
  const file = join(dir, 'daemon.yaml');
  writeFileSync(
    file,
    `http: { host: 127.0.0.1, port: 0, drainTimeoutMs: 1000 }
mesh: { listen: [/ip4/127.0.0.1/tcp/0] }
log: { level: silent }
envoy:
  files: [rl]
grpc:
  port: 0
  maxMessageBytes: 4096
  responseHeaders: true
${extra}`,
  );
  return file;
}

// biome-ignore lint/suspicious/noExplicitAny: the generated client is untyped
type Client = any;

let daemon: Daemon | undefined;
let clients: grpc.Client[] = [];

afterEach(async () => {
  for (const c of clients) c.close();
  clients = [];
  await daemon?.stop();
  daemon = undefined;
});

async function start(
  opts: { real?: boolean } = {},
): Promise<{ rls: Client; health: Client; limiter?: EngineLimiter }> {
  const config = loadConfig({ argv: ['--config', daemonYaml()] });
  let limiter: EngineLimiter | undefined;
  daemon = await startDaemon({
    config,
    logger: memoryLogger(),
    ...(opts.real
      ? {}
      : {
          createLimiter: (o) => {
            limiter = new EngineLimiter(o.policies);
            return limiter;
          },
        }),
  });
  const target = `127.0.0.1:${daemon.grpc!.port}`;
  const Rls = grpc.makeGenericClientConstructor(rlsServiceDefinition(), 'RateLimitService');
  const Health = grpc.makeGenericClientConstructor(
    healthService as unknown as grpc.ServiceDefinition,
    'Health',
  );
  const rls = new Rls(target, grpc.credentials.createInsecure());
  const health = new Health(target, grpc.credentials.createInsecure());
  clients.push(rls, health);
  return { rls, health, limiter };
}

function unary(
  client: Client,
  method: string,
  request: unknown,
): Promise<{ err: grpc.ServiceError | null; res: Client }> {
  return new Promise((resolve) => {
    client[method](request, (err: grpc.ServiceError | null, res: unknown) => resolve({ err, res }));
  });
}

const ip = (addr: string, hits?: number) => ({
  entries: [{ key: 'remote_address', value: addr }],
  ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
});

describe('Envoy RLS v3 over gRPC, a real client against a real daemon', () => {
  it('ShouldRateLimit: OK, then OVER_LIMIT, with statuses and RateLimit headers', async () => {
    const { rls } = await start();
    const first = await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [ip('203.0.113.7')] });
    expect(first.err).toBeNull();
    expect(first.res.overall_code).toBe('OK');
    expect(first.res.statuses).toHaveLength(1);
    expect(first.res.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 2, unit: 'MINUTE', name: '' },
      limit_remaining: 1,
    });
    expect(Number(first.res.statuses[0].duration_until_reset.seconds)).toBeGreaterThan(0);
    const headers = Object.fromEntries(
      first.res.response_headers_to_add.map((h: { key: string; value: string }) => [h.key, h.value]),
    );
    expect(headers).toMatchObject({ 'RateLimit-Limit': '2', 'RateLimit-Remaining': '1' });

    await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [ip('203.0.113.7')] });
    const over = await unary(rls, 'ShouldRateLimit', {
      domain: 'edge',
      descriptors: [ip('203.0.113.7'), { entries: [{ key: 'path', value: '/free' }] }],
    });
    expect(over.err).toBeNull();
    expect(over.res.overall_code).toBe('OVER_LIMIT');
    expect(over.res.statuses.map((s: { code: string }) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    expect(over.res.statuses[1].limit_remaining).toBe(4294967295);
    // another address has its own count; hits_addend 0 looks without spending
    const other = await unary(rls, 'ShouldRateLimit', {
      domain: 'edge',
      descriptors: [ip('198.51.100.1', 0)],
    });
    expect(other.res.statuses[0].limit_remaining).toBe(2);
    // the refusal counted by why
    const metrics = await (await fetch(`${daemon!.http.url}/metrics`)).text();
    expect(metrics).toMatch(/^ratemesh_denials_total\{policy="[^"]+",rule="global-limit"\} 1$/m);
  });

  it('refuses bad requests with a clear status and keeps serving', async () => {
    const { rls } = await start();
    const cases: [unknown, grpc.status, RegExp][] = [
      [{ descriptors: [ip('1.2.3.4')] }, grpc.status.INVALID_ARGUMENT, /domain must not be empty/],
      [
        { domain: 'edge', descriptors: [] },
        grpc.status.INVALID_ARGUMENT,
        /descriptor list must not be empty/,
      ],
      [
        {
          domain: 'edge',
          descriptors: [{ ...ip('1.2.3.4'), limit: { requests_per_unit: 1, unit: 'UNKNOWN' } }],
        },
        grpc.status.INVALID_ARGUMENT,
        /descriptors\[0\]\.limit\.unit/,
      ],
      [
        { domain: 'edge', descriptors: [ip('1.2.3.4')], hits_addend: 4294967295 },
        grpc.status.INVALID_ARGUMENT,
        /hits_addend/,
      ],
      [
        { domain: 'edge', descriptors: [ip('1.2.3.4')], hits_addend: -1 },
        grpc.status.INVALID_ARGUMENT,
        /hits_addend/,
      ],
      [
        { domain: 'edge', descriptors: [ip('1.2.3.4', 2 ** 62)] },
        grpc.status.INVALID_ARGUMENT,
        /descriptors\[0\]\.hits_addend/,
      ],
      [{ domain: 'edge', descriptors: [{ entries: [] }] }, grpc.status.INVALID_ARGUMENT, /entries/],
      [
        { domain: 'edge', descriptors: [{ entries: [{ key: 'k', value: 'x'.repeat(8000) }] }] },
        grpc.status.RESOURCE_EXHAUSTED,
        /./,
      ],
    ];
    for (const [request, code, details] of cases) {
      const r = await unary(rls, 'ShouldRateLimit', request);
      expect(r.err?.code, JSON.stringify(request).slice(0, 80)).toBe(code);
      expect(r.err?.details).toMatch(details);
    }
    // bytes that are not a RateLimitRequest at all
    const garbage = await new Promise<grpc.ServiceError | null>((resolve) => {
      (rls as grpc.Client).makeUnaryRequest(
        `/${RLS_SERVICE}/ShouldRateLimit`,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]),
        (err) => resolve(err),
      );
    });
    expect(garbage?.code).toBe(grpc.status.INTERNAL);
    const after = await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [ip('1.2.3.4')] });
    expect(after.err).toBeNull();
    expect(after.res.overall_code).toBe('OK');
    const metrics = await (await fetch(`${daemon!.http.url}/metrics`)).text();
    expect(metrics).toContain('ratemesh_grpc_requests_total{method="ShouldRateLimit",code="OK"} 1');
    expect(metrics).toContain(
      'ratemesh_grpc_requests_total{method="ShouldRateLimit",code="INVALID_ARGUMENT"} 7',
    );
  });

  it('serves grpc.health.v1 for the server and the RLS service', async () => {
    const { health } = await start();
    expect((await unary(health, 'check', { service: '' })).res).toEqual({ status: 'SERVING' });
    expect((await unary(health, 'check', { service: RLS_SERVICE })).res).toEqual({ status: 'SERVING' });
    expect((await unary(health, 'check', { service: 'other' })).err?.code).toBe(grpc.status.NOT_FOUND);
  });

  it('stops cleanly: the port is closed afterwards', async () => {
    const { rls } = await start();
    const port = daemon!.grpc!.port;
    await daemon!.stop();
    daemon = undefined;
    const probe = new (grpc.makeGenericClientConstructor(rlsServiceDefinition(), 'RateLimitService'))(
      `127.0.0.1:${port}`,
      grpc.credentials.createInsecure(),
    ) as Client;
    clients.push(probe);
    const r = await new Promise<grpc.ServiceError | null>((resolve) =>
      probe.ShouldRateLimit(
        { domain: 'edge', descriptors: [ip('1.2.3.4')] },
        { deadline: Date.now() + 2000 },
        (err: grpc.ServiceError | null) => resolve(err),
      ),
    );
    expect([grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED]).toContain(r?.code);
    void rls;
  });

  it('works on the real mesh limiter', async () => {
    const { rls } = await start({ real: true });
    const r = await unary(rls, 'ShouldRateLimit', {
      domain: 'edge',
      descriptors: [ip('192.0.2.1')],
      hits_addend: 2,
    });
    expect(r.err).toBeNull();
    expect(r.res.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
    const over = await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [ip('192.0.2.1')] });
    expect(over.res.overall_code).toBe('OVER_LIMIT');
  });

  it('reloads its descriptor files: new limits at once on the same client connection, unchanged descriptors keep their counts', async () => {
    const rlDir = join(dir, 'reload-rl');
    mkdirSync(rlDir, { recursive: true });
    const edge = join(rlDir, 'edge.yaml');
    const descriptors = (perMinute: number) => `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: ${perMinute} }
`;
    writeFileSync(edge, descriptors(1));
    const cfgFile = join(dir, 'reload-daemon.yaml');
    writeFileSync(
      cfgFile,
      `http: { host: 127.0.0.1, port: 0, drainTimeoutMs: 1000 }
log: { level: silent }
envoy: { files: [reload-rl] }
grpc: { port: 0 }
`,
    );
    const load = () => loadConfig({ argv: ['--config', cfgFile] });
    daemon = await startDaemon({
      config: load(),
      load,
      watch: false,
      logger: memoryLogger(),
      createLimiter: (o) => new EngineLimiter(o.policies),
    });
    const Rls = grpc.makeGenericClientConstructor(rlsServiceDefinition(), 'RateLimitService');
    const rls = new Rls(`127.0.0.1:${daemon.grpc!.port}`, grpc.credentials.createInsecure());
    clients.push(rls);
    const user = { entries: [{ key: 'user', value: 'u1' }] };
    expect(
      (await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [ip('192.0.2.9')] })).res
        .overall_code,
    ).toBe('OK');
    expect(
      (await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [user] })).res.overall_code,
    ).toBe('OK');
    expect(
      (await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [user] })).res.overall_code,
    ).toBe('OVER_LIMIT');

    writeFileSync(edge, descriptors(5));
    const r = daemon.reload('test');
    expect(r.ok).toBe(true);
    expect(r.policies?.changed).toHaveLength(1);
    expect(r.policies?.kept).toHaveLength(1);
    const again = await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [user] });
    expect(again.err).toBeNull();
    expect(again.res.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 5 } });
    // the unchanged descriptor kept its count: 1 of 3 spent before the reload
    const addr = await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [ip('192.0.2.9')] });
    expect(addr.res.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 1 });
    // GET /v1/limits shows the domain and its descriptors as now in force
    const limits = (await (await fetch(`${daemon.http.url}/v1/limits`)).json()) as {
      envoy: { domains: { domain: string; descriptors: { key: string; requestsPerUnit: number }[] }[] };
    };
    expect(limits.envoy.domains.map((d) => d.domain)).toEqual(['edge']);
    expect(limits.envoy.domains[0]!.descriptors.find((d) => d.key === 'edge.user')?.requestsPerUnit).toBe(5);

    // an invalid descriptor file is refused naming the file and the YAML path; the old one keeps serving
    writeFileSync(
      edge,
      descriptors(5).replace('unit: minute, requests_per_unit: 5', 'unit: fortnight, requests_per_unit: 5'),
    );
    const bad = daemon.reload('test');
    expect(bad.ok).toBe(false);
    expect(bad.error?.file).toBe(edge);
    expect(bad.error?.field).toMatch(/descriptors\[1\]\.rate_limit\.unit/);
    const still = await unary(rls, 'ShouldRateLimit', { domain: 'edge', descriptors: [user] });
    expect(still.res.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 5 } });
  });
});
