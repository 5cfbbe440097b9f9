import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { slidingLogAdmits, worstRolling } from '../../src/sim/metrics.js';
import { Prng } from '../../src/sim/prng.js';
import {
  type Arrivals,
  addKey,
  burstsKey,
  emptyArrivals,
  exactFlags,
  falseDenials,
  figuresOf,
  firstWindowFlags,
  localCeilingFigures,
  push,
  ruleHistogram,
  runSim,
  sortArrivals,
  steadyKey,
  timesByKey,
  worstOverKeys,
} from '../../src/sim/two-sided.js';

const flags = (xs: number[]) => Uint8Array.from(xs);

describe('exactFlags', () => {
  it('flags the arrivals the sliding-window log admits, the first of equal times', () => {
    // L = 2 per 10: 0 and 0 admitted, the third 0 denied, 5 denied, 10 admitted (0s left at 10)
    expect([...exactFlags([0, 0, 0, 5, 10, 10, 10], 2, 10)]).toEqual([1, 1, 0, 0, 1, 1, 0]);
    expect([...exactFlags([], 2, 10)]).toEqual([]);
  });

  it('agrees with slidingLogAdmits on random arrivals with ties', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 400 }), { maxLength: 150 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 100 }),
        (raw, limit, w) => {
          const times = raw.map((x) => x / 4).sort((a, b) => a - b);
          const f = exactFlags(times, limit, w);
          const admitted = times.filter((_, i) => f[i] === 1);
          expect(admitted).toEqual(slidingLogAdmits(times, limit, w));
          // what it admits never passes L in a window
          expect(worstRolling(admitted, w)).toBeLessThanOrEqual(limit);
        },
      ),
    );
  });
});

describe('falseDenials', () => {
  it('counts only what the exact limiter admits and this one denied', () => {
    const exact = flags([1, 1, 1, 0, 0]);
    // denies arrival 1 (false), denies 3 (the exact one does too: not false), admits 4 (over-admission, not a false denial)
    const lim = flags([1, 0, 1, 0, 1]);
    expect(falseDenials(exact, lim)).toEqual({ exactAdmitted: 3, denied: 1, fraction: 1 / 3 });
  });

  it('under the limit it is the denial rate', () => {
    const exact = flags([1, 1, 1, 1]);
    expect(falseDenials(exact, flags([0, 1, 0, 1])).fraction).toBe(0.5);
    expect(falseDenials(exact, exact).fraction).toBe(0);
  });

  it('restricts to the arrivals marked', () => {
    const exact = flags([1, 1, 1, 1]);
    const lim = flags([0, 1, 1, 0]);
    expect(falseDenials(exact, lim, flags([1, 1, 0, 0]))).toEqual({
      exactAdmitted: 2,
      denied: 1,
      fraction: 0.5,
    });
    expect(falseDenials(exact, lim, flags([0, 0, 0, 0])).fraction).toBe(0);
  });

  it('refuses flags of different arrivals', () => {
    expect(() => falseDenials(flags([1]), flags([1, 1]))).toThrow();
  });
});

describe('firstWindowFlags', () => {
  it('marks arrivals within W of their own key’s first arrival', () => {
    const a = emptyArrivals();
    const k0 = addKey(a, 'a');
    const k1 = addKey(a, 'b');
    push(a, 0, 0, k0);
    push(a, 50, 0, k1);
    push(a, 99, 0, k0);
    push(a, 100, 0, k0); // k0's first window is [0, 100)
    push(a, 149, 0, k1);
    push(a, 150, 0, k1);
    expect([...firstWindowFlags(a, 100)]).toEqual([1, 1, 1, 0, 1, 0]);
  });
});

describe('worstOverKeys', () => {
  it('is the worst rolling window over keys minus L, half-open', () => {
    expect(
      worstOverKeys(
        [
          [0, 1, 2],
          [0, 1000],
        ],
        2,
        1000,
      ),
    ).toBe(1);
    // 0 and 1000 are never in one [s, s + 1000)
    expect(worstOverKeys([[0, 1000, 2000]], 1, 1000)).toBe(0);
    expect(worstOverKeys([[0]], 5, 1000)).toBe(-4);
    expect(worstOverKeys([], 5, 1000)).toBe(-5);
  });

  it('takes the worst key, not the sum of keys', () => {
    // each key 2 in a window, together 4: per key the worst is 2
    expect(
      worstOverKeys(
        [
          [0, 10],
          [5, 15],
        ],
        2,
        100,
      ),
    ).toBe(0);
  });
});

describe('figuresOf', () => {
  it('counts a row’s keys only, with false denials split by first window', () => {
    const a = emptyArrivals();
    const k0 = addKey(a, 'row');
    const k1 = addKey(a, 'other');
    // L = 2 per 100; key row: 0, 10 (first window), 100, 110, 120 (after: the exact limiter admits 100, 110, denies 120)
    for (const t of [0, 10, 100, 110, 120]) push(a, t, 0, k0);
    push(a, 5, 0, k1);
    const s = sortArrivals(a);
    const exact = new Uint8Array(s.t.length);
    for (const [k, times] of timesByKey(s).entries()) {
      const f = exactFlags(times, 2, 100);
      let j = 0;
      for (let i = 0; i < s.t.length; i++) if (s.key[i] === k) exact[i] = f[j++]!;
    }
    const only = Uint8Array.from(s.key.map((k) => (k === k0 ? 1 : 0)));
    // the limiter: denies 10 (first window, false), admits 100, 110 and 120 (over: 3 in [100, 200))
    const admitted = Uint8Array.from(s.t.map((t, i) => (s.key[i] === k1 || t !== 10 ? 1 : 0)));
    const f = figuresOf(s, admitted, only, exact, firstWindowFlags(s, 100), 4, 2, 100);
    expect(f.requests).toBe(5);
    expect(f.exact).toBe(4);
    expect(f.admitted).toBe(4);
    expect(f.false_denials_pct).toBe(25);
    expect(f.false_denials_first_w_pct).toBe(50);
    expect(f.false_denials_after_pct).toBe(0);
    expect(f.worst_window_minus_l).toBe(1);
    expect(f.admitted_vs_exact).toBe(1);
    expect(f.calls_per_request).toBe(0);
  });
});

describe('generators and the ceiling', () => {
  it('steadyKey spaces requests evenly within [from, to)', () => {
    const a = emptyArrivals();
    steadyKey(a, addKey(a, 'k'), 10, 0, 1000, 4, new Prng(1));
    expect(a.t).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900]);
    expect(a.node.every((n) => n >= 0 && n < 4)).toBe(true);
  });

  it('burstsKey round-robin from a node, spread within the burst', () => {
    const a = emptyArrivals();
    burstsKey(a, addKey(a, 'k'), 4, 1000, 0, 1500, 3, new Prng(1), 8, 2);
    expect(a.t).toEqual([0, 2, 4, 6, 1000, 1002, 1004, 1006]);
    expect(a.node).toEqual([2, 0, 1, 2, 2, 0, 1, 2]);
  });

  it('the local ceiling of one node is the exact limiter; of many, at most it', () => {
    const times = Array.from({ length: 300 }, (_, i) => i * 5);
    const exact = slidingLogAdmits(times, 50, 1000).length;
    expect(localCeilingFigures([times], 50, 1000, 1).admitted).toBe(exact);
    expect(localCeilingFigures([times], 50, 1000, 64).admitted).toBeLessThan(exact);
  });
});

describe('localCeilingFigures', () => {
  it("the ceiling's false denials: none on one node or on arrivals units can follow; a warm burst's binomial tail on 8", () => {
    const one = Array.from({ length: 300 }, (_, i) => i * 5);
    expect(localCeilingFigures([one], 50, 1000, 1)).toEqual({
      admitted: slidingLogAdmits(one, 50, 1000).length,
      falseDenialsPct: 0,
    });
    // 0.9 L spread out: 100 units over 8 nodes, each arrival finds one
    const steady = Array.from({ length: 900 }, (_, i) => i * (1000 / 900));
    expect(localCeilingFigures([steady], 1000, 1000, 8).falseDenialsPct).toBe(0);
    // 2,000 accounts sending 30 at once at 0 and 40 s (L = 100 per min): the second burst finds
    // 70 units, 9 or 8 a node, and loses about 0.0453 of its 30 (the first: 0.0002)
    const bursts = Array.from({ length: 2000 }, () => [
      ...Array.from({ length: 30 }, () => 0),
      ...Array.from({ length: 30 }, () => 40_000),
    ]);
    const f = localCeilingFigures(bursts, 100, 60_000, 8);
    expect(f.falseDenialsPct).toBeGreaterThan(0.068);
    expect(f.falseDenialsPct).toBeLessThan(0.084);
    expect(f.admitted).toBeLessThan(120_000);
  });
});

describe('runSim', () => {
  it('drives the production engine: a single node admits exactly L, and names each denial', () => {
    const a: Arrivals = emptyArrivals();
    const k = addKey(a, 'k');
    for (let i = 0; i < 30; i++) push(a, i * 10, 0, k);
    const run = runSim(
      { nodes: 1, gossipIntervalMs: 100, delayMs: 10 },
      { name: 'p', limit: 10, windowMs: 10_000 },
      a,
    );
    const admitted = run.admitted.reduce((s, x) => s + x, 0);
    expect(admitted).toBe(10);
    const h = ruleHistogram(run, new Uint8Array(30).fill(1));
    expect(Object.values(h).reduce((s, x) => s + x, 0)).toBe(20);
    expect(Object.keys(h).length).toBeGreaterThan(0);
    expect([...run.calls].every((c) => c === 0)).toBe(true);
  });
});
