import { describe, expect, it } from 'vitest';
import { L, replay, TRACE } from './helpers.js';

const TARGET = L * 1.01;
const CUT = [{ node: 0, fromMs: 3000, toMs: 6000 }];

describe('faults on the seed trace (g = d = 10)', () => {
  it('loss 0.2: worst 1 s <= 1010', () => {
    const r = replay({ loss: 0.2 });
    expect(r.result.sim.lost).toBeGreaterThan(0);
    expect(r.worst1s).toBeLessThanOrEqual(TARGET);
    expect(r.vsWindowBound).toBeGreaterThanOrEqual(0.995);
  });

  it('the 40 % node cut from 3 s to 6 s: with fallback worst 1 s <= 1010; without, clearly worse', () => {
    const fb = replay({ cuts: CUT });
    const noFb = replay({ cuts: CUT }, { fallback: false });
    expect(fb.worst1s).toBeLessThanOrEqual(TARGET);
    // measured: 1002 with fallback, 1845 without
    expect(noFb.worst1s).toBeGreaterThan(L * 1.2);
    expect(noFb.admitted).toBeGreaterThan(fb.admitted);
  });

  it("the same cut at the mesh default g = 100: worst 1 s <= 1010 (it was 1051 while silent peers' demand faded and their unseen admissions went unreserved)", () => {
    const r = replay({ cuts: CUT, gossipIntervalMs: 100 });
    expect(r.worst1s).toBeLessThanOrEqual(TARGET);
    // 0.967 with the senders' skews held (0.97 and more before, counts late in a bucket under-counted)
    expect(r.vsWindowBound).toBeGreaterThanOrEqual(0.96);
  });

  it('the cut node decides in fallback mode at L/N during the cut and in global mode after it', () => {
    const modes = { before: new Set<string>(), during: new Set<string>(), after: new Set<string>() };
    let admittedDuring = 0;
    const r = replay({ cuts: CUT }, {}, (i, node, d) => {
      if (node !== 0) return;
      const t = TRACE.t[i]!;
      // allow a staleness interval after each edge of the cut
      if (t < 3000) modes.before.add(d.mode);
      else if (t >= 3100 && t < 6000) {
        modes.during.add(d.mode);
        if (d.allowed) admittedDuring++;
      } else if (t >= 6100) modes.after.add(d.mode);
    });
    expect([...modes.before]).toEqual(['global']);
    expect([...modes.during]).toEqual(['fallback']);
    expect([...modes.after]).toEqual(['global']);
    // L/N = 125 per second for 2.9 s, plus what had aged out of the window at the start
    expect(admittedDuring).toBeLessThanOrEqual(Math.ceil(2.9 * (L / 8)) + L / 8);
    expect(r.result.sim.engines[0]!.stats().byMode.fallback).toBeGreaterThan(0);
  });
});

describe('clock skew (node clock = true time + skew)', () => {
  it('node 1 at +30 ms: still within 2 % of L (measured 1009; 1012 with a sync at start)', () => {
    const skewed = replay({ skewMs: [0, 30] });
    const synced = replay({ skewMs: [0, 30], syncAtStart: true });
    expect(skewed.worst1s).toBeLessThanOrEqual(L * 1.02);
    expect(synced.worst1s).toBeLessThanOrEqual(L * 1.02);
    expect(skewed.vsWindowBound).toBeGreaterThanOrEqual(0.99);
  });

  it('skew no longer shifts counts between buckets: 100 ms of skew costs nothing (it cost 1002 → 1031 before offsets were used)', () => {
    const none = replay({});
    const big = replay({ skewMs: [0, 100] });
    // within a unit of the run without skew, or at most L: peers' counts weighed by when they
    // arrived (KeyWindow) gave 998 without skew and 1,000 with it (999 and 999 before)
    expect(big.worst1s).toBeLessThanOrEqual(Math.max(none.worst1s + 1, L));
    expect(big.worst1s).toBeLessThanOrEqual(L * 1.01);
  });

  it('syncAtStart gives every node the clock offset of every other node (its clock minus ours)', () => {
    const r = replay({ skewMs: [0, 30, 0, -12], syncAtStart: true });
    const skew = [0, 30, 0, -12, 0, 0, 0, 0];
    const sim = r.result.sim;
    sim.engines.forEach((e, i) => {
      const views = e.peerViews();
      expect(views.length).toBe(7);
      for (const v of views) {
        const j = sim.ids.indexOf(v.id);
        // symmetric link delays: the round-trip midpoint is exact
        expect(v.clockOffsetMs).toBeCloseTo(skew[j]! - skew[i]!, 6);
      }
    });
  });
});
