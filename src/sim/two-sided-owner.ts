import type { PolicySpec } from '../types.js';
import { OwnerSim } from './owner-sim.js';
import type { SimOptions } from './simulator.js';
import { type Arrivals, type LimiterRun, newLimiterRun, recordOutcome } from './two-sided.js';

/**
 * {@link runSim} with owner placement on (issue 27): the same arrivals on an {@link OwnerSim},
 * where a request for a key owned by another node is asked of it over the simulated link (one
 * round trip of 2 d), and decided here at once otherwise. Per arrival: admitted, the denial's
 * rule, the calls it made (0 or 1) and the latency they added (the wait for the owner's answer,
 * or for the deadline). An admission is placed at its arrival (an ask's is spent at the owner d
 * later), as for every other limiter of the bench.
 */
export function runOwnerSim(
  opts: Omit<SimOptions, 'policies'>,
  policy: PolicySpec,
  arrivals: Arrivals,
): LimiterRun {
  const s = new OwnerSim({ ...opts, policies: [policy] });
  const n = arrivals.t.length;
  const run = newLimiterRun(n);
  const code = new Map<string, number>();
  let decided = 0;
  for (let i = 0; i < n; i++) {
    s.sim.runUntil(arrivals.t[i]!);
    s.request(arrivals.node[i]!, policy.name, arrivals.keys[arrivals.key[i]!]!, 1, (o) => {
      decided++;
      run.calls[i] = o.calls;
      run.latencyMs[i] = o.answeredAt - o.sentAt;
      recordOutcome(run, code, i, o.decision);
    });
  }
  // every ask ends by its deadline
  const last = n > 0 ? arrivals.t[n - 1]! : 0;
  s.sim.runUntil(last + (policy.ownerDeadlineMs ?? 50) + 2 * opts.delayMs + 1);
  if (decided !== n) throw new Error(`${n - decided} of ${n} requests were never decided`);
  return run;
}
