/**
 * Where the rule's false denials come from, read off `explain` just before each denied request
 * (issue 26; docs/decision-rule.md). Two shapes of `bench:two-sided`, on its default mesh
 * (defaultMesh: g = 100 ms, d = 10 ms, timers up to 2 ms late), every decision local:
 *
 * - global 0.9 L: one key, L = 1,000 per 1 s, 900/s evenly spaced from 3 s after the mesh's
 *   start for 10 s, each request at a node drawn uniformly;
 * - heavy accounts: 20 keys of L = 100 per minute, each offered 5/s (3 L) for 100 s; the denials
 *   of the steady state (after the first 70 s) are sampled.
 *
 * For each, the share of requests denied and, over the denials, p10 / p50 / p90 of the share's
 * terms: the horizon U, the headroom H = L − E_old, this node's allowance (its share of H) and its
 * own recent counts (Explanation.share).
 *
 *   npm run bench:denial-anatomy [-- --nodes 8,32]
 */
import { parseArgs } from 'node:util';
import { Prng } from '../src/sim/prng.js';
import { Simulator } from '../src/sim/simulator.js';
import { defaultMesh } from '../src/sim/two-sided.js';
import type { PolicySpec } from '../src/types.js';
import { printTable } from './table.js';

const { values } = parseArgs({ options: { nodes: { type: 'string', default: '8,32' } } });
const NODES = values.nodes.split(',').map(Number);

interface Shape {
  name: string;
  policy: PolicySpec;
  keys: number;
  /** Requests a second, each key. */
  rate: number;
  seconds: number;
  /** Denials counted in the terms from this many ms into the traffic. */
  sampleFromMs: number;
}

const SHAPES: Shape[] = [
  {
    name: 'global 0.9L',
    policy: { name: 'g', limit: 1000, windowMs: 1000 },
    keys: 1,
    rate: 900,
    seconds: 10,
    sampleFromMs: 0,
  },
  {
    name: 'heavy 3L',
    policy: { name: 'a', limit: 100, windowMs: 60_000 },
    keys: 20,
    rate: 5,
    seconds: 100,
    sampleFromMs: 70_000,
  },
];

const START = 3000;
const TERMS = ['horizonMs', 'headroom', 'allowance', 'ownRecent'] as const;

function run(shape: Shape, n: number): (string | number)[] {
  const sim = new Simulator({ ...defaultMesh(n), policies: [shape.policy] });
  const prng = new Prng(11);
  sim.runUntil(START);
  const total = shape.keys * shape.rate * shape.seconds;
  const step = 1000 / (shape.rate * shape.keys);
  const terms: number[][] = TERMS.map(() => []);
  let denied = 0;
  for (let i = 0; i < total; i++) {
    const t = START + i * step;
    sim.runUntil(t);
    const key = `k${i % shape.keys}`;
    const node = Math.floor(prng.next() * n);
    const x = sim.engines[node]!.explain(shape.policy.name, key);
    const d = sim.request(node, shape.policy.name, key);
    if (x.allowed !== d.allowed) throw new Error(`explain and check differ at ${t} ms`);
    if (d.allowed) continue;
    denied++;
    if (t - START < shape.sampleFromMs || x.share === undefined) continue;
    for (let j = 0; j < TERMS.length; j++) terms[j]!.push(x.share[TERMS[j]!]);
  }
  const q = (xs: number[], p: number) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length === 0 ? Number.NaN : s[Math.floor(p * (s.length - 1))]!;
  };
  const f = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(2));
  return [
    shape.name,
    n,
    total,
    ((100 * denied) / total).toFixed(2),
    terms[0]!.length,
    ...terms.map((xs) => `${f(q(xs, 0.1))} / ${f(q(xs, 0.5))} / ${f(q(xs, 0.9))}`),
  ];
}

const rows: (string | number)[][] = [];
for (const shape of SHAPES) for (const n of NODES) rows.push(run(shape, n));
console.log(
  'denials of the default rule and the share terms at each (explain just before the request), p10 / p50 / p90; ' +
    'defaultMesh (g = 100 ms, d = 10 ms); heavy 3L: the steady state, after its first 70 s',
);
printTable(['shape', 'N', 'requests', 'denied %', 'sampled', ...TERMS], rows);
