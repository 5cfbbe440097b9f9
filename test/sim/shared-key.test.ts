import { describe, expect, it } from 'vitest';
import { slidingLogAdmits, worstRolling } from '../../src/sim/metrics.js';
import { Prng } from '../../src/sim/prng.js';
import { Simulator } from '../../src/sim/simulator.js';

const policy = {
  name: 'p',
  limit: 20,
  windowMs: 10_000,
  buckets: 10,
  overAdmission: 'controlled' as const,
  fallback: true,
};

function mesh(nodes: number) {
  return new Simulator({
    nodes,
    policies: [policy],
    gossipIntervalMs: 100,
    delayMs: 10,
    seed: 3,
    engine: { expectedMembers: nodes },
  });
}

describe('controlled rule: a key shared by demand stays within L', () => {
  it('a key at 4 times its limit: the total stays within L, and most of what an exact limiter admits', () => {
    const sim = mesh(8);
    const prng = new Prng(4);
    const arrivals: number[] = [];
    const admitted: number[] = [];
    // 8 requests a second over the nodes for 30 s: 80 per window against L = 20
    for (let i = 0; i < 240; i++) {
      const at = i * 125;
      sim.runUntil(at);
      arrivals.push(at);
      if (sim.request(Math.floor(prng.next() * 8), 'p', 'user:7').allowed) admitted.push(at);
    }
    expect(worstRolling(admitted, policy.windowMs)).toBeLessThanOrEqual(policy.limit);
    expect(admitted.length).toBeGreaterThan(
      0.5 * slidingLogAdmits(arrivals, policy.limit, policy.windowMs).length,
    );
  });

  it('one node bursts on a key while the seven others make their first requests: never past L', () => {
    // A node holding nearly all the demand bursts 30 while each other node asks twice, over
    // 20 phases: the pattern where views of the shares differ most between nodes.
    let worst = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const sim = new Simulator({
        nodes: 8,
        policies: [policy],
        gossipIntervalMs: 100,
        delayMs: 10,
        seed,
        engine: { expectedMembers: 8 },
      });
      const prng = new Prng(seed);
      const admitted: number[] = [];
      let t = 2000 + Math.floor(prng.next() * 100);
      for (let i = 0; i < 8; i++) {
        t += 500;
        sim.runUntil(t);
        if (sim.request(0, 'p', 'k').allowed) admitted.push(t);
      }
      const events: [number, number][] = [];
      for (let i = 0; i < 30; i++) events.push([t + 100 + prng.next() * 100, 0]);
      for (let n = 1; n < 8; n++) for (let j = 0; j < 2; j++) events.push([t + 100 + prng.next() * 100, n]);
      events.sort((a, b) => a[0] - b[0]);
      for (const [at, n] of events) {
        sim.runUntil(at);
        if (sim.request(n, 'p', 'k').allowed) admitted.push(at);
      }
      worst = Math.max(worst, worstRolling(admitted, policy.windowMs));
    }
    expect(worst).toBeLessThanOrEqual(policy.limit);
    expect(worst).toBeGreaterThan(10);
  });
});
