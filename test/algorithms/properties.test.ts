/**
 * Property tests: for random arrival sequences (times, weighted costs), the
 * amount admitted over any interval never exceeds what each algorithm
 * promises, and a clock that goes backwards never admits more than the same
 * sequence on a clamped clock. Times are virtual: nothing here sleeps.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { LocalAlgorithm } from '../../src/algorithms/types.js';
import type { LocalAlgorithmSpec } from '../../src/types.js';
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
    for (let j = i; j < admitted.length && admitted[j]!.t < admitted[i]!.t + len; j++)
      sum += admitted[j]!.cost;
    if (sum > worst) worst = sum;
  }
  return worst;
}

/** GCRA, token bucket: at most burst + rate × I over any closed interval of length I. */
function rateBound(sp: Required<LocalAlgorithmSpec>, ok: readonly Admitted[]): void {
  const rate = sp.limit / sp.windowMs;
  for (let i = 0; i < ok.length; i++) {
    let sum = 0;
    for (let j = i; j < ok.length; j++) {
      sum += ok[j]!.cost;
      expect(sum).toBeLessThanOrEqual(sp.burst + rate * (ok[j]!.t - ok[i]!.t) + TOL);
    }
  }
}

/** Fixed window: at most limit per aligned window. */
function fixedBound(sp: Required<LocalAlgorithmSpec>, ok: readonly Admitted[]): void {
  const per = new Map<number, number>();
  for (const a of ok) {
    const w = Math.floor(a.t / sp.windowMs);
    per.set(w, (per.get(w) ?? 0) + a.cost);
  }
  for (const n of per.values()) expect(n).toBeLessThanOrEqual(sp.limit);
}

/** Sliding-window log: at most limit in any rolling window. */
function logBound(sp: Required<LocalAlgorithmSpec>, ok: readonly Admitted[]): void {
  expect(worstRolling(ok, sp.windowMs)).toBeLessThanOrEqual(sp.limit);
}

/** Sliding-window counter: the bounds its JSDoc documents. */
function counterBound(sp: Required<LocalAlgorithmSpec>, ok: readonly Admitted[]): void {
  const k = sp.buckets;
  const w = sp.windowMs / k;
  // Any k consecutive aligned sub-buckets hold at most the limit.
  const byBucket = new Map<number, number>();
  for (const a of ok) {
    const b = Math.floor(a.t / w);
    byBucket.set(b, (byBucket.get(b) ?? 0) + a.cost);
  }
  for (const start of byBucket.keys()) {
    let sum = 0;
    for (let b = start; b < start + k; b++) sum += byBucket.get(b) ?? 0;
    expect(sum).toBeLessThanOrEqual(sp.limit);
  }
  // Any rolling window a sub-bucket shorter than W holds at most the limit.
  expect(worstRolling(ok, sp.windowMs - w - 1e-6)).toBeLessThanOrEqual(sp.limit);
  // Any rolling window of W holds less than twice the limit.
  expect(worstRolling(ok, sp.windowMs)).toBeLessThan(2 * sp.limit);
}

/** Leaky bucket, per admission: the queue stays within capacity and the delay within the deadline. */
function queueBound(sp: Required<LocalAlgorithmSpec>, ok: readonly Admitted[]): void {
  for (const a of ok) {
    expect(a.queued).toBeLessThanOrEqual(sp.queue * (1 + TOL));
    expect(a.delayMs).toBeLessThanOrEqual(sp.deadlineMs);
    expect(Number.isInteger(a.delayMs)).toBe(true);
  }
}

/** Leaky bucket: units starting in any interval are at most rate × (I + 1) plus one request's cost, in FIFO order. */
function emissionBound(sp: Required<LocalAlgorithmSpec>, ok: readonly Admitted[]): void {
  const rate = sp.limit / sp.windowMs;
  const starts = ok.map((a) => ({ at: a.t + a.delayMs, cost: a.cost }));
  for (let i = 0; i < starts.length; i++) {
    let sum = 0;
    for (let j = i; j < starts.length; j++) {
      expect(starts[j]!.at).toBeGreaterThanOrEqual(starts[i]!.at);
      sum += starts[j]!.cost;
      expect(sum).toBeLessThanOrEqual(starts[j]!.cost + rate * (starts[j]!.at - starts[i]!.at + 1) + TOL);
    }
  }
}

interface Case {
  name: AlgorithmName;
  /** Random extras for the spec. */
  extras: fc.Arbitrary<Partial<LocalAlgorithmSpec>>;
  /** Integer arrival times only (leaky bucket: delays are whole ms from an integer now). */
  integerTimes?: boolean;
  bound: (sp: Required<LocalAlgorithmSpec>, ok: readonly Admitted[]) => void;
}

const CASES: Case[] = [
  { name: 'gcra', extras: fc.record({ burst: fc.integer({ min: 1, max: 8 }) }), bound: rateBound },
  { name: 'token-bucket', extras: fc.record({ burst: fc.integer({ min: 1, max: 8 }) }), bound: rateBound },
  { name: 'fixed-window', extras: fc.constant({}), bound: fixedBound },
  { name: 'sliding-window-log', extras: fc.constant({}), bound: logBound },
  {
    name: 'sliding-window-counter',
    extras: fc.record({ buckets: fc.constantFrom(1, 2, 3, 5, 10) }),
    bound: counterBound,
  },
  {
    name: 'leaky-bucket',
    extras: fc.record({
      queue: fc.integer({ min: 1, max: 12 }),
      deadlineMs: fc.integer({ min: 0, max: 2000 }),
    }),
    integerTimes: true,
    bound: (sp, ok) => {
      queueBound(sp, ok);
      emissionBound(sp, ok);
    },
  },
];

/** A random spec for `c` and arrivals with costs 1..capacity. */
function scenario(c: Case, backwards: boolean) {
  return params.chain((p) =>
    c.extras.chain((extra) => {
      const sp = spec(c.name, p.limit, p.windowMs, extra);
      const base = c.integerTimes ? Math.floor(p.base) : p.base;
      const capacity = make(sp).capacity;
      return fc.record({ sp: fc.constant(sp), xs: arrivals(sp.windowMs, capacity, base, backwards) });
    }),
  );
}

describe.each(CASES)('$name never admits more than it promises over any interval', (c) => {
  it('holds on random arrivals with weighted costs', () => {
    fc.assert(
      fc.property(scenario(c, false), ({ sp, xs }) => {
        c.bound(sp, run(make(sp), xs, xs[0]!.t));
      }),
      { numRuns: RUNS },
    );
  });
});

describe('documented behaviour at the edges', () => {
  it('fixed window: the boundary double burst (2 × limit within 2 ms)', () => {
    const ok = run(
      make(spec('fixed-window', 5, 1000)),
      Array.from({ length: 20 }, (_, i) => ({ t: i < 10 ? 999 : 1000, cost: 1 })),
      0,
    );
    expect(total(ok)).toBe(10);
  });

  it('sliding-window counter: bunching at the end of the oldest bucket lets nearly 2 × limit into one window', () => {
    const ok = run(
      make(spec('sliding-window-counter', 10, 1000, { buckets: 10 })),
      [
        ...Array.from({ length: 10 }, () => ({ t: 99, cost: 1 })),
        ...Array.from({ length: 10 }, () => ({ t: 1098, cost: 1 })),
      ],
      0,
    );
    expect(total(ok)).toBe(19);
  });

  it('sliding-window log is exact: admits again as soon as the oldest event leaves the window', () => {
    const algo = make(spec('sliding-window-log', 3, 100));
    const xs: Arrival[] = [0, 10, 20, 99, 100, 109, 110].map((t) => ({ t, cost: 1 }));
    expect(run(algo, xs, 0).map((a) => a.t)).toEqual([0, 10, 20, 100, 110]);
  });

  it('sliding-window log stores memory proportional to the events in the window, and gives it back', () => {
    const algo = make(spec('sliding-window-log', 1000, 1000)) as LocalAlgorithm<{
      buf: Float64Array;
      len: number;
    }>;
    const s = algo.init(0);
    for (let t = 0; t < 1000; t++) algo.commit(s, 1, t);
    expect(s.len).toBe(1000);
    // Ten requests in the same ms share one entry.
    for (let i = 0; i < 10; i++) algo.commit(s, 1, 5000);
    expect(s.len).toBe(1);
    for (let t = 5001; t < 5010; t++) algo.commit(s, 1, t);
    expect(s.len).toBe(10);
    expect(s.buf.length / 2).toBeLessThan(1000);
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
   * Weighted costs: fewer admissions early (a stricter answer to an earlier
   * reading) can leave room for a larger cost later, so totals are not
   * comparable. What must hold is the algorithm's own bound on the clamped
   * timeline: each admission placed at the latest time the state had seen (its
   * creation and every spend; a check does not mutate, so it records nothing).
   */
  it.each(CASES)('$name, weighted costs: its bound holds on the clamped timeline', (c) => {
    fc.assert(
      fc.property(scenario(c, true), ({ sp, xs }) => {
        let seen = xs[0]!.t;
        const ok = run(make(sp), xs, seen).map((a) => {
          seen = Math.max(seen, a.t);
          return { ...a, t: seen };
        });
        if (c.name === 'leaky-bucket') queueBound(sp, ok);
        else c.bound(sp, ok);
      }),
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
