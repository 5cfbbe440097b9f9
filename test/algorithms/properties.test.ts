/**
 * Property tests: for random arrival sequences (times, weighted costs), the
 * amount admitted over any interval never exceeds what each algorithm
 * promises, and a clock that goes backwards never admits more than the same
 * sequence on a clamped clock. Times are virtual: nothing here sleeps.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LocalAlgorithm } from '../../src/algorithms/types.js';
import { ALGORITHMS, type AlgorithmName } from '../../src/types.js';
import { type Admitted, type Arrival, make, run, spec, total } from './helpers.js';

const RUNS = 120;
const TOL = 1e-9;

/** Small limits and short windows so that limits are hit often. */
const params = fc.record({
  limit: fc.integer({ min: 1, max: 8 }),
  windowMs: fc.constantFrom(7, 10, 60, 100, 1000),
  base: fc.constantFrom(0, 1_700_000_000_000, 1_700_000_000_123.375),
});

/** Arrivals with non-decreasing integer offsets (scaled to the window) and costs 1..maxCost. */
function arrivals(windowMs: number, maxCost: number, base: number, backwards = false) {
  const step = fc.record({
    dt: fc.integer({ min: backwards ? -windowMs : 0, max: Math.max(1, Math.ceil(windowMs / 2)) }),
    cost: fc.integer({ min: 1, max: maxCost }),
    repeat: fc.integer({ min: 1, max: 3 }),
  });
  return fc.array(step, { minLength: 1, maxLength: 60 }).map((steps) => {
    const out: Arrival[] = [];
    let t = base;
    for (const s of steps) {
      t += s.dt;
      for (let i = 0; i < s.repeat; i++) out.push({ t, cost: s.cost });
    }
    return out;
  });
}

/** Largest admitted cost over a half-open interval [a.t, a.t + len) starting at an admitted arrival. */
function worstRolling(admitted: readonly Admitted[], len: number): number {
  let worst = 0;
  for (let i = 0; i < admitted.length; i++) {
    let sum = 0;
    for (let j = i; j < admitted.length && admitted[j]!.t < admitted[i]!.t + len; j++) sum += admitted[j]!.cost;
    if (sum > worst) worst = sum;
  }
  return worst;
}

describe('GCRA and token bucket: at most burst + rate × I over any closed interval of length I', () => {
  for (const name of ['gcra', 'token-bucket'] as const) {
    it(name, () => {
      fc.assert(
        fc.property(
          params.chain((p) =>
            fc.record({
              p: fc.constant(p),
              burst: fc.integer({ min: 1, max: 8 }),
              xs: fc.integer({ min: 1, max: 8 }).chain((c) => arrivals(p.windowMs, c, p.base)),
            }),
          ),
          ({ p, burst, xs }) => {
            const algo = make(spec(name, p.limit, p.windowMs, { burst }));
            const rate = p.limit / p.windowMs;
            const ok = run(algo, xs, p.base);
            for (let i = 0; i < ok.length; i++) {
              let sum = 0;
              for (let j = i; j < ok.length; j++) {
                sum += ok[j]!.cost;
                expect(sum).toBeLessThanOrEqual(burst + rate * (ok[j]!.t - ok[i]!.t) + TOL);
              }
            }
          },
        ),
        { numRuns: RUNS },
      );
    });
  }
});

describe('fixed window: at most limit per aligned window', () => {
  it('holds on random arrivals', () => {
    fc.assert(
      fc.property(
        params.chain((p) => fc.record({ p: fc.constant(p), xs: arrivals(p.windowMs, p.limit, p.base) })),
        ({ p, xs }) => {
          const ok = run(make(spec('fixed-window', p.limit, p.windowMs)), xs, p.base);
          const per = new Map<number, number>();
          for (const a of ok) {
            const w = Math.floor(a.t / p.windowMs);
            per.set(w, (per.get(w) ?? 0) + a.cost);
          }
          for (const n of per.values()) expect(n).toBeLessThanOrEqual(p.limit);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('documented: the boundary double burst (2 × limit within 2 ms)', () => {
    const ok = run(
      make(spec('fixed-window', 5, 1000)),
      Array.from({ length: 20 }, (_, i) => ({ t: i < 10 ? 999 : 1000, cost: 1 })),
      0,
    );
    expect(total(ok)).toBe(10);
  });
});

describe('sliding-window log: at most limit in any rolling window', () => {
  it('holds on random arrivals', () => {
    fc.assert(
      fc.property(
        params.chain((p) => fc.record({ p: fc.constant(p), xs: arrivals(p.windowMs, p.limit, p.base) })),
        ({ p, xs }) => {
          const ok = run(make(spec('sliding-window-log', p.limit, p.windowMs)), xs, p.base);
          expect(worstRolling(ok, p.windowMs)).toBeLessThanOrEqual(p.limit);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('is exact: admits the limit again as soon as the oldest event leaves the window', () => {
    const algo = make(spec('sliding-window-log', 3, 100));
    const xs: Arrival[] = [0, 10, 20, 99, 100, 109, 110].map((t) => ({ t, cost: 1 }));
    expect(run(algo, xs, 0).map((a) => a.t)).toEqual([0, 10, 20, 100, 110]);
  });

  it('stores memory proportional to the events in the window, and gives it back', () => {
    const algo = make(spec('sliding-window-log', 1000, 1000)) as LocalAlgorithm<{ buf: Float64Array; len: number }>;
    const s = algo.init(0);
    for (let t = 0; t < 1000; t++) algo.commit(s, 1, t);
    expect(s.len).toBe(1000);
    // Ten requests in the same ms share one entry.
    for (let i = 0; i < 10; i++) algo.commit(s, 1, 5000);
    expect(s.len).toBe(1);
    for (let t = 5001; t < 5010; t++) algo.commit(s, 1, t);
    expect(s.len).toBe(10);
    expect(s.buf.length / 2).toBeLessThanOrEqual(1024);
  });
});

describe('sliding-window counter: its documented approximate bounds', () => {
  it('holds on random arrivals', () => {
    fc.assert(
      fc.property(
        params.chain((p) =>
          fc.record({
            p: fc.constant(p),
            k: fc.constantFrom(1, 2, 3, 5, 10),
            xs: arrivals(p.windowMs, p.limit, p.base),
          }),
        ),
        ({ p, k, xs }) => {
          const ok = run(make(spec('sliding-window-counter', p.limit, p.windowMs, { buckets: k })), xs, p.base);
          const w = p.windowMs / k;
          // Any k consecutive aligned sub-buckets hold at most the limit.
          const byBucket = new Map<number, number>();
          for (const a of ok) {
            const b = Math.floor(a.t / w);
            byBucket.set(b, (byBucket.get(b) ?? 0) + a.cost);
          }
          for (const start of byBucket.keys()) {
            let sum = 0;
            for (let b = start; b < start + k; b++) sum += byBucket.get(b) ?? 0;
            expect(sum).toBeLessThanOrEqual(p.limit);
          }
          // Any rolling window a sub-bucket shorter than W holds at most the limit.
          expect(worstRolling(ok, p.windowMs - w - 1e-6)).toBeLessThanOrEqual(p.limit);
          // Any rolling window of W holds less than twice the limit.
          expect(worstRolling(ok, p.windowMs)).toBeLessThan(2 * p.limit);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('documented: bunching at the end of the oldest bucket lets nearly 2 × limit into one window', () => {
    const ok = run(
      make(spec('sliding-window-counter', 10, 1000, { buckets: 10 })),
      [...Array.from({ length: 10 }, () => ({ t: 99, cost: 1 })), ...Array.from({ length: 10 }, () => ({ t: 1098, cost: 1 }))],
      0,
    );
    expect(total(ok)).toBe(19);
  });
});

describe('leaky bucket: emission never exceeds its rate, queue and delay stay bounded', () => {
  it('holds on random arrivals', () => {
    fc.assert(
      fc.property(
        params.chain((p) =>
          fc.record({
            p: fc.constant({ ...p, base: Math.floor(p.base) }),
            queue: fc.integer({ min: 1, max: 12 }),
            deadlineMs: fc.integer({ min: 0, max: 2 * p.windowMs }),
            xs: fc.integer({ min: 1, max: 12 }).chain((c) => arrivals(p.windowMs, c, Math.floor(p.base))),
          }),
        ),
        ({ p, queue, deadlineMs, xs }) => {
          const algo = make(spec('leaky-bucket', p.limit, p.windowMs, { queue, deadlineMs })) as LocalAlgorithm<{
            empty: number;
          }>;
          const rate = p.limit / p.windowMs;
          const ok = run(algo as LocalAlgorithm<unknown>, xs, p.base, (s, a) => {
            const queued = (s as { empty: number }).empty - a.t * rate;
            expect(queued).toBeLessThanOrEqual(queue + TOL * queue);
          });
          const starts = ok.map((a) => ({ at: a.t + a.delayMs, cost: a.cost }));
          for (const a of ok) {
            expect(a.delayMs).toBeLessThanOrEqual(deadlineMs);
            expect(Number.isInteger(a.delayMs)).toBe(true);
          }
          for (let i = 0; i < starts.length; i++) {
            let sum = 0;
            for (let j = i; j < starts.length; j++) {
              // FIFO: requests proceed in arrival order.
              expect(starts[j]!.at).toBeGreaterThanOrEqual(starts[i]!.at);
              sum += starts[j]!.cost;
              expect(sum).toBeLessThanOrEqual(starts[j]!.cost + rate * (starts[j]!.at - starts[i]!.at + 1) + TOL);
            }
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('shapes a burst: admits with growing delays, rejects at the queue, and at the deadline', () => {
    const out = { allowed: false, remaining: 0, retryAfterMs: 0, resetMs: 0, delayMs: 0 };
    const q = make(spec('leaky-bucket', 10, 1000, { queue: 5, deadlineMs: 10_000 }));
    const s = q.init(0);
    const delays: number[] = [];
    while (q.check(s, 1, 0, out)) {
      delays.push(out.delayMs);
      q.commit(s, 1, 0);
    }
    expect(delays).toEqual([0, 100, 200, 300, 400]);
    expect(out.retryAfterMs).toBe(100);

    const d = make(spec('leaky-bucket', 10, 1000, { queue: 100, deadlineMs: 250 }));
    const s2 = d.init(0);
    const delays2: number[] = [];
    while (d.check(s2, 1, 0, out)) {
      delays2.push(out.delayMs);
      d.commit(s2, 1, 0);
    }
    expect(delays2).toEqual([0, 100, 200]);
    expect(out.retryAfterMs).toBe(50);
  });
});

describe('a clock that goes backwards never admits more than the same sequence with the clock clamped', () => {
  /** Unit costs: the clamped clock is the running maximum of the readings. */
  it.each(ALGORITHMS)('%s, unit costs, clamped to the running maximum', (name: AlgorithmName) => {
    fc.assert(
      fc.property(
        params.chain((p) => fc.record({ p: fc.constant(p), xs: arrivals(p.windowMs, 1, p.base, true) })),
        ({ p, xs }) => {
          const algo = make(spec(name, p.limit, p.windowMs, { buckets: 4 }));
          let max = Number.NEGATIVE_INFINITY;
          const clamped = xs.map((a) => {
            max = Math.max(max, a.t);
            return { t: max, cost: a.cost };
          });
          const init = xs[0]!.t;
          expect(total(run(algo, xs, init))).toBeLessThanOrEqual(total(run(algo, clamped, init)));
        },
      ),
      { numRuns: RUNS },
    );
  });

  /**
   * Weighted costs: a pure check cannot record the time it saw (checks do not
   * mutate), so the reference clamps each reading to the latest time the state
   * saw: its creation and every spend.
   */
  it.each(ALGORITHMS)('%s, weighted costs, clamped to the latest time the state saw', (name: AlgorithmName) => {
    fc.assert(
      fc.property(
        params.chain((p) => fc.record({ p: fc.constant(p), xs: arrivals(p.windowMs, p.limit, p.base, true) })),
        ({ p, xs }) => {
          const algo = make(spec(name, p.limit, p.windowMs, { buckets: 4 }));
          const init = xs[0]!.t;
          const state = algo.init(init);
          const out = { allowed: false, remaining: 0, retryAfterMs: 0, resetMs: 0, delayMs: 0 };
          let seen = init;
          let reference = 0;
          for (const a of xs) {
            const t = Math.max(a.t, seen);
            if (algo.check(state, a.cost, t, out)) {
              algo.commit(state, a.cost, t);
              seen = t;
              reference += a.cost;
            }
          }
          expect(total(run(algo, xs, init))).toBeLessThanOrEqual(reference);
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe('port check against the seed', () => {
  it('GCRA 1000/s burst 96 admits exactly 10,095 of 2,000 req/s for 10 s', () => {
    const algo = make(spec('gcra', 1000, 1000, { burst: 96 }));
    const s = algo.init(0);
    const out = { allowed: false, remaining: 0, retryAfterMs: 0, resetMs: 0, delayMs: 0 };
    let admitted = 0;
    for (let i = 0; i < 20_000; i++) {
      const now = i * 0.5;
      if (algo.check(s, 1, now, out)) {
        algo.commit(s, 1, now);
        admitted++;
      }
    }
    expect(admitted).toBe(10_095);
  });
});
