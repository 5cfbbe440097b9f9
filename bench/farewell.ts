/**
 * A graceful stop's farewell against a kill, in the simulator (production engine):
 *
 * - out: N nodes on one key at twice L (L = 1,000 per 1 s, k = 50, g = 100 ms, d = 10 ms),
 *   requests spread over the serving nodes; node 1 stops at 5 s (its farewell, or killed:
 *   silent) and a successor with a fresh id takes its place at 10 s (serving 100 ms later).
 *   Admitted per second while it is out (5 s to 10 s) and after, and the worst rolling 1 s.
 * - pinned: a key pinned to node 0 of 4 (L = 20 per 10 s, 20 requests a second), node 0
 *   replaced by a fresh pod the moment it stops (3 times 12 s apart, or every 1.5 s), the
 *   successor serving once its sync is answered (100 ms): worst window and admitted over 40 s.
 *
 *   npm run bench:farewell
 */
import { worstRolling } from '../src/sim/metrics.js';
import { Simulator } from '../src/sim/simulator.js';
import type { PolicySpec } from '../src/types.js';
import { printTable } from './table.js';

/** Rows of one shape as a table: the first row's keys are the header. */
function printRecords(rows: readonly Record<string, string | number>[]): void {
  const header = Object.keys(rows[0]!);
  printTable(
    header,
    rows.map((r) => header.map((h) => r[h]!)),
  );
}

/** How long a successor takes to join (its sync answered) before it serves. */
const READY_MS = 100;

type Stop = 'farewell' | 'killed';

function out(nodes: number, fanout: number, stop: Stop): Record<string, string | number> {
  const policies: PolicySpec[] = [
    { name: 'p', limit: 1_000, windowMs: 1_000, buckets: 50, overAdmission: 'controlled', fallback: true },
  ];
  const sim = new Simulator({
    nodes,
    policies,
    gossipIntervalMs: 100,
    delayMs: 10,
    seed: 5,
    engine: { expectedMembers: nodes },
    ...(fanout > 0 ? { relay: { fanout } } : {}),
    cuts: stop === 'killed' ? [{ node: 1, fromMs: 5_000, toMs: 10_000 }] : [],
  });
  const perSecond = new Array<number>(16).fill(0);
  const admitted: number[] = [];
  let stopped = false;
  let back = false;
  for (let t = 0; t < 16_000; t += 0.5) {
    sim.runUntil(t);
    if (!stopped && t >= 5_000) {
      stopped = true;
      if (stop === 'farewell') sim.leave(1);
    }
    if (!back && t >= 10_000) {
      back = true;
      sim.replace(1);
    }
    let node = Math.floor((t * 2) % nodes);
    if (node === 1 && t >= 5_000 && t < 10_000 + READY_MS) node = 2 + (Math.floor(t) % (nodes - 2));
    if (sim.request(node, 'p', 'k').allowed) {
      perSecond[Math.floor(t / 1_000)]!++;
      admitted.push(t);
    }
  }
  const mean = (from: number, to: number) =>
    Math.round(perSecond.slice(from, to).reduce((s, x) => s + x, 0) / (to - from));
  return {
    nodes,
    gossip: fanout > 0 ? `relay f=${fanout}` : 'broadcast',
    stop,
    'before /s': mean(1, 5),
    'out /s': mean(5, 10),
    'out min /s': Math.min(...perSecond.slice(5, 10)),
    'after /s': mean(11, 16),
    'worst 1s': worstRolling(admitted, 1_000),
  };
}

function pinned(replaceAt: number[], stop: Stop): Record<string, string | number> {
  const L = 20;
  const policies: PolicySpec[] = [
    {
      name: 'p',
      limit: L,
      windowMs: 10_000,
      buckets: 10,
      overAdmission: 'controlled',
      fallback: true,
    },
  ];
  const sim = new Simulator({
    nodes: 4,
    policies,
    gossipIntervalMs: 100,
    delayMs: 10,
    seed: 3,
    engine: { expectedMembers: 4 },
  });
  const admitted: number[] = [];
  let next = 0;
  for (let t = 0; t < 40_000; t += 50) {
    sim.runUntil(t);
    if (next < replaceAt.length && t >= replaceAt[next]!) {
      sim.replace(0, { graceful: stop === 'farewell' });
      next++;
    }
    if (next > 0 && t < replaceAt[next - 1]! + READY_MS) continue;
    if (sim.request(0, 'p', 'pinned').allowed) admitted.push(t);
  }
  return {
    replaced: replaceAt.length === 3 ? '3 times, 12 s apart' : 'every 1.5 s, 8 times',
    stop,
    'worst window (L = 20)': worstRolling(admitted, 10_000),
    admitted: admitted.length,
  };
}

console.log(
  'a node out for 5 s (farewell or killed), then a fresh successor: L = 1,000 per 1 s at twice L, g = 100 ms, d = 10 ms (simulator, production engine)',
);
const outRows: Record<string, string | number>[] = [];
for (const [nodes, fanout] of [
  [4, 0],
  [16, 0],
  [16, 3],
] as const)
  for (const stop of ['killed', 'farewell'] as const) outRows.push(out(nodes, fanout, stop));
printRecords(outRows);
console.log('');
console.log(
  'a key pinned to the pod replaced, its successor starting the moment it stops (4 nodes, L = 20 per 10 s, 40 s)',
);
const pinRows: Record<string, string | number>[] = [];
for (const at of [
  [5_000, 17_000, 29_000],
  [3_000, 4_500, 6_000, 7_500, 9_000, 10_500, 12_000, 13_500],
])
  for (const stop of ['killed', 'farewell'] as const) pinRows.push(pinned(at, stop));
printRecords(pinRows);
