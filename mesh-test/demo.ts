/**
 * `npm start`: a local mesh of real ratemesh daemons on loopback, driven with
 * traffic, then left running for you to poke at.
 *
 *   npm start                      4 daemons, ~10 s of traffic, then runs until Ctrl-C
 *   npm start -- --seconds 5       5 s of traffic, then stops and exits (CI)
 *   RATEMESH_DEMO_EXIT=1 npm start exits after the run
 *
 * Each daemon is `node bin/ratemesh.js node --config <generated yaml>` (its own
 * process, HTTP check API on 127.0.0.1). One key, `acct:42`, is limited to
 * 100 per second mesh-wide while 200 per second arrive, spread 40/30/20/10 %
 * over the nodes, as a load balancer would.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { generateKeyPair, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import { stringify } from 'yaml';
import { worstRolling } from '../src/sim/metrics.js';
import { freePorts, ROOT, sleep } from './harness.js';

const POLICY = { name: 'api', limit: 100, windowMs: 1000, buckets: 20 };
const KEY = 'acct:42';
const WEIGHTS = [40, 30, 20, 10];

interface Daemon {
  i: number;
  url: string;
  proc: ChildProcess;
  tail: string[];
  exited: boolean;
}

const daemons: Daemon[] = [];
let workDir: string | undefined;
let closing: Promise<void> | undefined;

/** SIGTERM every daemon (they drain), SIGKILL what is left after 5 s, remove the work directory. */
function shutdown(): Promise<void> {
  closing ??= (async () => {
    for (const d of daemons) if (!d.exited) d.proc.kill('SIGTERM');
    const deadline = Date.now() + 5_000;
    while (daemons.some((d) => !d.exited) && Date.now() < deadline) await sleep(50);
    for (const d of daemons) if (!d.exited) d.proc.kill('SIGKILL');
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  })();
  return closing;
}

process.on('exit', () => {
  for (const d of daemons) if (!d.exited) d.proc.kill('SIGKILL');
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(sig, () => {
    console.log(`\n${sig}: stopping the mesh...`);
    void shutdown().then(() => process.exit(0));
    setTimeout(() => process.exit(1), 8_000).unref();
  });
}

const agent = new Agent({ keepAlive: true, maxSockets: 32 });

/** One HTTP call to a daemon, bounded at 2 s. */
function call(
  url: string,
  method: 'GET' | 'POST',
  path: string,
  body?: object,
): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      `${url}${path}`,
      {
        method,
        agent,
        timeout: 2_000,
        headers: data
          ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) }
          : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(data);
  });
}

async function startDaemons(n: number, gossipMs: number): Promise<void> {
  workDir = mkdtempSync(join(tmpdir(), 'ratemesh-demo-'));
  const ports = await freePorts(2 * n);
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = await generateKeyPair('Ed25519');
    writeFileSync(join(workDir, `node-${i}.key`), privateKeyToProtobuf(key));
    ids.push(key.publicKey.toString());
  }
  const p2p = (i: number) => `/ip4/127.0.0.1/tcp/${ports[n + i]}/p2p/${ids[i]}`;
  for (let i = 0; i < n; i++) {
    const cfg = {
      http: { host: '127.0.0.1', port: ports[i] },
      mesh: {
        listen: [`/ip4/127.0.0.1/tcp/${ports[n + i]}`],
        bootstrap: ids
          .map((_, j) => j)
          .filter((j) => j !== i)
          .map(p2p),
        gossipIntervalMs: gossipMs,
        keyFile: join(workDir, `node-${i}.key`),
      },
      log: { level: 'warn' },
      policies: [POLICY],
    };
    const file = join(workDir, `node-${i}.yaml`);
    writeFileSync(file, stringify(cfg));
    const proc = spawn(process.execPath, [join(ROOT, 'bin', 'ratemesh.js'), 'node', '--config', file], {
      cwd: ROOT,
      env: { ...process.env, RATEMESH_FROM_SOURCE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const d: Daemon = { i, url: `http://127.0.0.1:${ports[i]}`, proc, tail: [], exited: false };
    const keep = (c: Buffer) => {
      d.tail.push(...c.toString('utf8').split('\n').filter(Boolean));
      if (d.tail.length > 20) d.tail.splice(0, d.tail.length - 20);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    proc.on('exit', () => {
      d.exited = true;
    });
    daemons.push(d);
  }
  // Every daemon healthy: started and hearing its peers (bounded).
  const deadline = Date.now() + 60_000;
  for (let round = 0; round < 1_000; round++) {
    const dead = daemons.find((d) => d.exited);
    if (dead) throw new Error(`node ${dead.i} exited:\n${dead.tail.join('\n')}`);
    const ok = await Promise.all(
      daemons.map((d) =>
        call(d.url, 'GET', '/v1/peers').then(
          (r) =>
            r.status === 200 &&
            ((r.json as { peers?: { stale: boolean }[] }).peers ?? []).filter((p) => !p.stale).length >=
              n - 1,
          () => false,
        ),
      ),
    );
    if (ok.every(Boolean)) return;
    if (Date.now() > deadline) throw new Error(`mesh not formed after 60 s (healthy: ${ok.join(',')})`);
    await sleep(250);
  }
}

/** Which node request `i` goes to: a fixed 40/30/20/10 % rotation (deterministic). */
function nodeFor(i: number): number {
  const r = (i * 37) % 100;
  let acc = 0;
  for (let j = 0; j < WEIGHTS.length; j++) {
    acc += WEIGHTS[j]!;
    if (r < acc) return j % daemons.length;
  }
  return 0;
}

async function drive(seconds: number, rate: number): Promise<void> {
  const n = daemons.length;
  const admittedAt: number[] = [];
  const perNode = daemons.map(() => ({ sent: 0, admitted: 0, limited: 0, errors: 0 }));
  const t0 = performance.now();
  const total = Math.round(seconds * rate);
  let sent = 0;
  let inFlight = 0;
  let lastSec = 0;
  let secAdmitted = 0;
  let secSent = 0;
  let secLimited = 0;
  console.log(
    `driving ${rate} req/s for ${seconds} s at key ${KEY} (limit ${POLICY.limit}/s mesh-wide), ` +
      `spread ${WEIGHTS.slice(0, n).join('/')} % over ${n} nodes:`,
  );
  const pending: Promise<void>[] = [];
  /** One progress line: what the last second sent and admitted, and each node's admitted total. */
  const progress = (sec: number): void => {
    console.log(
      `  ${String(sec).padStart(3)} s  sent ${String(secSent).padStart(4)}  admitted ${String(secAdmitted).padStart(4)}` +
        `  429 ${String(secLimited).padStart(4)}  admitted so far by node ${perNode.map((p) => p.admitted).join('/')}`,
    );
    secAdmitted = 0;
    secSent = 0;
    secLimited = 0;
  };
  while (sent < total) {
    const now = performance.now() - t0;
    const due = Math.min(total, Math.floor((now / 1000) * rate) + 1);
    while (sent < due && inFlight < 256) {
      const i = sent++;
      const node = nodeFor(i);
      const at = performance.now() - t0;
      perNode[node]!.sent++;
      secSent++;
      inFlight++;
      const p = call(daemons[node]!.url, 'POST', '/v1/check', { policy: POLICY.name, key: KEY })
        .then((r) => {
          if (r.status === 200) {
            perNode[node]!.admitted++;
            admittedAt.push(at);
            secAdmitted++;
          } else if (r.status === 429) {
            perNode[node]!.limited++;
            secLimited++;
          } else perNode[node]!.errors++;
        })
        .catch(() => {
          perNode[node]!.errors++;
        })
        .finally(() => {
          inFlight--;
        });
      pending.push(p);
    }
    const sec = Math.floor((performance.now() - t0) / 1000);
    if (sec > lastSec && lastSec < seconds) {
      progress(sec);
      lastSec = sec;
    }
    await sleep(2);
  }
  await Promise.race([Promise.allSettled(pending), sleep(5_000)]);
  if (lastSec < seconds) progress(seconds);
  admittedAt.sort((a, b) => a - b);
  const worst = worstRolling(admittedAt, 1000);
  console.log('');
  console.log('node  url                         sent  admitted  429  errors');
  perNode.forEach((p, i) => {
    const cells = [String(i).padStart(4), daemons[i]!.url.padEnd(26), String(p.sent).padStart(4)];
    cells.push(String(p.admitted).padStart(8), String(p.limited).padStart(3), String(p.errors).padStart(6));
    console.log(cells.join('  '));
  });
  const adm = perNode.reduce((a, p) => a + p.admitted, 0);
  console.log(
    `admitted ${adm} of ${sent} in ${seconds} s (limit ${POLICY.limit}/s); worst rolling 1 s: ${worst} ` +
      `= ${(((worst - POLICY.limit) / POLICY.limit) * 100).toFixed(1)} % over the limit (measured at the client)`,
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '4' },
      seconds: { type: 'string' },
      rate: { type: 'string', default: '200' },
      'gossip-ms': { type: 'string', default: '25' },
    },
  });
  const n = Number(values.nodes);
  const seconds = values.seconds === undefined ? 10 : Number(values.seconds);
  const rate = Number(values.rate);
  const gossip = Number(values['gossip-ms']);
  if (!(n >= 2 && n <= 8 && seconds >= 1 && seconds <= 300 && rate >= 1 && rate <= 2000 && gossip >= 1))
    throw new Error('--nodes 2..8, --seconds 1..300, --rate 1..2000, --gossip-ms >= 1');
  const exitAfter = values.seconds !== undefined || process.env.RATEMESH_DEMO_EXIT === '1';

  console.log(`starting ${n} ratemesh daemons on 127.0.0.1 (gossip every ${gossip} ms)...`);
  await startDaemons(n, gossip);
  console.log(`mesh formed: every node sees ${n - 1} live peers\n`);
  await drive(seconds, rate);

  const d0 = daemons[0]!.url;
  console.log(`
Talk to a node's check API (any node; they share one limit):
  curl -s -X POST ${d0}/v1/check -H 'content-type: application/json' -d '{"policy":"${POLICY.name}","key":"${KEY}"}'
  curl -s ${d0}/v1/peers     curl -s ${d0}/v1/stats     curl -s ${d0}/metrics     curl -s ${d0}/healthz
Nodes: ${daemons.map((d) => d.url).join('  ')}`);
  if (exitAfter) {
    await shutdown();
    return;
  }
  console.log('\nThe mesh keeps running; Ctrl-C stops it.');
  // Bounded wait for Ctrl-C: a day at most, and stop early if every daemon died.
  const until = Date.now() + 86_400_000;
  while (Date.now() < until && daemons.some((d) => !d.exited)) await sleep(1_000);
  await shutdown();
}

main().then(
  () => process.exit(0),
  async (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    await shutdown();
    process.exit(1);
  },
);
