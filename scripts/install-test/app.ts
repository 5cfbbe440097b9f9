/**
 * The install test's consumer app (scripts/install-test.sh copies it into a fresh project
 * that installed the packed tarball): two Express instances, each embedding a mesh node,
 * on loopback, as the README shows. Checks that the limit holds across them, that
 * shutdown() drains and says farewell, and that a stopped node answers 503.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createMeshLimiter, type EmbeddedMeshLimiter } from 'ratemesh';
import { rateMeshExpress } from 'ratemesh/express';

const L = 10;
const psk = readFileSync('swarm.key');
const quiet = { debug() {}, info() {}, warn: console.warn, error: console.error };
const deadline = setTimeout(() => {
  console.error('FAIL: the install test ran past 60 s');
  process.exit(1);
}, 60_000);

async function instance(
  bootstrap: string[],
): Promise<{ mesh: EmbeddedMeshLimiter; server: Server; url: string }> {
  const mesh = createMeshLimiter({
    policies: [{ name: 'api', limit: L, windowMs: 60_000 }],
    listen: ['/ip4/127.0.0.1/tcp/0'],
    bootstrap,
    psk,
    gossipIntervalMs: 25,
    logger: quiet,
  });
  await mesh.start();
  const app = express();
  app.use(rateMeshExpress({ limiter: mesh, policies: ['api'] }));
  app.get('/', (_req, res) => {
    res.send('hello\n');
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { mesh, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` };
}

function check(ok: boolean, what: string): void {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) process.exitCode = 1;
}

const a = await instance([]);
const b = await instance([a.mesh.multiaddrs()[0]!]);
const t0 = Date.now();
while (!(a.mesh.peers().some((p) => !p.stale) && b.mesh.peers().some((p) => !p.stale))) {
  if (Date.now() - t0 > 20_000) throw new Error('the two nodes did not see each other within 20 s');
  await new Promise((r) => setTimeout(r, 25));
}
console.log(`mesh formed in ${Date.now() - t0} ms`);

// 2L requests from one client, alternating between the instances, a few gossip ticks apart
const statuses: string[] = [];
let allowed = 0;
let withHeaders = 0;
let withoutRetryAfter = 0;
for (let i = 0; i < 2 * L; i++) {
  const inst = i % 2 === 0 ? a : b;
  const res = await fetch(inst.url);
  await res.arrayBuffer();
  statuses.push(`${i % 2 === 0 ? 'A' : 'B'}${res.status}`);
  if (res.status === 200) allowed++;
  if (res.status === 429) {
    const retry = res.headers.get('retry-after');
    // Retry-After is sent when a wait helps (a whole number of seconds, at least 1)
    if (retry === null) withoutRetryAfter++;
    if (res.headers.has('ratelimit') && (retry === null || Number(retry) >= 1)) withHeaders++;
  }
  await new Promise((r) => setTimeout(r, 100));
}
console.log(`statuses: ${statuses.join(' ')}`);
check(allowed <= L, `the limit holds across both instances: ${allowed} allowed of ${2 * L}, L = ${L}`);
check(allowed >= L / 2, `no instance denies what it may admit: ${allowed} allowed >= L/2`);
check(
  withHeaders === 2 * L - allowed,
  `every 429 carries RateLimit, and Retry-After >= 1 where sent (${withHeaders}; ${withoutRetryAfter} without Retry-After)`,
);

// b: one call drains and says farewell; a counts it departed at once
await b.mesh.shutdown({ servers: [b.server], graceMs: 2_000 });
check(!b.server.listening && b.mesh.lifecycle === 'stopped', 'b.shutdown(): server closed, node stopped');
const t1 = Date.now();
while (a.mesh.stats().peers.departed < 1 && Date.now() - t1 < 5_000)
  await new Promise((r) => setTimeout(r, 25));
check(a.mesh.stats().peers.departed === 1, "a counts b departed (b's farewell arrived)");

// a: stopped without closing its server first: 503, not a silent pass
await a.mesh.stop();
const after = await fetch(a.url);
check(after.status === 503, `a request after mesh.stop() is answered ${after.status} (503 expected)`);
a.server.close();
clearTimeout(deadline);
console.log(process.exitCode ? 'install test: FAILED' : 'install test: passed');
