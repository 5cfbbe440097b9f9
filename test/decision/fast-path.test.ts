import { describe, expect, it } from 'vitest';
import type { Engine } from '../../src/decision/engine.js';
import { Prng } from '../../src/sim/prng.js';
import { Simulator } from '../../src/sim/simulator.js';

/**
 * The hot key's fast path (Rule.evaluateFast, PolicyRuntime.fastKs): a request within what the last
 * full evaluation left, on the same view and in the same bucket, passes without the full
 * evaluation. It must decide every request as the full evaluation does.
 */
describe('the fast path decides as the full evaluation does', () => {
  function run(fast: boolean, seed: number, costs = false): string {
    const sim = new Simulator({
      nodes: 4,
      policies: [{ name: 'p', limit: 200, windowMs: 1_000 }],
      gossipIntervalMs: 100,
      delayMs: 10,
      jitterMs: 5,
      seed,
      engine: { expectedMembers: 4 },
    });
    for (const e of sim.engines) (e as unknown as { rule: { fastPath: boolean } }).rule.fastPath = fast;
    const prng = new Prng(seed);
    const out: string[] = [];
    let t = 0;
    for (let i = 0; i < 20_000; i++) {
      // bursts and lulls on a hot key, now and then another key in between
      t += prng.next() < 0.05 ? prng.next() * 200 : prng.next() * 0.5;
      sim.runUntil(t);
      const node = Math.floor(prng.next() * 4);
      const key = prng.next() < 0.9 ? 'hot' : `k${Math.floor(prng.next() * 5)}`;
      // costs above 1 now and then: one the fast path's room cannot hold is decided in full
      const cost = costs && prng.next() < 0.3 ? 1 + Math.floor(prng.next() * 6) : 1;
      const d = sim.request(node, 'p', key, cost);
      out.push(d.allowed ? '1' : '0');
    }
    return out.join('');
  }

  it('the same decisions, request by request', () => {
    for (const seed of [1, 2, 3]) expect(run(true, seed)).toBe(run(false, seed));
  });

  it('the same decisions with costs above 1 (a full evaluation of the key drops the room the fast path kept)', () => {
    // before: a request the room could not hold, after another key's, was decided in full and
    // spent without the room knowing; the next ones passed on it (4 and 5 of 20,000 decisions
    // differed on seeds 1 and 3)
    for (const seed of [1, 3, 4]) expect(run(true, seed, true)).toBe(run(false, seed, true));
  });

  it('is taken on a hot key (the bench:decide shape)', () => {
    const sim = new Simulator({
      nodes: 2,
      policies: [{ name: 'p', limit: 1_000_000, windowMs: 1_000 }],
      gossipIntervalMs: 100,
      delayMs: 10,
    });
    sim.runUntil(1_000);
    const e = sim.engines[0] as Engine;
    for (let i = 0; i < 100; i++) e.check('p', 'hot');
    const rt = (
      e as unknown as { core: { rtByName: Map<string, { fastKs: unknown; fastRoom: number }> } }
    ).core.rtByName.get('p')!;
    expect(rt.fastKs).toBeDefined();
    expect(rt.fastRoom).toBeGreaterThan(100);
  });
});
