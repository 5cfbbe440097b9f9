import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventQueue } from '../../src/sim/event-queue.js';
import {
  localCeilingAdmits,
  localCeilingFlags,
  slidingLogAdmits,
  worstAligned,
  worstRolling,
} from '../../src/sim/metrics.js';
import { Prng } from '../../src/sim/prng.js';
import { SEED_WEIGHTS, seedTrace } from '../../src/sim/trace.js';

/** Brute force: the most times in any [s, s + w) (it suffices to try s at each time). */
function bruteRolling(times: readonly number[], w: number): number {
  let best = 0;
  for (const s of times) best = Math.max(best, times.filter((t) => t >= s && t < s + w).length);
  return best;
}

const sortedTimes = fc
  .array(fc.integer({ min: 0, max: 5000 }), { maxLength: 200 })
  .map((a) => a.map((x) => x / 2).sort((x, y) => x - y));

describe('worstRolling / worstAligned', () => {
  it('hand-made inputs: intervals are half-open', () => {
    expect(worstRolling([], 1000)).toBe(0);
    expect(worstAligned([], 1000)).toBe(0);
    expect(worstRolling([5], 1000)).toBe(1);
    // 0 and 1000 are exactly one width apart: never in the same [s, s + 1000)
    expect(worstRolling([0, 1000], 1000)).toBe(1);
    expect(worstRolling([0, 999.999, 1000], 1000)).toBe(2);
    expect(worstRolling([0, 500, 999, 1000, 1001, 1998], 1000)).toBe(4); // [500, 1500) holds 500, 999, 1000, 1001
    // aligned bins [k·w, (k+1)·w)
    expect(worstAligned([0, 999, 1000], 1000)).toBe(2);
    expect(worstAligned([999, 1000, 1001, 1999], 1000)).toBe(3);
    // a straddling burst: rolling sees it whole, aligned bins cut it in two
    const burst = [950, 960, 970, 980, 990, 1000, 1010, 1020, 1030, 1040];
    expect(worstRolling(burst, 100)).toBe(10);
    expect(worstAligned(burst, 100)).toBe(5);
    // equal times all count
    expect(worstRolling([7, 7, 7, 7], 1)).toBe(4);
    expect(worstAligned([7, 7, 7, 7], 1)).toBe(4);
    expect(worstAligned([-1, -0.5, 0], 1)).toBe(2);
  });

  it('worstRolling equals a brute force; worstAligned <= worstRolling (property)', () => {
    fc.assert(
      fc.property(sortedTimes, fc.integer({ min: 1, max: 1500 }), (times, w) => {
        expect(worstRolling(times, w)).toBe(bruteRolling(times, w));
        expect(worstAligned(times, w)).toBeLessThanOrEqual(worstRolling(times, w));
      }),
      { numRuns: 300 },
    );
  });
});

describe('slidingLogAdmits', () => {
  it('admits at most `limit` in any half-open window, and every refusal was forced (property)', () => {
    fc.assert(
      fc.property(
        sortedTimes,
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 800 }),
        (times, limit, W) => {
          const adm = slidingLogAdmits(times, limit, W);
          expect(worstRolling(adm, W)).toBeLessThanOrEqual(limit);
          // exact: a request is refused only when `limit` were admitted in (t - W, t]
          let j = 0;
          for (const t of times) {
            const inWindow = adm.filter((a) => a > t - W && a <= t).length;
            if (adm[j] === t) j++;
            else expect(inWindow).toBe(limit);
          }
          expect(j).toBe(adm.length);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('hand-made', () => {
    expect(slidingLogAdmits([0, 1, 2, 999, 1000, 1001], 2, 1000)).toEqual([0, 1, 1000, 1001]);
    expect(slidingLogAdmits(new Float64Array([0, 0, 0]), 2, 10)).toEqual([0, 0]);
  });

  it('on the seed trace: 10,000 at 1,000 per 1,000 ms', () => {
    const tr = seedTrace();
    const adm = slidingLogAdmits(tr.t, 1000, 1000);
    expect(adm.length).toBe(10_000);
    expect(worstRolling(adm, 1000)).toBe(1000);
  });
});

describe('seed trace', () => {
  it('is 20,000 requests at 0.5 ms spacing over 8 nodes, weighted 40/20/10/10/5/5/5/5', () => {
    const tr = seedTrace();
    expect(tr.t.length).toBe(20_000);
    expect(tr.nodes).toBe(8);
    expect(tr.t[0]).toBe(0);
    expect(tr.t[19_999]).toBe(9999.5);
    const counts = new Array<number>(8).fill(0);
    for (const n of tr.node) counts[n]!++;
    counts.forEach((c, i) => {
      expect(Math.abs(c / 20_000 - SEED_WEIGHTS[i]! / 100)).toBeLessThan(0.01);
    });
    // deterministic, and a prefix of a longer trace
    expect(Array.from(seedTrace(50).node)).toEqual(Array.from(tr.node.subarray(0, 50)));
  });

  it('the first draws follow xorshift64 from 0x9E3779B97F4A7C15', () => {
    const mask = (1n << 64n) - 1n;
    let s = 0x9e3779b97f4a7c15n;
    const expected: number[] = [];
    for (let i = 0; i < 20; i++) {
      s ^= (s << 13n) & mask;
      s ^= s >> 7n;
      s ^= (s << 17n) & mask;
      let r = Number(s % 100n);
      let pick = 0;
      while (r >= SEED_WEIGHTS[pick]!) r -= SEED_WEIGHTS[pick++]!;
      expected.push(pick);
    }
    expect(Array.from(seedTrace(20).node)).toEqual(expected);
  });
});

describe('EventQueue and Prng', () => {
  it('pops in time order, ties in insertion order (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 200 }), (times) => {
        const q = new EventQueue();
        const out: [number, number][] = [];
        times.forEach((t, i) => {
          q.push(t, () => {
            out.push([t, i]);
          });
        });
        expect(q.size).toBe(times.length);
        while (q.size > 0) {
          const t = q.peekTime();
          q.pop()();
          expect(out.at(-1)![0]).toBe(t);
        }
        const expected = times
          .map((t, i) => [t, i] as [number, number])
          .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        expect(out).toEqual(expected);
        expect(q.peekTime()).toBe(Number.POSITIVE_INFINITY);
      }),
      { numRuns: 200 },
    );
  });

  it('Prng: same seed same stream, values in [0, 1)', () => {
    const a = new Prng(42);
    const b = new Prng(42);
    const c = new Prng(43);
    const xs = Array.from({ length: 1000 }, () => a.next());
    expect(Array.from({ length: 1000 }, () => b.next())).toEqual(xs);
    expect(Array.from({ length: 1000 }, () => c.next())).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.05);
  });

  describe('localCeilingAdmits (the ceiling of a limiter whose nodes decide alone)', () => {
    /** 2,000 a second evenly spaced over `seconds`, as bench:scale's nodes rows. */
    const uniform = (seconds: number) => Array.from({ length: 2000 * seconds }, (_, i) => i * 0.5);

    it('one node: the exact sliding-window log', () => {
      fc.assert(
        fc.property(sortedTimes, fc.integer({ min: 1, max: 20 }), (times, limit) => {
          const got = localCeilingAdmits(times, limit, 100, 1, new Prng(1));
          expect(got).toEqual(slidingLogAdmits(times, limit, 100));
        }),
      );
    });

    it('never passes the limit in any window, at any number of nodes', () => {
      fc.assert(
        fc.property(
          sortedTimes,
          fc.integer({ min: 1, max: 20 }),
          fc.integer({ min: 1, max: 64 }),
          (t, l, n) => {
            expect(worstRolling(localCeilingAdmits(t, l, 100, n, new Prng(n)), 100)).toBeLessThanOrEqual(l);
          },
        ),
      );
    });

    it('arrivals at distinct times: each admitted with probability min(h, N) / N, as before bursts were told apart', () => {
      // the rule for one arrival at a time, written out: the draws match it one for one
      const reference = (times: readonly number[], limit: number, w: number, nodes: number, prng: Prng) => {
        const admitted: number[] = [];
        let head = 0;
        for (const t of times) {
          while (head < admitted.length && admitted[head]! <= t - w) head++;
          const h = limit - (admitted.length - head);
          if (h >= 1 && prng.next() * nodes < Math.min(h, nodes)) admitted.push(t);
        }
        return admitted;
      };
      fc.assert(
        fc.property(
          sortedTimes.map((t) => [...new Set(t)]),
          fc.integer({ min: 1, max: 20 }),
          fc.integer({ min: 1, max: 64 }),
          (t, l, n) => {
            expect(localCeilingAdmits(t, l, 100, n, new Prng(n))).toEqual(
              reference(t, l, 100, n, new Prng(n)),
            );
          },
        ),
      );
    });

    it('a burst at one instant is decided on one holding of the units: each node within its even part', () => {
      // 30 at once on 8 nodes with 70 units free: six nodes hold 9, two hold 8, so a node drawn 10
      // times admits 9 or 8 of them; the expected excess is the binomial tail's, E Σ (X_i - u_i)+
      const binom = (n: number, p: number) => {
        const out: number[] = [];
        for (let k = 0; k <= n; k++) {
          let c = 1;
          for (let j = 0; j < k; j++) c = (c * (n - j)) / (j + 1);
          out.push(c * p ** k * (1 - p) ** (n - k));
        }
        return out;
      };
      const pmf = binom(30, 1 / 8);
      const excess = (u: number) => pmf.reduce((s, p, k) => s + Math.max(0, k - u) * p, 0);
      const expected = 6 * excess(9) + 2 * excess(8);
      const earlier = Array.from({ length: 30 }, () => 0);
      const times = [...earlier, ...Array.from({ length: 30 }, () => 40)];
      let denied = 0;
      const draws = 20_000;
      const prng = new Prng(7);
      for (let d = 0; d < draws; d++) {
        const f = localCeilingFlags(times, 100, 60, 8, prng);
        // the first burst finds 100 units (12 or 13 a node): a node drawn 14 times loses one now and then
        for (let i = 30; i < 60; i++) denied += 1 - f[i]!;
        const first = f.slice(0, 30).reduce((s, x) => s + x, 0);
        expect(f.slice(30).reduce((s, x) => s + x, 0)).toBeLessThanOrEqual(100 - first);
      }
      // about 906 expected over the draws (0.0453 a burst): within 10 %
      expect(Math.abs(denied / draws - expected) / expected).toBeLessThan(0.1);
      // told apart (1 ms between arrivals), units move between them: none is lost at 70 units
      const spread = [...earlier, ...Array.from({ length: 30 }, (_, i) => 40 + i * 1e-3)];
      expect(localCeilingAdmits(spread, 100, 60, 8, new Prng(7)).length).toBe(60);
    });

    it('many nodes on thin slices admit well under the exact limiter; few nodes admit as much', () => {
      const times = uniform(10);
      const exact = slidingLogAdmits(times, 1000, 1000).length;
      const at = (n: number) => localCeilingAdmits(times, 1000, 1000, n, new Prng(3)).length / exact;
      // L / N = 1000 / 1024: fewer units than nodes, so a request often lands where none is held
      expect(at(1024)).toBeLessThan(0.75);
      expect(at(256)).toBeLessThan(0.95);
      expect(at(16)).toBeGreaterThan(0.99);
      expect(at(1024)).toBeLessThan(at(256));
    });
  });
});
