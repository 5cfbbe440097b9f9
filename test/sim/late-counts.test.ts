/**
 * Counts late in a short bucket (buckets of 100 ms, as long as a gossip interval: peers' counts
 * carry no arrival spans there). A peer's counts in the oldest bucket are weighed as if spread
 * evenly over it, and held beyond that by the skew their sender reports with them (format 5,
 * KeyWindow.ownDeficit): the estimate never counts fewer of them than are still inside.
 * Before the skews, a fresh key at 2 L starting 50 ms into a bucket passed L by 24 / 29 / 34
 * on 2 / 3 / 8 nodes, and a burst of 90 late in a bucket followed by traffic on the other
 * nodes reached 144 of L = 100 on 2 nodes.
 */
import { describe, expect, it } from 'vitest';
import {
  addKey,
  defaultMesh,
  emptyArrivals,
  globalKeyArrivals,
  oneKeyFigures,
  push,
  runSim,
  sortArrivals,
  WARMUP_MS,
} from '../../src/sim/two-sided.js';

describe('counts late in a short bucket', () => {
  for (const n of [2, 3, 8]) {
    it(`a fresh key at 2 L starting 50 ms into a bucket, ${n} nodes: no window past L`, () => {
      const L = 1000;
      const planned = globalKeyArrivals(n, [[2000, 0, 3000]]);
      const a = { ...planned, t: planned.t.map((t) => t + WARMUP_MS + 50) };
      const r = runSim(defaultMesh(n), { name: 'g', limit: L, windowMs: 1000 }, a);
      const f = oneKeyFigures(a, r.admitted, L, 1000);
      expect(f.worst_window_minus_l).toBeLessThanOrEqual(0);
      // and a limiter, not a wall
      expect(f.admitted).toBeGreaterThan(0.85 * f.exact);
    });
  }

  for (const n of [2, 4, 8]) {
    it(`a burst of 90 late in a bucket on one node, then traffic on the others, ${n} nodes: at most L`, () => {
      const L = 100;
      for (const off of [50, 75, 90]) {
        const a = emptyArrivals();
        const k = addKey(a, 'k');
        const t0 = WARMUP_MS + off;
        for (let j = 0; j < 90; j++) push(a, t0, 0, k);
        for (let t = t0 + 500; t < t0 + 1500; t += 2) for (let m = 1; m < n; m++) push(a, t, m, k);
        const s = sortArrivals(a);
        const r = runSim(defaultMesh(n), { name: 'k', limit: L, windowMs: 1000 }, s);
        const f = oneKeyFigures(s, r.admitted, L, 1000);
        expect(f.worst_window_minus_l, `burst at +${off} ms`).toBeLessThanOrEqual(0);
      }
    });
  }
});
