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
function hotKey(nodes: number, limit: number, seconds: number, rate = 1000) {
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

  it('8 nodes, a key each node offers less than L but more than half its fair share: the units settle', () => {
    // 8 a second over 8 nodes: about 10 per node per window against L = 20. Demand that noisy
    // moved slices cut by demand every tick, so the units never settled and the fractional rule
    // kept about N units of the headroom unused. Cut by demand up to half a fair share, the
    // slices are equal and stay put.
    const { admitted, exact, windowMs } = hotKey(8, 20, 60, 8);
    expect(worstRolling(admitted, windowMs)).toBeLessThanOrEqual(20);
    expect(admitted.length).toBeGreaterThanOrEqual(0.85 * exact);
  });

  it('100 keys at 8 nodes running at L on whole units: never one past L in any window', () => {
    // A key at L on whole units is where the counter's uniform weight on peers' oldest bucket
    // would let one more in; there they count whole.
    const sim = new Simulator({
      nodes: 8,
      policies: [
        { name: 'p', limit: 20, windowMs: 10_000, buckets: 10, overAdmission: 'controlled', fallback: true },
      ],
      gossipIntervalMs: 100,
      delayMs: 10,
      seed: 7,
      engine: { expectedMembers: 8 },
    });
    const prng = new Prng(11);
    const K = 100;
    let s = 0;
    const cdf = Array.from({ length: K }, (_, r) => (s += 1 / (r + 1)));
    const admitted: number[][] = Array.from({ length: K }, () => []);
    let total = 0;
    for (let i = 0; i < 30 * 1000; i++) {
      const t = i;
      const node = Math.floor(prng.next() * 8);
      const u = prng.next() * s;
      const k = cdf.findIndex((c) => c >= u);
      sim.runUntil(t);
      if (sim.request(node, 'p', `k${k}`).allowed) {
        admitted[k]!.push(t);
        total++;
      }
    }
    for (const a of admitted) expect(worstRolling(a, 10_000)).toBeLessThanOrEqual(20);
    // 100 keys at 20 per 10 s over 30 s: at most 100 * 20 * 4 (the windows a 30 s run touches)
    expect(total).toBeGreaterThan(0.6 * K * 20 * 3);
  });
});
