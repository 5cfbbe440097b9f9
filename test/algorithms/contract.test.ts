/**
 * One contract for every local algorithm: the same behaviour is asserted
 * against each, at a small time base and at an epoch-sized fractional one
 * (floating point must not change a decision).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyedLimiter } from '../../src/algorithms/keyed-limiter.js';
import { newAlgoResult } from '../../src/algorithms/types.js';
import { isRateMeshError } from '../../src/errors.js';
import { ALGORITHMS, type AlgorithmName } from '../../src/types.js';
import { make, snapshot, spec } from './helpers.js';

const LIMIT = 10;
const WINDOW = 1000;
const BASES = [0, 1_700_000_000_123.375];

const cases = ALGORITHMS.flatMap((name) => BASES.map((base) => ({ name, base })));

describe.each(cases)(
  '$name contract (time base $base)',
  ({ name, base }: { name: AlgorithmName; base: number }) => {
    const algo = make(spec(name, LIMIT, WINDOW));
    // A start inside a window, so the fixed window does not roll over mid-test.
    const t0 = Math.floor(base / WINDOW) * WINDOW + 100;

    it('has the right name and capacity', () => {
      expect(algo.name).toBe(name);
      expect(algo.capacity).toBe(LIMIT);
    });

    it('admits up to capacity from empty, then denies the next', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      expect(algo.isIdle(s, t0)).toBe(true);
      for (let i = 0; i < LIMIT; i++) {
        expect(algo.check(s, 1, t0, out)).toBe(true);
        expect(out).toMatchObject({ allowed: true, remaining: LIMIT - 1 - i, retryAfterMs: 0 });
        expect(out.resetMs).toBeGreaterThan(0);
        algo.commit(s, 1, t0);
      }
      expect(algo.check(s, 1, t0, out)).toBe(false);
      expect(out.remaining).toBe(0);
      expect(out.retryAfterMs).toBeGreaterThan(0);
      expect(out.delayMs).toBe(0);
      expect(algo.isIdle(s, t0)).toBe(false);
    });

    it('admits a weighted cost equal to capacity at once, and nothing after it', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      expect(algo.check(s, LIMIT, t0, out)).toBe(true);
      expect(out.remaining).toBe(0);
      algo.commit(s, LIMIT, t0);
      expect(algo.check(s, 1, t0, out)).toBe(false);
    });

    it('recovers after time passes: full again at resetMs', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      let reset = 0;
      for (let i = 0; i < LIMIT; i++) {
        algo.check(s, 1, t0 + i, out);
        algo.commit(s, 1, t0 + i);
        reset = out.resetMs;
      }
      const full = t0 + LIMIT - 1 + reset;
      expect(reset).toBeGreaterThan(0);
      expect(algo.isIdle(s, full)).toBe(true);
      expect(algo.check(s, LIMIT, full, out)).toBe(true);
      expect(out.remaining).toBe(0);
      expect(algo.check(s, 1, full, out)).toBe(true);
      expect(out.remaining).toBe(LIMIT - 1);
    });

    it('check never mutates the state', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      for (let i = 0; i < 7; i++) {
        algo.check(s, 1, t0 + i * 3, out);
        algo.commit(s, 1, t0 + i * 3);
      }
      const before = snapshot(s);
      for (const [cost, t] of [
        [1, t0 + 20],
        [4, t0 + 20],
        [LIMIT, t0 + 20],
        [LIMIT + 1, t0 + 20],
        [1, t0 - 5000],
        [1, t0 + 10 * WINDOW],
        [1, Number.NaN],
      ] as const) {
        algo.check(s, cost, t, out);
        expect(s).toEqual(before);
      }
    });

    it('denies a cost above capacity with retryAfterMs -1, even when empty, forever', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      for (const t of [t0, t0 + WINDOW, t0 + 100 * WINDOW]) {
        expect(algo.check(s, LIMIT + 1, t, out)).toBe(false);
        expect(out.retryAfterMs).toBe(-1);
        expect(out.remaining).toBe(LIMIT);
      }
    });

    it('never admits a cost of 0, below 0 or NaN, and commit ignores one', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      const before = snapshot(s);
      for (const cost of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
        expect(algo.check(s, cost, t0, out)).toBe(false);
        expect(out.retryAfterMs).toBe(-1);
        algo.commit(s, cost, t0);
        expect(s).toEqual(before);
      }
    });

    it('retrying exactly at now + retryAfterMs is admitted, 1 ms earlier is not', () => {
      const step = fc.record({
        dt: fc.integer({ min: -150, max: 400 }),
        cost: fc.integer({ min: 1, max: LIMIT }),
      });
      fc.assert(
        fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), (steps) => {
          const s = algo.init(t0);
          const out = newAlgoResult();
          const probe = newAlgoResult();
          let t = t0;
          for (const { dt, cost } of steps) {
            t += dt;
            if (algo.check(s, cost, t, out)) {
              algo.commit(s, cost, t);
              continue;
            }
            const r = out.retryAfterMs;
            expect(r).toBeGreaterThanOrEqual(1);
            expect(Number.isInteger(r)).toBe(true);
            expect(algo.check(s, cost, t + r, probe)).toBe(true);
            expect(algo.check(s, cost, t + r - 1, probe)).toBe(false);
          }
        }),
        { numRuns: 150 },
      );
    });

    it('resetMs is when the state is full again', () => {
      const step = fc.record({
        dt: fc.integer({ min: 0, max: 300 }),
        cost: fc.integer({ min: 1, max: LIMIT }),
      });
      fc.assert(
        fc.property(fc.array(step, { minLength: 1, maxLength: 30 }), (steps) => {
          const s = algo.init(t0);
          const out = newAlgoResult();
          let t = t0;
          let last = { t, reset: 0 };
          for (const { dt, cost } of steps) {
            t += dt;
            if (algo.check(s, cost, t, out)) {
              algo.commit(s, cost, t);
              last = { t, reset: out.resetMs };
            }
          }
          expect(algo.isIdle(s, last.t + last.reset)).toBe(true);
          expect(algo.check(s, LIMIT, last.t + last.reset, out)).toBe(true);
        }),
        { numRuns: 100 },
      );
    });

    it('remaining is exact: that many more unit requests fit at the same instant', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      for (const [dt, cost] of [
        [0, 3],
        [250, 2],
        [600, 4],
      ] as const) {
        algo.check(s, cost, t0 + dt, out);
        algo.commit(s, cost, t0 + dt);
      }
      const t = t0 + 700;
      expect(algo.check(s, 1, t, out)).toBe(true);
      algo.commit(s, 1, t);
      const remaining = out.remaining;
      let n = 0;
      while (algo.check(s, 1, t, out)) {
        algo.commit(s, 1, t);
        n++;
      }
      expect(n).toBe(remaining);
      expect(out.remaining).toBe(0);
    });

    it('a clock that goes backwards never admits extra', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      const late = t0 + 5 * WINDOW;
      while (algo.check(s, 1, late, out)) algo.commit(s, 1, late);
      // Earlier readings: still full, whatever the step back.
      for (const back of [1, 100, WINDOW, 10 * WINDOW]) {
        expect(algo.check(s, 1, late - back, out)).toBe(false);
      }
      // Spending at earlier times must not buy room that the latest time would not have.
      const s2 = algo.init(t0);
      algo.check(s2, 1, late, out);
      algo.commit(s2, 1, late);
      let admitted = 1;
      for (const t of [late - WINDOW, late - 100, late - 1, late]) {
        while (algo.check(s2, 1, t, out)) {
          algo.commit(s2, 1, t);
          admitted++;
        }
      }
      expect(admitted).toBe(LIMIT);
    });

    it('a non-finite now is refused and changes nothing', () => {
      const s = algo.init(t0);
      const out = newAlgoResult();
      algo.check(s, 2, t0, out);
      algo.commit(s, 2, t0);
      const before = snapshot(s);
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
        expect(algo.check(s, 1, bad, out)).toBe(false);
        algo.commit(s, 1, bad);
        expect(s).toEqual(before);
        expect(algo.isIdle(s, bad)).toBe(false);
      }
      expect(algo.check(s, LIMIT - 2, t0, out)).toBe(true);
    });

    it('two-phase: a request spends only if every key allows', () => {
      const kl = new KeyedLimiter(algo, { maxKeys: 10 });
      const out = newAlgoResult();
      const spend = (keys: string[], cost: number, t: number): boolean => {
        for (const k of keys) if (!kl.check(k, cost, t, out)) return false;
        for (const k of keys) kl.commit(k, cost, t);
        return true;
      };
      expect(spend(['b'], LIMIT, t0)).toBe(true);
      // 'a' alone has room, but 'b' is spent: nothing is spent on 'a'.
      expect(spend(['a', 'b'], 3, t0)).toBe(false);
      expect(kl.has('a')).toBe(false);
      expect(spend(['a'], LIMIT, t0)).toBe(true);
      expect(spend(['a', 'c'], 1, t0)).toBe(false);
      expect(kl.has('c')).toBe(false);
    });
  },
);

describe('parameter validation', () => {
  it.each(ALGORITHMS)('%s rejects bad parameters with POLICY_INVALID naming the field', (name) => {
    const bad: [Partial<Parameters<typeof spec>[3]> & { limit?: number; windowMs?: number }, string][] = [
      [{ limit: 0 }, 'limit'],
      [{ limit: 1.5 }, 'limit'],
      [{ windowMs: 0 }, 'windowMs'],
      [{ windowMs: Number.NaN }, 'windowMs'],
    ];
    if (name === 'gcra' || name === 'token-bucket') bad.push([{ burst: 0 }, 'burst']);
    if (name === 'sliding-window-counter') bad.push([{ buckets: 0 }, 'buckets']);
    if (name === 'leaky-bucket') {
      bad.push([{ queue: -1 }, 'queue']);
      bad.push([{ deadlineMs: -1 }, 'deadlineMs']);
    }
    for (const [patch, field] of bad) {
      const s = { ...spec(name, 10, 1000), ...patch };
      let err: unknown;
      try {
        make(s);
      } catch (e) {
        err = e;
      }
      expect(isRateMeshError(err, 'ERR_POLICY_INVALID'), `${name} ${field}`).toBe(true);
      expect((err as { field: string }).field).toBe(field);
    }
  });

  it('rejects an unknown algorithm', () => {
    expect(() => make({ ...spec('gcra', 1, 1), algorithm: 'nope' as AlgorithmName })).toThrow(
      /unknown algorithm/,
    );
  });
});
