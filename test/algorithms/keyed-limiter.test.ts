import { describe, expect, it } from 'vitest';
import { Gcra } from '../../src/algorithms/gcra.js';
import { DEFAULT_MAX_KEYS, KeyedLimiter } from '../../src/algorithms/keyed-limiter.js';
import { newAlgoResult } from '../../src/algorithms/types.js';
import { isRateMeshError } from '../../src/errors.js';

/** One cell per second: a key spent at t is busy until t + 1000, idle after. */
const onePerSecond = () => new Gcra({ limit: 1, windowMs: 1000 });

function spend(kl: KeyedLimiter<unknown>, key: string, t: number): boolean {
  const out = newAlgoResult();
  if (!kl.check(key, 1, t, out)) return false;
  kl.commit(key, 1, t);
  return true;
}

describe('KeyedLimiter', () => {
  it('keeps one state per key; check alone stores nothing', () => {
    const kl = new KeyedLimiter(onePerSecond());
    const out = newAlgoResult();
    expect(kl.check('a', 1, 0, out)).toBe(true);
    expect(kl.size).toBe(0);
    expect(spend(kl, 'a', 0)).toBe(true);
    expect(spend(kl, 'a', 1)).toBe(false);
    expect(spend(kl, 'b', 1)).toBe(true);
    expect(kl.size).toBe(2);
    expect(kl.maxKeys).toBe(DEFAULT_MAX_KEYS);
  });

  it('never holds more than maxKeys, whatever the flood of distinct keys', () => {
    const kl = new KeyedLimiter(onePerSecond(), { maxKeys: 100 });
    for (let i = 0; i < 10_000; i++) {
      spend(kl, `k${i}`, 0);
      expect(kl.size).toBeLessThanOrEqual(100);
    }
    expect(kl.evictions).toBe(10_000 - kl.size);
  });

  it('drops idle states first', () => {
    const kl = new KeyedLimiter(onePerSecond(), { maxKeys: 4, evictBatch: 1 });
    spend(kl, 'a', 0);
    spend(kl, 'b', 100);
    spend(kl, 'c', 5000);
    spend(kl, 'd', 5100);
    // At 5200, a and b (spent before 4200) hold nothing; c and d are busy.
    spend(kl, 'e', 5200);
    expect([...['a', 'b', 'c', 'd', 'e']].filter((k) => kl.has(k))).toEqual(['c', 'd', 'e']);
    expect(kl.evictions).toBe(2);
  });

  it('then the oldest-inserted, in batches', () => {
    const kl = new KeyedLimiter(onePerSecond(), { maxKeys: 100 });
    expect(kl.evictBatch).toBe(7);
    for (let i = 0; i < 100; i++) spend(kl, `k${i}`, 0);
    expect(kl.evictions).toBe(0);
    spend(kl, 'new', 1);
    // One round freed a batch of the oldest busy keys.
    expect(kl.evictions).toBe(7);
    expect(kl.size).toBe(94);
    for (let i = 0; i < 7; i++) expect(kl.has(`k${i}`)).toBe(false);
    expect(kl.has('k7')).toBe(true);
    // The next six new keys fit without another round.
    for (let i = 0; i < 6; i++) spend(kl, `more${i}`, 2);
    expect(kl.evictions).toBe(7);
    expect(kl.size).toBe(100);
    spend(kl, 'one-more', 3);
    expect(kl.evictions).toBe(14);
  });

  it('a forgotten idle key decides exactly like a fresh one', () => {
    const kl = new KeyedLimiter(onePerSecond(), { maxKeys: 1, evictBatch: 1 });
    spend(kl, 'a', 0);
    spend(kl, 'b', 2000);
    expect(kl.has('a')).toBe(false);
    expect(spend(kl, 'a', 2000)).toBe(true);
  });

  it('sweep drops idle states; delete and clear forget keys', () => {
    const kl = new KeyedLimiter(onePerSecond());
    spend(kl, 'a', 0);
    spend(kl, 'b', 900);
    expect(kl.sweep(1500)).toBe(1);
    expect(kl.has('b')).toBe(true);
    expect(kl.delete('b')).toBe(true);
    expect(kl.size).toBe(0);
    spend(kl, 'c', 0);
    kl.clear();
    expect(kl.size).toBe(0);
  });

  it('rejects a bad cap with CONFIG_INVALID', () => {
    for (const options of [
      { maxKeys: 0 },
      { maxKeys: 1.5 },
      { maxKeys: 10, evictBatch: 11 },
      { evictBatch: 0 },
    ]) {
      let err: unknown;
      try {
        new KeyedLimiter(onePerSecond(), options);
      } catch (e) {
        err = e;
      }
      expect(isRateMeshError(err, 'ERR_CONFIG_INVALID')).toBe(true);
    }
  });
});
