import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { isRateMeshError } from '../../src/errors.js';

function engine() {
  return new Engine({
    gossipIntervalMs: 10,
    policies: [
      { name: 'a', limit: 5, windowMs: 1000 },
      { name: 'b', limit: 3, windowMs: 1000, scope: 'local', algorithm: 'gcra' },
    ],
    clock: new ManualClock(1_000_000),
  });
}

describe('checkAll with one cost per pair', () => {
  it('spends each pair its own cost; 0 evaluates without spending', () => {
    const e = engine();
    const d = e.checkAll(
      [
        ['a', 'k'],
        ['b', 'k'],
      ],
      [2, 0],
    );
    expect(d.allowed).toBe(true);
    expect(d.outcomes.map((o) => o.remaining)).toEqual([3, 3]);
    expect(e.estimate('a', 'k')).toBe(2);
    expect(e.check('b', 'k', 3).allowed).toBe(true); // nothing was spent on b
    expect(e.checkAll([['a', 'k']], [0]).outcomes[0]!.remaining).toBe(3);
    expect(e.estimate('a', 'k')).toBe(2);
  });

  it('spends nothing when one pair refuses', () => {
    const e = engine();
    expect(e.check('b', 'k', 3).allowed).toBe(true);
    expect(e.checkAll([['b', 'k']], [0]).outcomes[0]).toMatchObject({ limited: false, remaining: 0 });
    const d = e.checkAll(
      [
        ['a', 'k'],
        ['b', 'k'],
      ],
      [1, 1],
    );
    expect(d.allowed).toBe(false);
    expect(d.outcomes.map((o) => o.limited)).toEqual([false, true]);
    expect(e.estimate('a', 'k')).toBe(0);
  });

  it('refuses a list of the wrong length, and 0 as a single cost', () => {
    const e = engine();
    const codeOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        if (isRateMeshError(err)) return err.code;
      }
      return 'no error';
    };
    expect(codeOf(() => e.checkAll([['a', 'k']], [1, 1]))).toBe('ERR_COST_INVALID');
    expect(codeOf(() => e.checkAll([['a', 'k']], 0))).toBe('ERR_COST_INVALID');
    expect(codeOf(() => e.checkAll([['a', 'k']], [-1]))).toBe('ERR_COST_INVALID');
    expect(codeOf(() => e.checkAll([['a', 'k']], [1.5]))).toBe('ERR_COST_INVALID');
  });
});
