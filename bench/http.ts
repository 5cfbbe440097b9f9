/**
 * HTTP overhead bench: autocannon against one node:http server per variant,
 * all in this run. Each variant gets SLICES slices of DURATION seconds,
 * interleaved across variants, and reports the median slice (this machine is
 * shared: interleaving spreads outside load over every variant alike). Besides
 * req/s and p99, it reports the servers' CPU time per request, which outside
 * load disturbs far less than throughput.
 *
 *   none              plain handler, no limiter
 *   ratemesh-allow    rateMeshGuard + local Engine, every request allowed (draft-11 headers)
 *   ratemesh-deny90   same, 1 request in 10 to an open route, 9 to an exhausted one (429)
 *   erl-memory        express-rate-limit 8, memory store, every request allowed; its
 *                     middleware called directly from the node:http listener (no express
 *                     app), keyGenerator = socket address, draft-7 headers (its closest
 *                     two-field shape), validations off
 *
 * The servers run in a child process this script forks (same code, same run);
 * autocannon drives them from this process, so client and servers do not share
 * an event loop and the child's CPU time is the servers' alone.
 * Writes bench/results/http.json: {variant: {rps, p99_ms, cpu_us_per_req}}.
 *   npm run bench:http   (DURATION=1 SLICES=5 CONNECTIONS=32 to change)
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import http, { type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { rateLimit } from 'express-rate-limit';
import { Engine } from '../src/decision/engine.js';
import { rateMeshGuard } from '../src/http/index.js';

/** The part of autocannon's API used here (the package ships no types). */
interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p99: number };
  non2xx: number;
}
type Autocannon = (opts: {
  url: string;
  connections: number;
  duration: number;
  requests?: { method: string; path: string }[];
}) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const DURATION = Number(process.env.DURATION ?? 1);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 32);
const SLICES = Number(process.env.SLICES ?? 5);

const ok = (res: ServerResponse) => {
  res.setHeader('Content-Type', 'text/plain');
  res.end('ok');
};

function ratemeshListener(headers = true): RequestListener {
  const limiter = new Engine({
    policies: [
      { name: 'open', limit: 1_000_000_000, windowMs: 60_000 },
      { name: 'tight', limit: 1, windowMs: 86_400_000 },
    ],
    nodeId: 'bench',
  });
  const guard = rateMeshGuard({
    limiter,
    routes: [{ path: '/deny', policies: ['tight'] }],
    policies: ['open'],
    logger: false,
    standardHeaders: headers ? 'draft-11' : false,
  });
  return (req, res) => {
    const r = guard(req, res);
    if (r === true) ok(res);
    else if (r !== false) void r.then((go) => go && ok(res));
  };
}

function erlListener(): RequestListener {
  const mw = rateLimit({
    windowMs: 60_000,
    limit: 1_000_000_000,
    standardHeaders: 'draft-7',
    legacyHeaders: false,
    keyGenerator: (req) => (req as unknown as IncomingMessage).socket.remoteAddress ?? 'unknown',
    validate: false,
  });
  type Mw = (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => unknown;
  return (req, res) => {
    void (mw as unknown as Mw)(req, res, () => ok(res));
  };
}

interface Variant {
  name: string;
  listener: RequestListener;
  paths: string[];
}

/** DIAG=1 adds variants that split the overhead: fixed headers only, guard without headers, engine only. */
const eng = new Engine({
  policies: [{ name: 'open', limit: 1_000_000_000, windowMs: 60_000 }],
  nodeId: 'diag',
});
const diag: Variant[] = process.env.DIAG
  ? [
      {
        name: 'none+2hdr',
        listener: (_req, res) => {
          res.setHeader('RateLimit-Policy', '"open";q=1000000000;w=60');
          res.setHeader('RateLimit', '"open";r=999999;t=60');
          ok(res);
        },
        paths: ['/'],
      },
      { name: 'rm-noheaders', listener: ratemeshListener(false), paths: ['/'] },
      {
        name: 'engine-only',
        listener: (req, res) => {
          eng.check('open', `ip:${req.socket.remoteAddress}`);
          ok(res);
        },
        paths: ['/'],
      },
    ]
  : [];
const variants: Variant[] = [
  { name: 'none', listener: (_req, res) => ok(res), paths: ['/'] },
  { name: 'ratemesh-allow', listener: ratemeshListener(), paths: ['/'] },
  { name: 'ratemesh-deny90', listener: ratemeshListener(), paths: ['/', ...Array(9).fill('/deny')] },
  { name: 'erl-memory', listener: erlListener(), paths: ['/'] },
  ...diag,
];

interface Row {
  rps: number;
  p99_ms: number;
  cpu_us: number;
  non2xx: number;
  total: number;
}

type ToChild = { cmd: 'cpu'; id: number };
type FromChild = { ports: Record<string, number> } | { id: number; cpu: NodeJS.CpuUsage };

/** Child: serve every variant, answer CPU-time queries. */
async function serve(): Promise<void> {
  const ports: Record<string, number> = {};
  for (const v of variants) {
    const server = http.createServer(v.listener);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    ports[v.name] = (server.address() as AddressInfo).port;
  }
  process.on('message', (m: ToChild) => {
    if (m.cmd === 'cpu') process.send!({ id: m.id, cpu: process.cpuUsage() } satisfies FromChild);
  });
  process.on('disconnect', () => process.exit(0));
  process.send!({ ports } satisfies FromChild);
}

let nextId = 0;
function childCpu(child: ChildProcess): Promise<number> {
  const id = nextId++;
  return new Promise((resolve) => {
    const on = (m: FromChild) => {
      if ('id' in m && m.id === id) {
        child.off('message', on);
        resolve(m.cpu.user + m.cpu.system);
      }
    };
    child.on('message', on);
    child.send({ cmd: 'cpu', id } satisfies ToChild);
  });
}

async function slice(child: ChildProcess, port: number, v: Variant, seconds: number): Promise<Row> {
  const before = await childCpu(child);
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: v.paths.map((path) => ({ method: 'GET', path })),
  });
  const cpu = (await childCpu(child)) - before;
  return {
    rps: Math.round(result.requests.average),
    p99_ms: result.latency.p99,
    cpu_us: result.requests.total > 0 ? cpu / result.requests.total : 0,
    non2xx: result.non2xx,
    total: result.requests.total,
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

if (process.env.RATEMESH_BENCH_CHILD === '1') {
  await serve();
} else {
  await main();
}

async function main(): Promise<void> {
  const child = fork(new URL(import.meta.url).pathname, [], {
    env: { ...process.env, RATEMESH_BENCH_CHILD: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ports = await new Promise<Record<string, number>>((resolve, reject) => {
    child.once('message', (m: FromChild) =>
      'ports' in m ? resolve(m.ports) : reject(new Error('bad child')),
    );
    child.once('exit', (code) => reject(new Error(`bench server exited (${code})`)));
  });
  try {
    // One warm-up slice per variant, then SLICES slices each, interleaved.
    for (const v of variants) await slice(child, ports[v.name]!, v, 1);
    const rows = new Map<string, Row[]>(variants.map((v) => [v.name, []]));
    for (let i = 0; i < SLICES; i++) {
      for (const v of variants) {
        const row = await slice(child, ports[v.name]!, v, DURATION);
        rows.get(v.name)!.push(row);
        console.error(
          `slice ${i + 1}/${SLICES} ${v.name}: ${row.rps} req/s, p99 ${row.p99_ms} ms, ${row.cpu_us.toFixed(1)} us cpu/req`,
        );
      }
    }
    report(
      new Map<string, Row>(
        [...rows].map(([name, rs]) => [
          name,
          {
            rps: Math.round(median(rs.map((r) => r.rps))),
            p99_ms: median(rs.map((r) => r.p99_ms)),
            cpu_us: median(rs.map((r) => r.cpu_us)),
            non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
            total: rs.reduce((a, r) => a + r.total, 0),
          },
        ]),
      ),
    );
  } finally {
    child.disconnect();
  }
}

function report(best: Map<string, Row>): void {
  const none = best.get('none')!.rps;
  const erl = best.get('erl-memory')!.rps;
  const pad = (s: string, n: number) => s.padEnd(n);
  console.log(
    `\nHTTP bench: ${CONNECTIONS} connections, ${SLICES} interleaved slices of ${DURATION} s per variant (median), node ${process.version}`,
  );
  console.log(
    `${pad('variant', 17)}${pad('req/s', 10)}${pad('p99 ms', 8)}${pad('vs none', 9)}${pad('cpu us/req', 12)}${pad('non-2xx', 9)}`,
  );
  for (const [name, r] of best) {
    const pct = `${((100 * r.rps) / none).toFixed(1)}%`;
    const denied = r.total > 0 ? `${((100 * r.non2xx) / r.total).toFixed(0)}%` : '-';
    console.log(
      `${pad(name, 17)}${pad(String(r.rps), 10)}${pad(String(r.p99_ms), 8)}${pad(pct, 9)}${pad(r.cpu_us.toFixed(1), 12)}${pad(denied, 9)}`,
    );
  }
  const allow = best.get('ratemesh-allow')!.rps;
  const cpu = (n: string) => best.get(n)!.cpu_us;
  console.log(
    `\nratemesh-allow: ${((100 * allow) / none).toFixed(1)}% of no-limiter req/s (target >= 90%), ${(allow / erl).toFixed(2)}x express-rate-limit req/s (target >= 1)`,
  );
  console.log(
    `server CPU per request: limiter adds ${(cpu('ratemesh-allow') - cpu('none')).toFixed(1)} us (ratemesh) vs ${(cpu('erl-memory') - cpu('none')).toFixed(1)} us (express-rate-limit) over ${cpu('none').toFixed(1)} us`,
  );

  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  const out = Object.fromEntries(
    [...best].map(([name, r]) => [
      name,
      { rps: r.rps, p99_ms: r.p99_ms, cpu_us_per_req: Number(r.cpu_us.toFixed(2)) },
    ]),
  );
  writeFileSync(new URL('./results/http.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
}
