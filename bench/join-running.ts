/**
 * A pod that joins a running mesh and takes requests at once (docs/decision-rule.md, "Starting":
 * the start gate, which keeps it from deciding until the members it hears have heard it; before
 * the gate it took its start-up share on top of L), in the simulator with the production engine:
 * 8 nodes (defaultMesh), one key of L = 1,000 per 1 s offered 4,000/s (node 0 40 %, the other
 * seven 60 % evenly), node 0 silent from 3 s (killed: no requests, no messages) and replaced at
 * 9 s by a fresh pod that pulls its peers' state by sync and takes node 0's requests at once.
 * Prints, per seed, the worst rolling second over the run and from 1 s before the restart to
 * 2 s after it, and what the new pod admitted in its first second.
 *
 * `--ready-ms N`: the new pod takes requests N ms after it joined (as a readiness gate would).
 *
 *   npm run bench:join-running [-- --seeds 5] [--offered 4000] [--no-sync] [--ready-ms 0]
 */
import { parseArgs } from 'node:util';
import { worstRolling } from '../src/sim/metrics.js';
import { Prng } from '../src/sim/prng.js';
import { Simulator } from '../src/sim/simulator.js';
import { defaultMesh } from '../src/sim/two-sided.js';
import { printTable } from './table.js';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '5' },
    offered: { type: 'string', default: '4000' },
    'no-sync': { type: 'boolean', default: false },
    'ready-ms': { type: 'string', default: '0' },
  },
});
const SEEDS = Number(values.seeds);
/** The new pod takes its first request this long after it joined (0: at once). */
const READY_MS = Number(values['ready-ms']);
const OFFERED = Number(values.offered);
const L = 1000;
const KILL_AT = 3000;
const BACK_AT = 9000;
const END = 12_000;

const rows: (string | number)[][] = [];
for (let seed = 1; seed <= SEEDS; seed++) {
  const sim = new Simulator({
    ...defaultMesh(8),
    seed,
    policies: [{ name: 'g', limit: L, windowMs: 1000 }],
    cuts: [{ node: 0, fromMs: KILL_AT, toMs: BACK_AT }],
  });
  const prng = new Prng(seed);
  const admitted: number[] = [];
  let replaced = false;
  let firstSecond = 0;
  const step = 1000 / OFFERED;
  for (let t = 0; t < END; t += step) {
    sim.runUntil(t);
    if (!replaced && t >= BACK_AT) {
      sim.replace(0, { sync: !values['no-sync'] });
      replaced = true;
    }
    const node = prng.next() < 0.4 ? 0 : 1 + Math.floor(prng.next() * 7);
    if (node === 0 && t >= KILL_AT && t < BACK_AT + READY_MS) continue;
    if (!sim.request(node, 'g', 'k').allowed) continue;
    admitted.push(t);
    if (node === 0 && t >= BACK_AT && t < BACK_AT + 1000) firstSecond++;
  }
  const around = admitted.filter((t) => t >= BACK_AT - 1000 && t < BACK_AT + 2000);
  rows.push([seed, worstRolling(admitted, 1000) - L, worstRolling(around, 1000) - L, firstSecond]);
}
console.log(
  `a pod replaced in a running mesh of 8: L = ${L} per 1 s, ${OFFERED}/s offered (node 0 40 %), node 0 silent 3-9 s, then a fresh pod ${values['no-sync'] ? 'without' : 'with'} its sync, taking requests ${READY_MS > 0 ? `${READY_MS} ms after it joined` : 'at once'}`,
);
printTable(['seed', 'worst 1 s - L', 'around the restart', 'new pod, 1st s'], rows);
