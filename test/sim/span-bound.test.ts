import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Prng } from '../../src/sim/prng.js';
import { capLoss, spanBound, tailsOf } from '../../src/sim/span-bound.js';
import { addKey, emptyArrivals, steadyKey } from '../../src/sim/two-sided.js';

/** The law of a sum of independent Bernoulli draws, by enumerating every outcome. */
function bruteLaw(ps: readonly number[]): number[] {
  const law = new Array(ps.length + 1).fill(0);
  for (let mask = 0; mask < 1 << ps.length; mask++) {
    let p = 1;
    let x = 0;
    for (let k = 0; k < ps.length; k++) {
      if (mask & (1 << k)) {
        p *= ps[k]!;
        x++;
      } else p *= 1 - ps[k]!;
    }
    law[x] += p;
  }
  return law;
}

function tails(ps: readonly number[], amax: number): number[] {
  const out = new Float64Array(amax);
  tailsOf(
    ps,
    ps.map((_, i) => i),
    ps.length,
    amax,
    new Float64Array(amax + 1),
    out,
  );
  return [...out];
}

const probs = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 9 });

describe('tailsOf', () => {
  it('P(X ≥ a) of a sum of Bernoulli draws, as enumeration gives it, with the last cell holding X ≥ amax', () => {
    fc.assert(
      fc.property(probs, fc.integer({ min: 1, max: 10 }), (ps, amax) => {
        const law = bruteLaw(ps);
        const got = tails(ps, amax);
        for (let a = 1; a <= amax; a++) {
          const want = law.slice(a).reduce((s, x) => s + x, 0);
          expect(got[a - 1]).toBeCloseTo(want, 12);
        }
      }),
    );
  });
});

describe('capLoss', () => {
  it('is the least Σ E[(X_i − A_i)+] over integer caps summing to at most h (enumerated)', () => {
    fc.assert(
      fc.property(
        fc.array(probs, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: 8 }),
        (nodes, h) => {
          const laws = nodes.map(bruteLaw);
          const excess = (law: number[], a: number) => law.reduce((s, p, x) => s + p * Math.max(0, x - a), 0);
          // every allocation of at most h units over the nodes
          let best = Number.POSITIVE_INFINITY;
          const visit = (i: number, left: number, sum: number): void => {
            if (i === laws.length) {
              best = Math.min(best, sum);
              return;
            }
            for (let a = 0; a <= left; a++) visit(i + 1, left - a, sum + excess(laws[i]!, a));
          };
          visit(0, h, 0);
          const steps = nodes.flatMap((ps) => tails(ps, ps.length)).sort((x, y) => y - x);
          const mean = nodes.flat().reduce((s, p) => s + p, 0);
          expect(capLoss(steps, mean, h)).toBeCloseTo(best, 10);
        },
      ),
    );
  });
});

/** The bench's global key: `rate` a second, evenly spaced, nodes drawn uniformly (seed 11). */
function globalKey(rate: number, nodes: number, toMs: number) {
  const a = emptyArrivals();
  steadyKey(a, addKey(a, 'global'), rate, 0, toMs, nodes, new Prng(11));
  return a;
}

const opts = { limit: 1000, windowMs: 1000, fromMs: 1200.37, toMs: 4000, stepMs: 1 };

describe('spanBound', () => {
  it('spans: a node is unseen from its last tick that can have reached anyone (d + g/2 − lateness on spread ticks)', () => {
    for (const [g, late] of [
      [100, 2],
      [50, 0],
    ] as const) {
      const a = globalKey(900, 16, 4000);
      const b = spanBound(
        a.t,
        a.node,
        { nodes: 16, gossipIntervalMs: g, delayMs: 10, tickLateMs: late },
        opts,
      );
      // the arrivals expected in the spans: 0.9 a ms over a span of d + g/2 − late on average
      expect(b.meanUnseen).toBeCloseTo(0.9 * (10 + g / 2 - late), 0);
      // the headroom the prefix leaves is L less the window's arrivals (900) plus what the spans hold
      expect(b.meanHeadroom - b.meanUnseen).toBeCloseTo(100, 0);
    }
  });

  it('one node: nothing is unseen by anyone else, and under L nothing need be denied', () => {
    const a = globalKey(900, 1, 4000);
    const b = spanBound(a.t, a.node, { nodes: 1, gossipIntervalMs: 100, delayMs: 10, tickLateMs: 2 }, opts);
    expect(b.fraction).toBe(0);
  });

  it('grows with the nodes and the gossip interval, shrinks with slack; a fractional slack counts whole units', () => {
    const at = (nodes: number, g: number, slack = 0) => {
      const a = globalKey(900, nodes, 4000);
      return spanBound(
        a.t,
        a.node,
        { nodes, gossipIntervalMs: g, delayMs: 10, tickLateMs: 2 },
        { ...opts, slack },
      );
    };
    const b64 = at(64, 100);
    expect(b64.fraction).toBeGreaterThan(at(16, 100).fraction);
    expect(b64.fraction).toBeGreaterThan(at(64, 25).fraction);
    expect(b64.fraction).toBeGreaterThan(at(64, 100, 10).fraction);
    expect(b64.fraction).toBeGreaterThan(0);
    // a rule allowed half a unit past L can use none of it: the same bound
    expect(at(64, 100, 0.5).fraction).toBe(b64.fraction);
  });

  it('refuses a schedule whose span reaches the window', () => {
    const a = globalKey(900, 2, 4000);
    expect(() =>
      spanBound(a.t, a.node, { nodes: 2, gossipIntervalMs: 1000, delayMs: 10, tickLateMs: 0 }, opts),
    ).toThrow(/under the window/);
  });
});
