import { describe, expect, it } from 'vitest';
import { Simulator } from '../../src/sim/simulator.js';

/**
 * Gossip carries only what changed (format 4), so a lost message is repaired by the next one
 * that carries the key, or on request (a nack): whatever the loss, every node ends up holding
 * every other node's counts of every key, and no count is lost for good.
 */
describe('loss repair with compact entries', () => {
  for (const loss of [0.05, 0.2, 0.5]) {
    it(`at ${loss * 100} % loss every node ends up with every count of every key`, () => {
      const sim = new Simulator({
        nodes: 8,
        policies: [{ name: 'p', limit: 1000, windowMs: 10_000, buckets: 10 }],
        gossipIntervalMs: 10,
        delayMs: 5,
        loss,
        seed: 3,
        // no anti-entropy round in the run: repairs come from the next messages and nacks alone
        engine: { antiEntropyTicks: 1_000_000 },
      });
      const admitted = new Map<string, number>();
      let t = 0;
      // 600 requests on 200 keys over 3 s (most keys touched once or twice), then quiet
      for (let i = 0; i < 600; i++) {
        t = i * 5;
        sim.runUntil(t);
        const key = `k${(i * 7) % 200}`;
        if (sim.request(i % 8, 'p', key).allowed) admitted.set(key, (admitted.get(key) ?? 0) + 1);
      }
      sim.runUntil(t + 1500);
      expect(sim.lost).toBeGreaterThan(0);
      let wrong = 0;
      for (const [key, n] of admitted)
        for (const e of sim.engines) if (Math.abs(e.estimate('p', key) - n) > 1e-9) wrong++;
      expect(wrong).toBe(0);
    });
  }
});
