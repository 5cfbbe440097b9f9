import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { HotKeys } from '../../src/daemon/hot-keys.js';

describe('HotKeys', () => {
  it('ranks keys by decayed admitted rate, per second', () => {
    const clock = new ManualClock(1_000_000);
    const hk = new HotKeys(8, clock, 10_000);
    // 100/s on a, 10/s on b, for 60 s (several half-lives: the estimate settles)
    for (let t = 0; t < 60_000; t += 10) {
      clock.set(1_000_000 + t);
      hk.add('api', 'a', 1);
      if (t % 100 === 0) hk.add('api', 'b', 1);
    }
    const [a, b] = hk.top(10);
    expect(a?.key).toBe('a');
    expect(a?.rate).toBeGreaterThan(95);
    expect(a?.rate).toBeLessThan(105);
    expect(b?.rate).toBeGreaterThan(9);
    expect(b?.rate).toBeLessThan(11);
    expect(a?.error).toBe(0);
  });

  it('decays: a key that stops cools off', () => {
    const clock = new ManualClock(0);
    const hk = new HotKeys(8, clock, 1_000);
    for (let i = 0; i < 100; i++) hk.add('p', 'x', 1);
    const before = hk.top(1)[0]?.rate ?? 0;
    clock.advance(1_000);
    expect(hk.top(1)[0]?.rate).toBeCloseTo(before / 2, 6);
  });

  it('holds at most `capacity` keys; a heavy hitter survives a flood of distinct keys', () => {
    const clock = new ManualClock(0);
    const hk = new HotKeys(16, clock);
    for (let i = 0; i < 20_000; i++) {
      clock.advance(1);
      hk.add('p', `flood-${i}`, 1);
      if (i % 4 === 0) hk.add('p', 'heavy', 1);
    }
    expect(hk.size).toBe(16);
    expect(hk.top(1)[0]?.key).toBe('heavy');
    // evicted keys pass their count on as an error bound
    expect(hk.top(16).some((h) => h.error > 0)).toBe(true);
  });

  it('survives long runs and clocks that go backwards (landmark rescaling)', () => {
    const clock = new ManualClock(0);
    const hk = new HotKeys(4, clock, 10);
    for (let i = 0; i < 1000; i++) {
      clock.advance(100);
      hk.add('p', 'k', 1);
    }
    clock.set(0);
    hk.add('p', 'k', 1);
    for (const h of hk.top(4)) {
      expect(Number.isFinite(h.rate)).toBe(true);
      expect(h.rate).toBeGreaterThanOrEqual(0);
    }
  });

  it('separates policies', () => {
    const hk = new HotKeys(4, new ManualClock(0));
    hk.add('a', 'k', 3);
    hk.add('b', 'k', 1);
    expect(hk.top(4).map((h) => h.policy)).toEqual(['a', 'b']);
  });
});
