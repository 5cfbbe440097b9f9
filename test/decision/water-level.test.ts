import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { waterLevel } from '../../src/decision/rule.js';

/** Sharer 0's share of the headroom as Rule.computeShare makes it, from the demands a node holds. */
function share(d: readonly number[], L: number): number {
  const total = d.reduce((a, b) => a + b, 0);
  const r = total < L ? waterLevel(d[0]!, d.slice(1), d.length - 1, L, []) : 0;
  const w = d.map((x) => Math.max(x, r));
  return w[0]! / w.reduce((a, b) => a + b, 0);
}

describe('shares of the headroom: the room by water-filling (Rule.computeShare)', () => {
  it('the weights max(demand, level) fill L where the demands leave room', () => {
    expect(waterLevel(0, [0, 0, 0], 3, 100, [])).toBe(25);
    expect(waterLevel(50, [0, 0, 0], 3, 100, [])).toBeCloseTo(50 / 3, 9);
    expect(waterLevel(10, [20, 30, 35], 3, 100, [])).toBe(15);
  });

  it('a node’s share never rises when another’s demand rises (so shares on views that differ sum to at most one)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 150 }), { minLength: 2, maxLength: 12 }),
        fc.integer({ min: 1, max: 11 }),
        fc.integer({ min: 1, max: 100 }),
        (d, j, up) => {
          const L = 100;
          const i = j % d.length === 0 ? 1 : j % d.length;
          const raised = [...d];
          raised[i] = raised[i]! + up;
          return share(raised, L) <= share(d, L) + 1e-12;
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('an equal part of L less the demands did not: 50 of L = 100 ours, 3 peers at 0, one at 5', () => {
    const oldShare = (d: number[]) => {
      const room = (100 - d.reduce((a, b) => a + b, 0)) / d.length;
      const w = d.map((x) => Math.max(x, room));
      return w[0]! / w.reduce((a, b) => a + b, 0);
    };
    expect(oldShare([50, 5, 0, 0])).toBeGreaterThan(oldShare([50, 0, 0, 0]));
    expect(share([50, 5, 0, 0], 100)).toBeLessThanOrEqual(share([50, 0, 0, 0], 100));
  });
});
