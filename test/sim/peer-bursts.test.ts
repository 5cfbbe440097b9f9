import { describe, expect, it } from 'vitest';
import { worstRolling } from '../../src/sim/metrics.js';
import { Simulator } from '../../src/sim/simulator.js';

/**
 * A peer's burst late in a long bucket (a per-minute limit: W = 60 s, k = 10, buckets of 6 s),
 * then traffic on other nodes once that bucket is the oldest. The burst's counts carry no times;
 * spread evenly over the bucket they slid out from its start, and the other nodes admitted the
 * part that had "left" while the burst was still inside (KeyWindow: peers' spans).
 */
function burstThenTraffic(opts: {
  nodes: number;
  g: number;
  at: number;
  burst: number;
  routing?: 'mixed' | 'spread';
}): {
  admitted: number[];
  limit: number;
} {
  const limit = 100;
  const W = 60_000;
  const sim = new Simulator({
    nodes: opts.nodes,
    policies: [
      {
        name: 'p',
        limit,
        windowMs: W,
        buckets: 10,
        overAdmission: 'controlled',
        fallback: true,
        ...(opts.routing ? { routing: opts.routing } : {}),
      },
    ],
    gossipIntervalMs: opts.g,
    delayMs: 10,
    seed: 3,
    engine: { expectedMembers: opts.nodes },
  });
  const admitted: number[] = [];
  // node 0 bursts at `at` ms
  sim.runUntil(opts.at);
  for (let i = 0; i < opts.burst; i++) if (sim.request(0, 'p', 'k').allowed) admitted.push(opts.at);
  // from W on, the other nodes are offered 20 a second each, for 10 s
  for (let t = W; t < W + 10_000; t += 50) {
    sim.runUntil(t);
    const node = 1 + ((t / 50) % (opts.nodes - 1));
    if (sim.request(node, 'p', 'k').allowed) admitted.push(t);
  }
  return { admitted, limit };
}

describe('peer bursts late in a long bucket', () => {
  it('stay counted until they leave the window: no window past L', () => {
    for (const at of [5_900, 5_500, 3_000, 11_950]) {
      for (const nodes of [2, 4, 8]) {
        const { admitted, limit } = burstThenTraffic({ nodes, g: 100, at, burst: 90 });
        expect(admitted.filter((t) => t === at).length).toBe(90);
        expect(worstRolling(admitted, 60_000), `burst at ${at} ms on ${nodes} nodes`).toBeLessThanOrEqual(
          limit,
        );
      }
    }
  });

  it('leave as soon as the window passes when they arrived', () => {
    // the burst at 5.9 s is out of the window from 65.9 s: the other nodes then admit the
    // limit again, before the bucket has wholly left (66 s) and well before a bucket-whole count
    const { admitted, limit } = burstThenTraffic({ nodes: 4, g: 100, at: 5_900, burst: 90 });
    const after = admitted.filter((t) => t >= 60_000);
    // at most the 10 of L the burst left before it left, and more once it has, before its
    // bucket has wholly left the window (66 s: counting the bucket whole would wait for that)
    expect(after.filter((t) => t < 65_900).length).toBeLessThanOrEqual(limit - 90);
    expect(after.filter((t) => t >= 65_900 && t < 66_000).length).toBeGreaterThan(0);
  });
});
