import { describe, expect, it } from 'vitest';
import { L, replay, WINDOW_BOUND } from './helpers.js';

// Targets (issue 2): controlled worst 1 s <= L + 1 % at every d <= 100 with g = 10;
// admitted / window bound >= 0.995 at d <= 50 and >= 0.97 at d = 100.
const TARGET = L * 1.01;

describe('accuracy on the seed trace (8 nodes, L = 1000 per 1000 ms, 50 buckets)', () => {
  it('the window bound is 10,000', () => {
    expect(WINDOW_BOUND).toBe(10_000);
  });

  for (const d of [0, 10, 25, 50]) {
    it(`controlled, g = 10, d = ${d}: worst 1 s <= 1010 and admitted / window bound >= 0.995`, () => {
      const r = replay({ delayMs: d });
      expect(r.worst1s).toBeLessThanOrEqual(TARGET);
      expect(r.vsWindowBound).toBeGreaterThanOrEqual(0.995);
    });
  }

  it('controlled, g = 10, d = 100: worst 1 s <= 1010 and admitted / window bound >= 0.97', () => {
    const r = replay({ delayMs: 100 });
    expect(r.vsWindowBound).toBeGreaterThanOrEqual(0.97);
    expect(r.worst1s).toBeLessThanOrEqual(TARGET); // measured 1009
  });

  it('controlled beats naive at d = 50 (worst 1 s), and naive is several % over', () => {
    const ctl = replay({ delayMs: 50 });
    const naive = replay({ delayMs: 50 }, { overAdmission: 'naive' });
    expect(ctl.worst1s).toBeLessThan(naive.worst1s);
    expect(naive.worst1s).toBeGreaterThan(L * 1.03); // measured 1091
    expect(naive.admitted).toBeGreaterThan(ctl.admitted);
  });

  it('controlled over-admission grows slowly with delay; naive grows fast', () => {
    const ctl0 = replay({ delayMs: 0 });
    const naive0 = replay({ delayMs: 0 }, { overAdmission: 'naive' });
    const naive10 = replay({ delayMs: 10 }, { overAdmission: 'naive' });
    // measured: controlled 998 at d = 0 on spread rounds (1,001 once, on aligned rounds with whole units: the estimate's own
    // error at the window's tail, a peer's counts in the oldest bucket weighed as if spread over
    // it, then showed); naive 1011 at d = 0, 1026 at d = 10
    expect(ctl0.worst1s).toBeLessThanOrEqual(L * 1.002);
    expect(naive0.worst1s).toBeLessThan(naive10.worst1s);
    expect(ctl0.worst1s).toBeLessThanOrEqual(naive0.worst1s);
  });
});
