/**
 * One node reports a request on a key, then seven other nodes burst 5 each (0, 1 or 5 ms
 * apart) and the first bursts 30: whether any window passes L = 20 at 8 nodes, over 75 seeds
 * for each stagger, with and without jitter and loss, on both routings. A measurement of how
 * nodes that start at once on a key disagree about who has reported it; it prints what it finds.
 *
 *   npx tsx bench/cold-burst.ts
 */
import { worstRolling } from '../src/sim/metrics.js';
import { Simulator } from '../src/sim/simulator.js';
import { coldBurst } from '../src/sim/trace.js';

const L = 20;
const W = 10_000;
console.log('jitter ms  loss  routing  runs past L  worst window  admitted');
for (const [jitterMs, loss] of [
  [0, 0],
  [20, 0.1],
  [40, 0.25],
] as const) {
  for (const routing of ['mixed', 'spread'] as const) {
    let over = 0;
    let worst = 0;
    let admittedAll = 0;
    let runs = 0;
    for (let seed = 1; seed <= 75; seed++) {
      for (const stagger of [0, 1, 5]) {
        const sim = new Simulator({
          nodes: 8,
          policies: [
            {
              name: 'p',
              limit: L,
              windowMs: W,
              buckets: 10,
              overAdmission: 'controlled',
              fallback: true,
              routing,
            },
          ],
          gossipIntervalMs: 100,
          delayMs: 10,
          jitterMs,
          loss,
          seed,
          engine: { expectedMembers: 8 },
        });
        const admitted = coldBurst(sim, 'p', 'k', 1000, 1100 + ((seed * 7) % 400), stagger);
        const w = worstRolling(admitted, W);
        runs++;
        admittedAll += admitted.length;
        if (w > L) over++;
        if (w > worst) worst = w;
      }
    }
    console.log(
      `${String(jitterMs).padStart(9)}  ${String(loss).padStart(4)}  ${routing.padStart(7)}  ${`${over}/${runs}`.padStart(11)}  ${String(worst).padStart(12)}  ${String(admittedAll).padStart(8)}`,
    );
  }
}
