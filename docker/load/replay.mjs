#!/usr/bin/env node
// ratemesh load driver (the compose `load` service; docker/mesh.ts is the full drill): replays
// requests against every replica's `POST /v1/check` and prints what was admitted.
// Plain Node (no dependencies) so it runs in the daemon image and on the host.
//
//   node replay.mjs --target node:8080 [--trace file.jsonl]
//                   [--rate 2000 --seconds 10 --weights 40,20,10,10,5,5,5,5 --seed 1]
//                   [--policy seed --key k] [--concurrency 256] [--batch-ms 10] [--json]
// --target host:port   host resolved to ALL its addresses (compose service name),
//                      sorted, replica i = i-th address; or a comma list host:port,...
// --trace              JSON lines {"t": ms offset, "node": i, "key"?: s, "cost"?: n}
//                      (mesh.ts writes the seed trace to docker/tmp/trace/seed.jsonl,
//                      mounted at /trace/seed.jsonl); else synthetic:
//                      request i at i*1000/rate ms, node by xorshift64 over --weights.
// --batch-ms B         every B ms the requests due for a replica go as one POST /v1/check/batch
//                      (each still decided on its own, in order); 0: one POST /v1/check each.
//                      One HTTP request per check costs ~250 µs of CPU on a small VM, each side.
// Output: per-replica admitted/denied/errors, worst rolling 1 s and worst aligned
// 100 ms of admitted requests (by scheduled time), as a table, or --json.
import { lookup } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { parseArgs } from 'node:util';

const { values: a } = parseArgs({
  options: {
    target: { type: 'string', default: 'node:8080' },
    trace: { type: 'string' },
    rate: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '10' },
    weights: { type: 'string', default: '40,20,10,10,5,5,5,5' },
    seed: { type: 'string', default: '1' },
    policy: { type: 'string', default: 'seed' },
    key: { type: 'string', default: 'k' },
    concurrency: { type: 'string', default: '256' },
    'timeout-ms': { type: 'string', default: '2000' },
    'batch-ms': { type: 'string', default: '10' },
    json: { type: 'boolean', default: false },
  },
});
const num = (s, name, lo, hi) => {
  const n = Number(s);
  if (!Number.isFinite(n) || n < lo || n > hi)
    throw new Error(`--${name} must be a number in [${lo}, ${hi}] (got ${s})`);
  return n;
};

async function targets(spec) {
  const parts = spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (parts.length === 1) {
    const [host, port] = parts[0].split(':');
    const addrs = (await lookup(host, { all: true, family: 4 })).map((x) => x.address);
    return [...new Set(addrs)]
      .sort((x, y) => x.localeCompare(y, 'en', { numeric: true }))
      .map((h) => ({ host: h, port: Number(port) }));
  }
  return parts.map((p) => ({ host: p.split(':')[0], port: Number(p.split(':')[1]) }));
}

function synthetic(n) {
  const rate = num(a.rate, 'rate', 1, 100_000);
  const total = Math.round(rate * num(a.seconds, 'seconds', 0.1, 600));
  const w = a.weights.split(',').map(Number);
  const sum = w.reduce((x, y) => x + y, 0);
  let s = BigInt(num(a.seed, 'seed', 1, Number.MAX_SAFE_INTEGER));
  const M = (1n << 64n) - 1n;
  const out = [];
  for (let i = 0; i < total; i++) {
    s ^= (s << 13n) & M;
    s ^= s >> 7n;
    s ^= (s << 17n) & M;
    let r = Number(s % BigInt(sum));
    let node = 0;
    while (node < w.length - 1 && r >= w[node]) r -= w[node++];
    out.push({ t: (i * 1000) / rate, node: node % n });
  }
  return out;
}

const nodes = await targets(a.target);
if (nodes.length === 0) throw new Error(`no address for ${a.target}`);
const reqs = a.trace
  ? readFileSync(a.trace, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
  : synthetic(nodes.length);
const agent = new Agent({ keepAlive: true, maxSockets: 64 });
const timeoutMs = num(a['timeout-ms'], 'timeout-ms', 1, 60_000);
const per = nodes.map((n) => ({ addr: `${n.host}:${n.port}`, sent: 0, admitted: 0, denied: 0, errors: 0 }));
const admittedAt = [];

/** POST `body` to replica `n` at `path`; resolves with [status, text] ([0, ''] on error or timeout). */
function post(n, path, body) {
  return new Promise((resolve) => {
    const q = request(
      {
        host: n.host,
        port: n.port,
        method: 'POST',
        path,
        agent,
        timeout: timeoutMs,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          if (text.length < 1 << 22) text += c;
        });
        res.on('end', () => resolve([res.statusCode ?? 0, text]));
      },
    );
    q.on('timeout', () => q.destroy(new Error('timeout')));
    q.on('error', () => resolve([0, '']));
    q.end(body);
  });
}

/** One POST /v1/check: 'admitted', 'denied' or 'errors'. */
async function check(r) {
  const body = JSON.stringify({ policy: r.policy ?? a.policy, key: r.key ?? a.key, cost: r.cost ?? 1 });
  const [status, text] = await post(nodes[r.node % nodes.length], '/v1/check', body);
  if (status !== 200 && status !== 429) return 'errors';
  let allowed = status === 200;
  try {
    const j = JSON.parse(text);
    if (typeof j.allowed === 'boolean') allowed = j.allowed;
  } catch {}
  return allowed ? 'admitted' : 'denied';
}

/** One POST /v1/check/batch for `rs` (all to replica `n`): an outcome per request, in order. */
async function checkBatch(n, rs) {
  const body = JSON.stringify({
    requests: rs.map((r) => ({ policy: r.policy ?? a.policy, key: r.key ?? a.key, cost: r.cost ?? 1 })),
  });
  const [status, text] = await post(n, '/v1/check/batch', body);
  let ds = [];
  try {
    if (status === 200) ds = JSON.parse(text).decisions ?? [];
  } catch {}
  return rs.map((_, j) => {
    const d = ds[j];
    if (!d || (d.status !== 200 && d.status !== 429)) return 'errors';
    return d.allowed === true ? 'admitted' : 'denied';
  });
}

const batchMs = num(a['batch-ms'], 'batch-ms', 0, 1000);
const limit = num(a.concurrency, 'concurrency', 1, 4096);
let inflight = 0;
let lagMax = 0;
const start = performance.now();
await new Promise((done) => {
  let i = 0;
  let finished = 0;
  const pumpBatch = () => {
    const now = performance.now() - start;
    const due = new Map();
    while (i < reqs.length && reqs[i].t <= now) {
      const r = reqs[i++];
      lagMax = Math.max(lagMax, now - r.t);
      const k = r.node % nodes.length;
      if (!due.has(k)) due.set(k, []);
      due.get(k).push(r);
    }
    for (const [k, all] of due) {
      const p = per[k];
      for (let s = 0; s < all.length; s += 1000) {
        const rs = all.slice(s, s + 1000);
        p.sent += rs.length;
        checkBatch(nodes[k], rs).then((outs) => {
          outs.forEach((res, j) => {
            p[res]++;
            if (res === 'admitted') admittedAt.push(rs[j].t);
          });
          finished += rs.length;
          if (finished === reqs.length) done();
        });
      }
    }
    if (i < reqs.length) setTimeout(pumpBatch, batchMs);
  };
  const pump = () => {
    const now = performance.now() - start;
    while (i < reqs.length && reqs[i].t <= now && inflight < limit) {
      const r = reqs[i++];
      lagMax = Math.max(lagMax, now - r.t);
      const p = per[r.node % per.length];
      p.sent++;
      inflight++;
      check(r).then((res) => {
        p[res]++;
        inflight--;
        if (res === 'admitted') admittedAt.push(r.t);
        if (++finished === reqs.length) done();
      });
    }
    if (i < reqs.length) setTimeout(pump, Math.max(0, Math.min(5, reqs[i].t - (performance.now() - start))));
  };
  if (reqs.length === 0) done();
  else if (batchMs > 0) pumpBatch();
  else pump();
});
agent.destroy();

admittedAt.sort((x, y) => x - y);
let worst1s = 0;
for (let lo = 0, hi = 0; hi < admittedAt.length; hi++) {
  while (admittedAt[hi] - admittedAt[lo] >= 1000) lo++;
  worst1s = Math.max(worst1s, hi - lo + 1);
}
const bins = new Map();
for (const t of admittedAt) bins.set(Math.floor(t / 100), (bins.get(Math.floor(t / 100)) ?? 0) + 1);
const summary = {
  requests: reqs.length,
  admitted: admittedAt.length,
  worst_1s: worst1s,
  worst_100ms: Math.max(0, ...bins.values()),
  errors: per.reduce((s, p) => s + p.errors, 0),
  send_lag_max_ms: Math.round(lagMax),
  elapsed_ms: Math.round(performance.now() - start),
  nodes: per,
};
if (a.json) console.log(JSON.stringify(summary));
else {
  console.table(per);
  const { nodes: _n, ...rest } = summary;
  console.table([rest]);
}
