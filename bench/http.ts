/**
 * HTTP overhead bench: autocannon against one node:http server per variant,
 * all in this run, one after another, interleaved over ROUNDS rounds (best
 * round kept, to damp noise from other work on the machine).
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
 *   npm run bench:http   (DURATION=3 CONNECTIONS=32 ROUNDS=2 to change)
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

const DURATION = Number(process.env.DURATION ?? 3);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.ROUNDS ?? 2);

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

async function run(v: Variant): Promise<Row> {
  const server = http.createServer(v.listener);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  try {
    const result = await autocannon({
      url: `http://127.0.0.1:${port}`,
      connections: CONNECTIONS,
      duration: DURATION,
      workers: 1,
      warmup: { connections: CONNECTIONS, duration: 1 },
      requests: v.paths.map((path) => ({ method: 'GET', path })),
    });
    return {
      rps: Math.round(result.requests.average),
      p99_ms: result.latency.p99,
      non2xx: result.non2xx,
      total: result.requests.total,
    };
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
}

const best = new Map<string, Row>();
for (let round = 1; round <= ROUNDS; round++) {
  for (const v of variants) {
    const row = await run(v);
    console.error(`round ${round} ${v.name}: ${row.rps} req/s, p99 ${row.p99_ms} ms`);
    const prev = best.get(v.name);
    if (prev === undefined || row.rps > prev.rps) best.set(v.name, row);
  }
}

const none = best.get('none')!.rps;
const erl = best.get('erl-memory')!.rps;
const pad = (s: string, n: number) => s.padEnd(n);
console.log(
  `\nHTTP bench: ${CONNECTIONS} connections, ${DURATION} s per variant, best of ${ROUNDS} rounds, node ${process.version}`,
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
