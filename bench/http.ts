/**
 * HTTP overhead bench: autocannon against one node:http server per variant,
 * all in this run. Each variant gets SLICES slices of DURATION seconds,
 * interleaved across variants, and reports the median slice (this machine is
 * shared: interleaving spreads outside load over every variant alike).
 *
 *   none              plain handler, no limiter
 *   ratemesh-allow    rateMeshGuard + local Engine, every request allowed (draft-11 headers)
 *   ratemesh-deny90   same, 1 request in 10 to an open route, 9 to an exhausted one (429)
 *   erl-memory        express-rate-limit 8, memory store, every request allowed; its
 *                     middleware called directly from the node:http listener (no express
 *                     app), keyGenerator = socket address, draft-7 headers (its closest
 *                     two-field shape), validations off
 *
 * Load is generated in a worker thread (autocannon `workers: 1`) so client and
 * server do not share one event loop. Writes bench/results/http.json.
 *   npm run bench:http   (DURATION=1 SLICES=5 CONNECTIONS=32 to change)
 */
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
  workers?: number;
  warmup?: { connections: number; duration: number };
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

function ratemeshListener(): RequestListener {
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

const variants: Variant[] = [
  { name: 'none', listener: (_req, res) => ok(res), paths: ['/'] },
  { name: 'ratemesh-allow', listener: ratemeshListener(), paths: ['/'] },
  { name: 'ratemesh-deny90', listener: ratemeshListener(), paths: ['/', ...Array(9).fill('/deny')] },
  { name: 'erl-memory', listener: erlListener(), paths: ['/'] },
];

interface Row {
  rps: number;
  p99_ms: number;
  non2xx: number;
  total: number;
}

interface Live {
  variant: Variant;
  port: number;
  close(): Promise<void>;
}

async function listen(v: Variant): Promise<Live> {
  const server = http.createServer(v.listener);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    variant: v,
    port,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function slice(l: Live, seconds: number): Promise<Row> {
  const result = await autocannon({
    url: `http://127.0.0.1:${l.port}`,
    connections: CONNECTIONS,
    duration: seconds,
    workers: 1,
    requests: l.variant.paths.map((path) => ({ method: 'GET', path })),
  });
  return {
    rps: Math.round(result.requests.average),
    p99_ms: result.latency.p99,
    non2xx: result.non2xx,
    total: result.requests.total,
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

// Every server up at once; one warm-up slice each; then SLICES short slices per
// variant, interleaved (A B C D A B C D ...), so load from elsewhere on the
// machine falls on every variant alike. Each figure is the median over slices.
const live: Live[] = [];
for (const v of variants) live.push(await listen(v));
for (const l of live) await slice(l, 1);
const rows = new Map<string, Row[]>(variants.map((v) => [v.name, []]));
for (let i = 0; i < SLICES; i++) {
  for (const l of live) {
    const row = await slice(l, DURATION);
    rows.get(l.variant.name)!.push(row);
    console.error(`slice ${i + 1}/${SLICES} ${l.variant.name}: ${row.rps} req/s, p99 ${row.p99_ms} ms`);
  }
}
for (const l of live) await l.close();
const best = new Map<string, Row>(
  [...rows].map(([name, rs]) => [
    name,
    {
      rps: Math.round(median(rs.map((r) => r.rps))),
      p99_ms: median(rs.map((r) => r.p99_ms)),
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
      total: rs.reduce((a, r) => a + r.total, 0),
    },
  ]),
);

const none = best.get('none')!.rps;
const erl = best.get('erl-memory')!.rps;
const pad = (s: string, n: number) => s.padEnd(n);
console.log(
  `\nHTTP bench: ${CONNECTIONS} connections, ${SLICES} interleaved slices of ${DURATION} s per variant (median), node ${process.version}`,
);
console.log(
  `${pad('variant', 17)}${pad('req/s', 10)}${pad('p99 ms', 8)}${pad('vs none', 9)}${pad('non-2xx', 9)}`,
);
for (const [name, r] of best) {
  const pct = `${((100 * r.rps) / none).toFixed(1)}%`;
  const denied = r.total > 0 ? `${((100 * r.non2xx) / r.total).toFixed(0)}%` : '-';
  console.log(
    `${pad(name, 17)}${pad(String(r.rps), 10)}${pad(String(r.p99_ms), 8)}${pad(pct, 9)}${pad(denied, 9)}`,
  );
}
const allow = best.get('ratemesh-allow')!.rps;
console.log(
  `\nratemesh-allow: ${((100 * allow) / none).toFixed(1)}% of no-limiter (target >= 90%), ${(allow / erl).toFixed(2)}x express-rate-limit (target >= 1)`,
);

mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
const out = Object.fromEntries([...best].map(([name, r]) => [name, { rps: r.rps, p99_ms: r.p99_ms }]));
writeFileSync(new URL('./results/http.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
