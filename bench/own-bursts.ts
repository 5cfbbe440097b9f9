/**
 * One engine, one key, its own admissions in batches (a saturated daemon, a service whose event
 * loop stalls): L = 1,000 per 1 s offered twice L, the requests due so far decided together at
 * gaps drawn evenly from [lo, hi] ms. Batches at gaps near the bucket's width put a small batch
 * early in a bucket and a large one late; an estimate that spreads the bucket's own counts
 * between its first and last admission lets the large one slide out before it leaves the window
 * (1,142 at k = 10 before). Own counts are kept by eighth of a bucket with each eighth's last
 * admission time (KeyWindow.ownLeft): no row may pass L. Prints the worst rolling 1 s over 20
 * runs of 20 s each (L = 1,000), and what was admitted a second.
 *
 *   npm run bench:own-bursts
 */
import { ManualClock } from '../src/clock.js';
import { Engine } from '../src/decision/engine.js';
import { worstRolling } from '../src/sim/metrics.js';
import { printTable } from './table.js';

const T0 = 1_700_000_000_000;
const L = 1_000;
const RUNS = 20;
const SECONDS = 20;

function xorshift(seed: number): () => number {
  let s = seed | 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4_294_967_296;
  };
}

function row(k: number, lo: number, hi: number): (string | number)[] {
  const rnd = xorshift(7);
  let worst = 0;
  let admitted = 0;
  for (let run = 0; run < RUNS; run++) {
    const clock = new ManualClock(T0);
    const e = new Engine({ policies: [{ name: 'p', limit: L, windowMs: 1_000, buckets: k }], clock });
    const at: number[] = [];
    let t = 0;
    let sent = 0;
    while (t < SECONDS * 1_000) {
      t += lo + rnd() * (hi - lo);
      const due = Math.floor(t * 2) - sent;
      sent += due;
      clock.set(T0 + t);
      for (let i = 0; i < due; i++) if (e.check('p', 'k').allowed) at.push(t);
    }
    admitted += at.length;
    worst = Math.max(worst, worstRolling(at, 1_000));
  }
  return [
    k,
    `${lo}-${hi}`,
    worst,
    `${(((worst - L) / L) * 100).toFixed(1)}%`,
    Math.round(admitted / RUNS / SECONDS),
  ];
}

console.log(
  `one engine, its own admissions in batches: L = ${L} per 1 s offered at 2,000/s, ${RUNS} runs of ${SECONDS} s (worst over the runs)`,
);
const rows: (string | number)[][] = [];
for (const k of [10, 20, 50])
  for (const [lo, hi] of [
    [0.5, 0.5],
    [2, 30],
    [10, 120],
  ] as const)
    rows.push(row(k, lo, hi));
printTable(['buckets', 'gaps ms', 'worst 1 s', 'over L', 'admitted/s'], rows);
