/**
 * The engine's counted check (Engine.checkAllCounted, src/envoy/counting.ts),
 * which the RLS service counts with: hits over the limit count, up to the
 * point where the node's own count reaches L, so a peer never sees counts it
 * would cap (and never puts the node on ignore for them).
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import type { PolicySpec } from '../../src/types.js';
import { gossip, T0 } from '../decision/helpers.js';

const P: PolicySpec[] = [
  { name: 'a', limit: 20, windowMs: 60_000, buckets: 10, maxCost: 1_000_000_000 },
  { name: 'b', limit: 10, windowMs: 60_000, buckets: 10, maxCost: 1_000_000_000 },
];

function engines(n: number) {
  const clock = new ManualClock(T0);
  const es = Array.from({ length: n }, (_, i) => new Engine({ policies: P, clock, nodeId: `n${i}` }));
  return { es, clock };
}

describe('Engine.checkAllCounted', () => {
  it('every: a refused request still counts on every pair; a forced count stops at L', () => {
    const [e] = engines(1).es as [Engine];
    const d = e.checkAllCounted(
      [
        ['a', 'k'],
        ['b', 'k'],
      ],
      [5, 11],
      'every',
    );
    expect(d.allowed).toBe(false);
    expect(d.outcomes.map((o) => o.limited)).toEqual([false, true]);
    expect(e.estimate('a', 'k')).toBe(5);
    // b took 10 of its 11: a node's own count never passes L
    expect(e.estimate('b', 'k')).toBe(10);
    e.checkAllCounted([['b', 'k']], [50], 'every');
    expect(e.estimate('b', 'k')).toBe(10);
  });

  it('refused: when a pair refuses, only the refusing pairs count; `over` refuses for the caller', () => {
    const [e] = engines(1).es as [Engine];
    const pairs = [
      ['a', 'k'],
      ['b', 'k'],
    ] as const;
    e.checkAllCounted(pairs, [1, 9], 'refused');
    expect([e.estimate('a', 'k'), e.estimate('b', 'k')]).toEqual([1, 9]);
    const d = e.checkAllCounted(pairs, [1, 2], 'refused');
    expect(d.allowed).toBe(false);
    expect([e.estimate('a', 'k'), e.estimate('b', 'k')]).toEqual([1, 10]);
    const z = e.checkAllCounted([['a', 'k']], [1], 'refused', true);
    expect(z.allowed).toBe(false);
    expect(e.estimate('a', 'k')).toBe(1);
    // a cost of 0 is a look: never spent
    e.checkAllCounted([['a', 'k']], [0], 'every');
    expect(e.estimate('a', 'k')).toBe(1);
  });

  it('a node that counted hits over the limit gossips counts its peer takes whole: nothing capped', () => {
    const { es } = engines(2);
    const [x, y] = es as [Engine, Engine];
    for (let i = 0; i < 5; i++) x.checkAllCounted([['a', 'k']], [15], 'every');
    expect(x.estimate('a', 'k')).toBe(20);
    expect(gossip(x, y)).toEqual([{ ok: true }]);
    expect(y.estimate('a', 'k')).toBe(20);
    expect(y.stats().capped).toBe(0);
    expect(y.checkAll([['a', 'k']], [1]).allowed).toBe(false);
  });
});
