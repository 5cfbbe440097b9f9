import { describe, expect, it } from 'vitest';
import { worstRolling } from '../../src/sim/metrics.js';
import { Simulator } from '../../src/sim/simulator.js';
import type { PolicySpec } from '../../src/types.js';

const N = 4;
const L = 20;
const W = 10_000;
/** How long a stopping pod takes no requests before it falls silent (its last gossip goes out). */
const DRAIN_MS = 300;
/** How long a new pod takes to join (its sync answered) before it takes requests. */
const READY_MS = 100;

/**
 * A key pinned to node 0 (a sticky route: 20 requests a second, all to that pod) while node 0
 * is replaced by a fresh pod with a fresh id at each time of `replaceAt`. With `silentMs`, the
 * pod is drained and falls silent that long before its successor starts (a pod stopped, then
 * one started), else the successor starts the moment it stops. Returns the worst window and what was admitted.
 */
function pinned(
  replaceAt: number[],
  silentMs = 0,
  graceful = false,
): { worst: number; admitted: number; goneSynced: number } {
  const policies: PolicySpec[] = [
    { name: 'p', limit: L, windowMs: W, buckets: 10, overAdmission: 'controlled', fallback: true },
  ];
  const sim = new Simulator({
    nodes: N,
    policies,
    gossipIntervalMs: 100,
    delayMs: 10,
    seed: 3,
    engine: { expectedMembers: N },
    // silent through the moment it is replaced (its tick then must not go out)
    cuts: silentMs > 0 ? replaceAt.map((t) => ({ node: 0, fromMs: t - silentMs, toMs: t + 1 })) : [],
  });
  const admitted: number[] = [];
  let next = 0;
  let goneSynced = 0;
  for (let t = 0; t < 40_000; t += 50) {
    sim.runUntil(t);
    if (next < replaceAt.length && t >= replaceAt[next]!) {
      goneSynced += sim.engines[0]!.stats().goneSynced;
      sim.replace(0, { graceful });
      next++;
    }
    // a stopping pod is drained first (no requests for DRAIN_MS, its gossip still going out), then
    // silent; its successor takes requests once it has joined (READY_MS: its sync answered)
    if (silentMs > 0 && next < replaceAt.length && t >= replaceAt[next]! - silentMs - DRAIN_MS) continue;
    if ((silentMs > 0 || graceful) && next > 0 && t < replaceAt[next - 1]! + READY_MS) continue;
    if (sim.request(0, 'p', 'pinned').allowed) admitted.push(t);
  }
  goneSynced += sim.engines[0]!.stats().goneSynced;
  return { worst: worstRolling(admitted, W), admitted: admitted.length, goneSynced };
}

describe('a pod replaced on a key only it served', () => {
  it('a successor that starts after the pod stopped holds the limit: its peers pass on the counts of the pod gone', () => {
    {
      // before this stop: 40 of L = 20 (the successor saw none of the pod's counts and admitted L again)
      const r = pinned([5_000, 17_000, 29_000], 1_000);
      expect(r.worst).toBeLessThanOrEqual(L);
      expect(r.goneSynced).toBeGreaterThan(0);
      // 20 a window: the exact limiter's 80 over 40 s less what the pod's silences lose
      expect(r.admitted).toBeGreaterThanOrEqual(60);
    }
  });

  it('a successor that starts the moment the pod stops passes L by at most the start-up share, L/N, per replacement', () => {
    {
      // before this stop: 40 with one replacement a window, 140 with one every 1.5 s
      const one = pinned([5_000, 17_000, 29_000]);
      expect(one.worst).toBeLessThanOrEqual(L + L / N);
      const many = pinned([3_000, 4_500, 6_000, 7_500, 9_000, 10_500, 12_000, 13_500]);
      expect(many.worst).toBeLessThanOrEqual(L + 2 * (L / N));
    }
  });

  it('a pod stopped gracefully, its successor starting the same moment: its farewell departs it at once, and the successor holds the limit', () => {
    {
      // killed the same way (no farewell): 24 and 28 of L = 20 (the test above)
      const one = pinned([5_000, 17_000, 29_000], 0, true);
      expect(one.worst).toBeLessThanOrEqual(L);
      expect(one.goneSynced).toBeGreaterThan(0);
      const many = pinned([3_000, 4_500, 6_000, 7_500, 9_000, 10_500, 12_000, 13_500], 0, true);
      expect(many.worst).toBeLessThanOrEqual(L);
      // the exact limiter's 20 a window, over 40 s
      expect(one.admitted).toBeGreaterThanOrEqual(75);
    }
  });
});

describe('a pod out of the mesh for a while (a rolling restart)', () => {
  /**
   * 4 nodes, one key at twice L (L = 1,000 per 1 s), spread over the serving nodes; node 1
   * stops at 5 s (gracefully, or killed: silent) and a successor takes its place at 10 s.
   * Admitted per second, and the worst rolling second.
   */
  function outFor5s(graceful: boolean): { perSecond: number[]; worst: number } {
    const policies: PolicySpec[] = [
      { name: 'p', limit: 1_000, windowMs: 1_000, buckets: 50, overAdmission: 'controlled', fallback: true },
    ];
    const sim = new Simulator({
      nodes: N,
      policies,
      gossipIntervalMs: 100,
      delayMs: 10,
      seed: 5,
      engine: { expectedMembers: N },
      cuts: graceful ? [] : [{ node: 1, fromMs: 5_000, toMs: 10_000 }],
    });
    const perSecond = new Array<number>(16).fill(0);
    const admitted: number[] = [];
    let stopped = false;
    let back = false;
    for (let t = 0; t < 16_000; t += 0.5) {
      sim.runUntil(t);
      if (!stopped && t >= 5_000) {
        stopped = true;
        if (graceful) sim.leave(1);
      }
      if (!back && t >= 10_000) {
        back = true;
        sim.replace(1);
      }
      let node = Math.floor((t * 2) % N);
      // out (and its successor joining, READY_MS): its requests go to the others
      if (node === 1 && t >= 5_000 && t < 10_000 + READY_MS) node = [0, 2, 3][Math.floor(t) % 3]!;
      if (sim.request(node, 'p', 'k').allowed) {
        perSecond[Math.floor(t / 1_000)]!++;
        admitted.push(t);
      }
    }
    return { perSecond, worst: worstRolling(admitted, 1_000) };
  }

  it('stopped gracefully, its peers keep no share of L for it: the others admit L while it is out', () => {
    const g = outFor5s(true);
    // killed: 748 a second from 5 s to 9 s (L/N kept for it until it departs), measured 749 748 748 748 818
    const killed = outFor5s(false);
    for (let s = 5; s < 10; s++) {
      expect(g.perSecond[s]).toBeGreaterThanOrEqual(980);
      expect(killed.perSecond[s]).toBeLessThan(900);
    }
    expect(g.worst).toBeLessThanOrEqual(1_010);
    expect(killed.worst).toBeLessThanOrEqual(1_010);
  });
});
