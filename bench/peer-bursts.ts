/**
 * A peer's burst late in a long bucket: L = 100 per minute, k = 10 (buckets of 6 s). Node 0
 * admits a burst of 90 at one instant; from 60 s on, the other nodes are offered 20 requests a
 * second between them for 10 s, while the burst's bucket is the oldest and slides out of the
 * window. Peers' counts carry no times: weighted by the part of their bucket still inside, the
 * burst slid out from the bucket's start, and the other nodes admitted that part again. Each
 * row is 15 runs: the burst at 3, 5.5, 5.9, 11.95 and 17.99 s, three seeds each. Prints the
 * worst window over the runs (L = 100) and what they admitted in all.
 *
 *   npm run bench:peer-bursts
 */
import { worstRolling } from '../src/sim/metrics.js';
import { Simulator } from '../src/sim/simulator.js';
import { printTable } from './table.js';

const L = 100;
const W = 60_000;
const BURST = 90;
/** A multiple of the bucket (6 s), so the run's buckets start at 0. */
const EPOCH = 1_699_999_998_000;
const AT = [3_000, 5_500, 5_900, 11_950, 17_990];
const SEEDS = [1, 2, 3];

/** One window's run: the burst at `at`, then every `everyMs` one request at another node, over [from, from + forMs). */
interface Shape {
  windowMs: number;
  at: readonly number[];
  everyMs: number;
  from: number;
  forMs: number;
}

const LONG: Shape = { windowMs: W, at: AT, everyMs: 50, from: W, forMs: 10_000 };
/**
 * The same on a window of 1 s (buckets of 100 ms, as short as g: peers' counts carry no arrival
 * spans there): the burst at 50, 75, 90, 150 and 199 ms, then 500 requests a second on the other
 * nodes from 0.8 s to 1.8 s, while the burst's bucket slides out.
 */
const SHORT: Shape = { windowMs: 1000, at: [50, 75, 90, 150, 199], everyMs: 2, from: 800, forMs: 1000 };

function run(nodes: number, fanout: number, loss: number, at: number, seed: number, shape = LONG): number[] {
  const sim = new Simulator({
    nodes,
    ...(fanout > 0 ? { relay: { fanout } } : {}),
    policies: [
      {
        name: 'p',
        limit: L,
        windowMs: shape.windowMs,
        buckets: 10,
        overAdmission: 'controlled',
        fallback: true,
      },
    ],
    gossipIntervalMs: 100,
    delayMs: 10,
    loss,
    seed,
    // buckets start at 0, 6 s, 12 s ... of the run (the default epoch puts them 4 s in)
    epochMs: EPOCH,
    engine: { expectedMembers: nodes },
  });
  const admitted: number[] = [];
  sim.runUntil(at);
  for (let i = 0; i < BURST; i++) if (sim.request(0, 'p', 'k').allowed) admitted.push(at);
  for (let j = 0; shape.from + j * shape.everyMs < shape.from + shape.forMs; j++) {
    const t = shape.from + j * shape.everyMs;
    sim.runUntil(t);
    if (sim.request(1 + ((t / shape.everyMs) % (nodes - 1)), 'p', 'k').allowed) admitted.push(t);
  }
  return admitted;
}

function table(shape: Shape): (string | number)[][] {
  const rows: (string | number)[][] = [];
  for (const [fanout, sizes] of [
    [0, [2, 4, 8]],
    [2, [4, 8]],
  ] as const) {
    for (const loss of [0, 0.2]) {
      for (const nodes of sizes) {
        let worst = 0;
        let admitted = 0;
        for (const at of shape.at) {
          for (const seed of SEEDS) {
            const a = run(nodes, fanout, loss, at, seed, shape);
            worst = Math.max(worst, worstRolling(a, shape.windowMs));
            admitted += a.length;
          }
        }
        rows.push([fanout > 0 ? `relay f=${fanout}` : 'broadcast', nodes, `${loss * 100}%`, worst, admitted]);
      }
    }
  }
  return rows;
}

const header = (shape: Shape) => [
  'gossip',
  'nodes',
  'loss',
  'worst window',
  `admitted (${shape.at.length * SEEDS.length} runs)`,
];
console.log(
  `a burst of ${BURST} late in a 6 s bucket, L = ${L} per ${W / 1000} s, k = 10, g = 100 ms, d = 10 ms; then 20 req/s on the other nodes for 10 s from ${W / 1000} s (simulator, production engine)`,
);
printTable(header(LONG), table(LONG));
console.log('');
console.log(
  `the same on a window of 1 s (buckets of 100 ms): a burst of ${BURST} at ${SHORT.at.join(', ')} ms, then 500 req/s on the other nodes from 0.8 to 1.8 s`,
);
printTable(header(SHORT), table(SHORT));
