import { describe, expect, it } from 'vitest';
import { wholeUnits } from '../../src/decision/rule.js';
import { slidingLogAdmits, worstRolling } from '../../src/sim/metrics.js';
import { Prng } from '../../src/sim/prng.js';
import { Simulator } from '../../src/sim/simulator.js';

describe('wholeUnits: a headroom dealt in whole units over slices', () => {
  it('sums to floor(H) or floor(H) + 1 over slices that tile [0, 1), whatever the phase', () => {
    const prng = new Prng(3);
    for (let trial = 0; trial < 200; trial++) {
      const n = 1 + Math.floor(prng.next() * 300);
      const w = Array.from({ length: n }, () => prng.next());
      const total = w.reduce((a, b) => a + b, 0);
      const H = prng.next() * 50;
      const phase = prng.next();
      let before = 0;
      let sum = 0;
      for (const x of w) {
        const units = wholeUnits(before / total, x / total, H, phase);
        expect(units).toBeGreaterThanOrEqual(0);
        expect(units).toBeLessThanOrEqual(Math.ceil((x / total) * H));
        sum += units;
        before += x;
      }
      expect(sum).toBeGreaterThanOrEqual(Math.floor(H));
      expect(sum).toBeLessThanOrEqual(Math.floor(H) + 1);
    }
  });

  it('gives nothing on no headroom or no share', () => {
    expect(wholeUnits(0, 0.5, 0, 0.3)).toBe(0);
    expect(wholeUnits(0.5, 0, 10, 0.3)).toBe(0);
    expect(wholeUnits(0, 0.5, -3, 0.3)).toBe(0);
  });
});

/** One hot key offered at every node: L per W, `rate` requests a second spread over the nodes. */
function hotKey(nodes: number, limit: number, seconds: number) {
  const windowMs = 10_000;
  const sim = new Simulator({
    nodes,
    policies: [{ name: 'p', limit, windowMs, buckets: 10, overAdmission: 'controlled', fallback: true }],
    gossipIntervalMs: 100,
    delayMs: 10,
    seed: 5,
    engine: { expectedMembers: nodes },
  });
  const prng = new Prng(9);
  const arrivals: number[] = [];
  const admitted: number[] = [];
  const rate = 1000;
  for (let i = 0; i < seconds * rate; i++) {
    const t = i * (1000 / rate);
    sim.runUntil(t);
    arrivals.push(t);
    if (sim.request(Math.floor(prng.next() * nodes), 'p', 'login:alice').allowed) admitted.push(t);
  }
  return { admitted, exact: slidingLogAdmits(arrivals, limit, windowMs).length, windowMs };
}

describe('shares thinner than a unit (L under N)', () => {
  it('64 nodes, L = 20 per 10 s on a key every node offers: admits, and never past L in any window', () => {
    // Each node's slice of the window is 20/64 of a unit: the fractional rule admits nothing
    // once every node has heard every other. With whole units dealt on the settled view, the
    // window's 20 units go to 20 of the nodes.
    const { admitted, exact, windowMs } = hotKey(64, 20, 40);
    expect(worstRolling(admitted, windowMs)).toBeLessThanOrEqual(20);
    expect(admitted.length).toBeGreaterThanOrEqual(exact / 2);
  });

  it('8 nodes, L = 20 per 10 s: close to an exact limiter, never past L', () => {
    const { admitted, exact, windowMs } = hotKey(8, 20, 40);
    expect(worstRolling(admitted, windowMs)).toBeLessThanOrEqual(20);
    expect(admitted.length).toBeGreaterThanOrEqual(0.85 * exact);
  });
});
