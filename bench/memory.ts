/**
 * Memory per tracked key and of the eviction sketches, measured on the heap
 * (V8 heap plus array buffers):
 *
 *   npm run bench:memory
 *
 * For k = 10 and k = 50 buckets, fills an engine with 50,000 keys admitted
 * here, with and without peers' windows for every key (3 and 7 peers), and
 * prints heap bytes per key after a full GC, then the bound an operator can
 * plan on: maxKeys × bytes per key + one sketch per policy.
 */

import { RateLimiterMemory } from 'rate-limiter-flexible';
import { ManualClock } from '../src/clock.js';
import { Engine } from '../src/decision/engine.js';
import { printTable } from './table.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) {
  console.error('run with node --expose-gc (npm run bench:memory does)');
  process.exit(2);
}
const N = 50_000;
const T0 = 1_700_000_000_000;

/** V8 heap plus off-heap typed-array backing stores (the windows' Float64Arrays live there). */
function heap(): number {
  gc!();
  gc!();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

function policies(k: number) {
  return [{ name: 'api', limit: 1000, windowMs: 1000, buckets: k }];
}

/** `peers` engines that each admitted once on every key. */
function peerEngines(k: number, peers: number, clock: ManualClock): Engine[] {
  const out = Array.from(
    { length: peers },
    (_, i) => new Engine({ policies: policies(k), clock, nodeId: `p${i}` }),
  );
  for (const o of out) for (let i = 0; i < N; i++) o.check('api', `acct:${i}`);
  return out;
}

/** Heap bytes per key of an engine holding N keys, its own counts and `peers` peers' windows for each. */
function perKey(k: number, peers: number): number {
  const clock = new ManualClock(T0);
  // the peer engines' own heap, measured alone, is subtracted
  let before = heap();
  let others = peerEngines(k, peers, clock);
  const theirs = heap() - before;
  others = [];
  before = heap();
  others = peerEngines(k, peers, clock);
  const e = new Engine({ policies: policies(k), clock, nodeId: 'n', maxKeys: N });
  for (let i = 0; i < N; i++) e.check('api', `acct:${i}`);
  for (const o of others) {
    // a message carries at most 2,048 keys: send until every key went out
    for (let t = 0; t < Math.ceil(N / 2048) + 1; t++) e.receiveGossip(o.nodeId, o.buildGossip());
  }
  const total = heap() - before;
  const s = e.stats();
  if (s.keys !== N || s.livePeers !== peers)
    throw new Error(`expected ${N} keys and ${peers} peers: ${JSON.stringify(s)}`);
  return (total - theirs) / N;
}

/** Heap bytes per key of rate-limiter-flexible's RateLimiterMemory holding N keys, each consumed once. */
async function rlflexPerKey(): Promise<number> {
  const before = heap();
  const rl = new RateLimiterMemory({ points: 1000, duration: 1 });
  for (let i = 0; i < N; i++) await rl.consume(`acct:${i}`);
  const total = heap() - before;
  // keep the limiter alive through the measurement
  if ((await rl.get('acct:0')) === null) throw new Error('rate-limiter-flexible lost a key');
  return total / N;
}

const rows: (string | number)[][] = [];
for (const k of [10, 50]) {
  for (const peers of [0, 3, 7]) rows.push([k, peers, Math.round(perKey(k, peers))]);
}
console.log(`bytes per tracked key, V8 heap + array buffers (${N} keys, node ${process.version}):`);
printTable(['k', 'peers', 'bytes/key'], rows);
console.log(
  `rate-limiter-flexible RateLimiterMemory, same process, ${N} keys: ${Math.round(await rlflexPerKey())} bytes/key (one counter and expiry per key, no window of buckets)`,
);
/**
 * Heap bytes per member of an engine hearing `members` peers, each gossiping counts for one key:
 * its peer-table entry plus its window of that key (what each member costs before its keys).
 */
function perMember(k: number, members: number): number {
  const clock = new ManualClock(T0);
  const p = new Engine({ policies: policies(k), clock, nodeId: 'p', gossipIntervalMs: 100 });
  p.check('api', 'acct:0');
  const bytes = p.buildGossip();
  const e = new Engine({ policies: policies(k), clock, nodeId: 'n', maxPeers: members });
  e.check('api', 'acct:0');
  const ids = Array.from({ length: members }, (_, i) => `12D3KooW${String(i).padStart(44, 'x')}`);
  const before = heap();
  for (const id of ids) {
    const r = e.receiveGossip(id, bytes);
    if (!r.ok) throw new Error(`member ${id}: ${r.reason}`);
  }
  const total = heap() - before;
  if (e.stats().livePeers !== members) throw new Error(`expected ${members} live peers`);
  return total / members;
}

const memberRows: (string | number)[][] = [];
for (const k of [10, 50]) memberRows.push([k, 1024, Math.round(perMember(k, 1024))]);
console.log('bytes per member (peer-table entry + its window of one key), V8 heap + array buffers:');
printTable(['k', 'members', 'bytes/member'], memberRows);

const sketch = 5 * 4 * 8192 * 8;
console.log(
  `eviction sketch: ${sketch} bytes per policy (5 slots x 4 rows x 8,192 cells x 8 bytes), allocated on the first live eviction`,
);
