/** The same guard over a mesh limiter (real libp2p nodes on loopback): not started, running, two nodes. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { rateMeshGuard } from '../../src/http/index.js';
import { createMeshLimiter, type MeshLimiter } from '../../src/mesh/index.js';
import type { PolicySpec } from '../../src/types.js';
import { memoryLogger } from './harness.js';

const POLICIES: PolicySpec[] = [{ name: 'per-ip', limit: 5, windowMs: 60_000 }];
const silent = { debug() {}, info() {}, warn() {}, error() {} };

const nodes: MeshLimiter[] = [];
const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});

function mesh(bootstrap: string[] = []): MeshLimiter {
  const node = createMeshLimiter({
    policies: POLICIES,
    listen: ['/ip4/127.0.0.1/tcp/0'],
    bootstrap,
    gossipIntervalMs: 25,
    heartbeatMs: 200,
    discoveryIntervalMs: 200,
    logger: silent,
  });
  nodes.push(node);
  return node;
}

async function serve(limiter: MeshLimiter): Promise<string> {
  const guard = rateMeshGuard({
    limiter,
    routes: [{ path: '/login', policies: ['per-ip'], failureMode: 'closed' }],
    policies: ['per-ip'],
    logger: memoryLogger(),
  });
  const server = http.createServer(async (req, res) => {
    if (await guard(req, res)) res.end('ok');
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function until(cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('over a mesh limiter', () => {
  it('follows the failure policy until started, then limits, then fails again once stopped', async () => {
    const node = mesh();
    const url = await serve(node);
    expect((await fetch(`${url}/`)).status).toBe(200); // not started: fail open
    expect((await fetch(`${url}/login`)).status).toBe(503); // not started: fail closed
    await node.start();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await fetch(`${url}/`)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    await node.stop();
    expect((await fetch(`${url}/login`)).status).toBe(503);
  });

  it('a denial on one node follows spending on another, once gossip has carried it', async () => {
    const a = mesh();
    await a.start();
    const addr = a.multiaddrs().find((m) => m.includes('/ip4/127.0.0.1/'))!;
    const b = mesh([addr]);
    await b.start();
    // live, each heard the other say it hears two members (no peer still starting), b past its start gate
    const live = (n: MeshLimiter) => n.peers().filter((p) => !p.stale && p.members === 2).length;
    await until(() => live(a) === 1 && live(b) === 1 && !b.stats().engine.starting);
    const urlA = await serve(a);
    const urlB = await serve(b);
    let admittedA = 0;
    for (let i = 0; i < 5; i++) if ((await fetch(urlA)).status === 200) admittedA++;
    // Headroom is shared: A may not have spent all 5 alone; B admits at most the rest.
    // Wait until B holds a message from A built after A's spending.
    const spentAt = performance.timeOrigin + performance.now();
    await until(() => {
      const p = b.peers().find((x) => x.id === a.peerId);
      return p !== undefined && p.ageMs < performance.timeOrigin + performance.now() - spentAt - 2;
    });
    // B admits at most the rest, then refuses (by its share or the limit)
    let admittedB = 0;
    let res = await fetch(urlB);
    for (let i = 0; i < 6 && res.status === 200; i++) {
      admittedB++;
      res = await fetch(urlB);
    }
    expect(admittedA).toBeGreaterThan(0);
    expect(admittedA + admittedB).toBeLessThanOrEqual(5);
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});
