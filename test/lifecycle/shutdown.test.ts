/**
 * The embedded lifecycle (issue 28): `shutdown()` in its order (readiness off, serve for
 * delayMs, stop accepting, in-flight requests finish, farewell), `health()` for probes (the
 * daemon's `/readyz` join rule),
 * and the HTTP adapters after the node stopped: 503, never a silent fail-open.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { rateMeshExpress } from '../../src/http/express.js';
import { rateMeshGuard } from '../../src/http/index.js';
import {
  createMeshLimiter,
  type EmbeddedMeshLimiter,
  type MeshLimiterOptions,
} from '../../src/mesh/index.js';
import { shutdownOptions } from '../../src/mesh/shutdown.js';
import type { PolicySpec } from '../../src/types.js';

const POLICIES: PolicySpec[] = [{ name: 'per-ip', limit: 3, windowMs: 60_000 }];
const lines: { level: string; msg: string | undefined }[] = [];
const logger = {
  debug() {},
  info(_o: object, msg?: string) {
    lines.push({ level: 'info', msg });
  },
  warn(_o: object, msg?: string) {
    lines.push({ level: 'warn', msg });
  },
  error(_o: object, msg?: string) {
    lines.push({ level: 'error', msg });
  },
};
const httpLog = {
  warns: [] as string[],
  warn(_o: object, msg?: string) {
    this.warns.push(msg ?? '');
  },
};

const nodes: EmbeddedMeshLimiter[] = [];
const servers: http.Server[] = [];
afterEach(async () => {
  lines.length = 0;
  httpLog.warns.length = 0;
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});

function mesh(
  bootstrap: string[] = [],
  policies: PolicySpec[] = POLICIES,
  extra: Partial<MeshLimiterOptions> = {},
): EmbeddedMeshLimiter {
  const node = createMeshLimiter({
    policies,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    bootstrap,
    gossipIntervalMs: 25,
    heartbeatMs: 200,
    discoveryIntervalMs: 200,
    logger,
    ...extra,
  });
  nodes.push(node);
  return node;
}

/** A loopback TCP port free now (taken and released). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function listen(server: http.Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function until(cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('after mesh.stop(), the middleware', () => {
  it('answers 503 (failureMode open does not let everything through) and warns once', async () => {
    const node = mesh();
    await node.start();
    const app = express();
    app.use(rateMeshExpress({ limiter: node, policies: ['per-ip'], logger: httpLog }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const url = await listen(http.createServer(app));
    const before: number[] = [];
    for (let i = 0; i < 5; i++) before.push((await fetch(url)).status);
    expect(before).toEqual([200, 200, 200, 429, 429]);
    await node.stop();
    expect(node.lifecycle).toBe('stopped');
    const after: number[] = [];
    for (let i = 0; i < 5; i++) after.push((await fetch(url)).status);
    expect(after).toEqual([503, 503, 503, 503, 503]);
    const res = await fetch(url);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.text()).toContain('rate_limiter_stopped');
    expect(httpLog.warns.filter((w) => w.includes('after the mesh node stopped'))).toHaveLength(1);
  });

  it('still follows failureMode before start (not started is not stopped)', async () => {
    const node = mesh();
    const guard = rateMeshGuard({ limiter: node, policies: ['per-ip'], logger: httpLog });
    const url = await listen(
      http.createServer(async (req, res) => {
        if (await guard(req, res)) res.end('ok');
      }),
    );
    expect(node.lifecycle).toBe('idle');
    expect((await fetch(url)).status).toBe(200);
    expect(guard.stats().failures['not-ready']).toBe(1);
  });
});

describe("health() for probes: the daemon's /readyz rule (src/mesh/join.ts)", () => {
  it('a lone node (no bootstrap) is ready once started', async () => {
    const alone = mesh();
    expect(alone.health()).toMatchObject({ live: true, ready: false, joined: false, state: 'idle' });
    await alone.start();
    expect(alone.health()).toMatchObject({
      live: true,
      ready: true,
      joined: true,
      state: 'running',
      draining: false,
    });
  });

  it('the first pod (its bootstrap names only itself): ready after the first discovery round, in fallback', async () => {
    const port = await freePort();
    const first = mesh([`/ip4/127.0.0.1/tcp/${port}`], POLICIES, { listen: [`/ip4/127.0.0.1/tcp/${port}`] });
    await first.start();
    await until(() => first.stats().discovery.rounds > 0);
    expect(first.health()).toMatchObject({ ready: true, joined: true, peers: { live: 0, stale: 0 } });
  });

  it('a pod joining a member: not ready until that member answers a sync, then ready for good', async () => {
    // a's address is fixed before it starts, so b can be pointed at it while nobody listens there
    const port = await freePort();
    const a = mesh([], POLICIES, { listen: [`/ip4/127.0.0.1/tcp/${port}`] });
    const b = mesh([`/ip4/127.0.0.1/tcp/${port}/p2p/${a.peerId}`], POLICIES, { joinTimeoutMs: 600_000 });
    await b.start();
    await until(() => b.stats().discovery.rounds >= 2);
    // running and deciding (the start-up share), yet not ready: a member was named, none answered
    expect(b.ready).toBe(true);
    const joining = b.health();
    expect(joining).toMatchObject({ live: true, ready: false, joined: false, state: 'running' });
    expect(joining.reason).toMatch(/^joining/);
    await a.start();
    await until(() => b.stats().sync.pullsOk > 0);
    expect(b.health()).toMatchObject({ ready: true, joined: true });
    // and stays ready when that member goes (the L/N fallback decides, as in a partition)
    await a.stop();
    await until(() => b.peers().every((p) => p.stale));
    expect(b.health()).toMatchObject({ ready: true, joined: true });
  });

  it('a pod whose members never answer: ready in the L/N fallback once joinTimeoutMs passed', async () => {
    const port = await freePort();
    const dead = `/ip4/127.0.0.1/tcp/${port}/p2p/12D3KooWGC6TvWhfapngX6wvJHMYvKpDMXPb3ZnCZ6dMoaMtimQ5`;
    const node = mesh([dead], POLICIES, { joinTimeoutMs: 1_500 });
    const t0 = Date.now();
    await node.start();
    expect(node.health().ready).toBe(false);
    await until(() => node.health().ready);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_400);
    expect(node.health()).toMatchObject({ joined: true, peers: { live: 0 } });
  });

  it('joinTimeoutMs is validated', () => {
    expect(() => mesh([], POLICIES, { joinTimeoutMs: -1 })).toThrow(/joinTimeoutMs/);
  });
});

describe('shutdown()', () => {
  it('turns readiness off first, serves during delayMs, lets the in-flight request finish, then stops', async () => {
    // a limit far above the requests here: the drain is under test, not the shares
    const roomy: PolicySpec[] = [{ name: 'per-ip', limit: 1000, windowMs: 60_000 }];
    const a = mesh([], roomy);
    await a.start();
    const b = mesh([a.multiaddrs().find((m) => m.includes('/ip4/127.0.0.1/'))!], roomy);
    await b.start();
    await until(() => a.peers().some((p) => !p.stale) && b.peers().some((p) => !p.stale));

    let release: (() => void) | undefined;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const guard = rateMeshGuard({ limiter: b, policies: ['per-ip'], logger: httpLog });
    const server = http.createServer(async (req, res) => {
      if (!(await guard(req, res))) return;
      if (req.url === '/slow') await held;
      res.end('ok');
    });
    const url = await listen(server);

    const slow = fetch(`${url}/slow`).then(
      (r) => r.status,
      () => -1,
    );
    await until(() => guard.stats().allowed === 1);
    const order: string[] = [];
    const done = b
      .shutdown({ servers: [server], delayMs: 300, graceMs: 20_000 })
      .then(() => order.push('stopped'));
    // readiness is off at once; the node still decides and the server still accepts
    expect(b.health()).toMatchObject({
      ready: false,
      draining: true,
      live: true,
      reason: 'draining: shutting down',
    });
    expect((await fetch(`${url}/`, { headers: { connection: 'close' } })).status).toBe(200);
    await until(() => !server.listening);
    expect(b.lifecycle).toBe('running'); // the in-flight request is not finished yet
    await expect(fetch(`${url}/`)).rejects.toThrow(); // no new connections
    order.push('released');
    release?.();
    expect(await slow).toBe(200);
    await done;
    expect(order).toEqual(['released', 'stopped']);
    expect(b.lifecycle).toBe('stopped');
    expect(b.health().live).toBe(false);
    // the farewell reached the peer: it counts b as departed at once
    await until(() => a.stats().peers.departed === 1);
    expect(b.shutdown()).toBe(b.shutdown());
  });

  it('closes connections still open after graceMs', async () => {
    const node = mesh();
    await node.start();
    const server = http.createServer(() => {
      // never answers
    });
    const url = await listen(server);
    const hung = fetch(url).then(
      () => 'answered',
      () => 'closed',
    );
    await new Promise((r) => setTimeout(r, 50));
    await node.shutdown({ servers: [server], graceMs: 100 });
    expect(await hung).toBe('closed');
    expect(lines.some((l) => l.level === 'warn' && l.msg?.includes('grace over'))).toBe(true);
    expect(node.lifecycle).toBe('stopped');
  });

  it('validates its options', () => {
    expect(() => shutdownOptions({ graceMs: -1 })).toThrow(/graceMs/);
    expect(() => shutdownOptions({ delayMs: Number.NaN })).toThrow(/delayMs/);
    expect(() => shutdownOptions({ servers: [{} as never] })).toThrow(/servers/);
    expect(shutdownOptions(undefined)).toEqual({ servers: [], delayMs: 0, graceMs: 10_000 });
  });
});
