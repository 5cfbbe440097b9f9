import { describe, expect, it } from 'vitest';
import { worstRolling } from '../../src/sim/metrics.js';
import { Simulator } from '../../src/sim/simulator.js';

/**
 * Aligned rounds (docs/decision-rule.md, "Rounds"): a count a node admits after its message of a
 * round and before the round begins is checked against the headroom of the line before, and
 * stays recent past the round, when the counts of the round before join the old ones. An
 * adversary spends early in each round on some nodes and bursts in those last d ms on the
 * others, 30 rounds in a row, in a window of 10 s: the worst window stays at L + 1 (L = 100).
 */
describe('aligned rounds: bursts between a node’s message of a round and the round', () => {
  for (const n of [2, 3, 8]) {
    it(`${n} nodes: no window past L + 1`, () => {
      let worst = 0;
      for (const early of [10, 60])
        for (const late of [91, 95, 99])
          for (const spenders of [1, Math.floor(n / 2)]) {
            const sim = new Simulator({
              nodes: n,
              policies: [{ name: 'p', limit: 100, windowMs: 10_000 }],
              gossipIntervalMs: 100,
              delayMs: 10,
              engine: { expectedMembers: n },
            });
            const admitted: number[] = [];
            const burst = (node: number, k: number) => {
              for (let i = 0; i < k; i++) if (sim.request(node, 'p', 'k').allowed) admitted.push(sim.now);
            };
            for (let r = 0; r < 30; r++) {
              const b = 1_000 + r * 100;
              sim.runUntil(b + early);
              for (let i = 0; i < spenders; i++) burst(i, 50);
              sim.runUntil(b + late);
              for (let i = spenders; i < n; i++) burst(i, 50);
            }
            sim.runUntil(20_000);
            worst = Math.max(worst, worstRolling(admitted, 10_000));
          }
      expect(worst).toBeLessThanOrEqual(101);
    });
  }
});
