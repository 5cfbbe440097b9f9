import { describe, expect, it } from 'vitest';
import { EvictedSketch } from '../../src/decision/evicted-sketch.js';
import { Prng } from '../../src/sim/prng.js';
import { engine, spend, T0 } from './helpers.js';

describe('EvictedSketch', () => {
  it('never under-counts a key while its counts can be in the window, and forgets them after', () => {
    const W = 1000;
    const sk = new EvictedSketch(W, 99, 4, 256);
    const rng = new Prng(3);
    const truth = new Map<string, { t: number; n: number }[]>();
    // 20,000 records over 3 s on 5,000 keys in a 256-wide sketch: heavy collisions
    for (let i = 0; i < 20_000; i++) {
      const t = T0 + i * 0.15;
      const key = `k${Math.floor(rng.next() * 5000)}`;
      const n = 1 + Math.floor(rng.next() * 10);
      sk.add(key, n, t);
      const list = truth.get(key) ?? [];
      list.push({ t, n });
      truth.set(key, list);
      if (i % 97 === 0) {
        for (const [k, l] of truth) {
          // what was recorded within the last window must be covered
          const due = l.filter((x) => x.t > t - W).reduce((a, x) => a + x.n, 0);
          expect(sk.estimate(k, t)).toBeGreaterThanOrEqual(due);
        }
      }
    }
    const end = T0 + 20_000 * 0.15;
    expect(sk.estimate('k1', end + 1250 + 1)).toBe(0);
    expect(sk.bytes).toBe(5 * 4 * 256 * 8);
  });

  it('is empty (and allocates nothing) until the first record', () => {
    const sk = new EvictedSketch(1000, 1);
    expect(sk.estimate('x', T0)).toBe(0);
    expect(sk.bytes).toBe(0);
  });
});

describe('eviction never opens a limit (engine)', () => {
  it('a live key evicted by a flood comes back with at least its counts', () => {
    const { e, clock } = engine([{ name: 'p', limit: 5, windowMs: 60_000 }], { maxKeys: 10, sketchSeed: 1 });
    expect(spend(e, 'p', 'victim', 3)).toBe(3);
    clock.advance(10);
    for (let i = 0; i < 30; i++) e.check('p', `flood-${i}`);
    const s = e.stats();
    expect(s.keys).toBeLessThanOrEqual(10);
    expect(s.evictedLive).toBeGreaterThan(0);
    // the victim's window was dropped, and it starts from what it had
    expect(e.estimate('p', 'victim')).toBe(0);
    expect(spend(e, 'p', 'victim', 10)).toBe(2);
    expect(e.estimate('p', 'victim')).toBe(5);
  });

  it('a local-scope key evicted with state left comes back with what it had used', () => {
    const { e, clock } = engine(
      [{ name: 'p', scope: 'local', algorithm: 'gcra', limit: 5, windowMs: 60_000 }],
      {
        maxKeys: 10,
        sketchSeed: 1,
      },
    );
    expect(spend(e, 'p', 'victim', 4)).toBe(4);
    clock.advance(10);
    for (let i = 0; i < 30; i++) e.check('p', `flood-${i}`);
    expect(e.stats().evictedLive).toBeGreaterThan(0);
    expect(spend(e, 'p', 'victim', 10)).toBe(1);
  });

  it('keys with nothing left in their window go first, and silently (no sketch)', () => {
    const { e, clock } = engine([{ name: 'p', limit: 5, windowMs: 1000 }], { maxKeys: 10 });
    for (let i = 0; i < 10; i++) e.check('p', `old-${i}`);
    clock.advance(2000);
    for (let i = 0; i < 10; i++) e.check('p', `new-${i}`);
    const s = e.stats();
    expect(s.evictions).toBe(10);
    expect(s.evictedLive).toBe(0);
    expect(s.sketchBytes).toBe(0);
  });
});
