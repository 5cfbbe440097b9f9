import { describe, expect, it } from 'vitest';
import { worstRolling } from '../../src/sim/metrics.js';
import { Simulator } from '../../src/sim/simulator.js';

/**
 * A peer's burst late in a long bucket (a per-minute limit: W = 60 s, k = 10, buckets of 6 s),
 * then traffic on other nodes once that bucket is the oldest. The burst's counts carry no times;
 * spread evenly over the bucket they slid out from its start, and the other nodes admitted the
 * part that had "left" while the burst was still inside (KeyWindow: peers' arrival spans).
 */
const L = 100;
const W = 60_000;
/** A multiple of the bucket (6 s): the run's buckets start at 0, 6 s, 12 s ... */
const EPOCH = 1_699_999_998_000;

function mesh(nodes: number, mode: 'controlled' | 'naive'): Simulator {
  return new Simulator({
    nodes,
    policies: [{ name: 'p', limit: L, windowMs: W, buckets: 10, overAdmission: mode, fallback: true }],
    gossipIntervalMs: 100,
    delayMs: 10,
    seed: 3,
    epochMs: EPOCH,
    engine: { expectedMembers: nodes },
  });
}

/** Node 0 is offered `early` requests at 20 ms, then a burst of `burst` at `at`; from W on, the other nodes 20 a second between them for 10 s. */
function burstThenTraffic(nodes: number, at: number, burst: number, early = 0): number[] {
  const sim = mesh(nodes, 'controlled');
  const admitted: number[] = [];
  if (early > 0) {
    sim.runUntil(20);
    for (let i = 0; i < early; i++) if (sim.request(0, 'p', 'k').allowed) admitted.push(20);
  }
  sim.runUntil(at);
  for (let i = 0; i < burst; i++) if (sim.request(0, 'p', 'k').allowed) admitted.push(at);
  for (let t = W; t < W + 10_000; t += 50) {
    sim.runUntil(t);
    if (sim.request(1 + ((t / 50) % (nodes - 1)), 'p', 'k').allowed) admitted.push(t);
  }
  return admitted;
}

describe('peer bursts late in a long bucket', () => {
  it('stay counted until they leave the window: no window past L', () => {
    // on 4f3ac11, before peers' arrival times: 151 on 2 nodes at 5.9 s
    for (const at of [5_900, 5_500, 3_000, 11_950]) {
      for (const nodes of [2, 4, 8]) {
        const admitted = burstThenTraffic(nodes, at, 90);
        // a burst on one node of a fresh key: its part of the headroom (L / N), as it cannot tell
        // it from the same burst on every node at once
        expect(admitted.filter((t) => t === at).length).toBeGreaterThanOrEqual(Math.floor(L / nodes));
        expect(worstRolling(admitted, W), `burst at ${at} ms on ${nodes} nodes`).toBeLessThanOrEqual(L);
      }
    }
  });

  it('stay counted after an earlier request in the same bucket', () => {
    // one request at 20 ms, then the burst late in the bucket, published in parts: the parts
    // arrive close together and count whole until the last (spread from the early request
    // instead, they let 126, 113 and 108 in; 128 on 2 nodes on 4f3ac11)
    for (const nodes of [2, 4, 8]) {
      const admitted = burstThenTraffic(nodes, 5_000, 80, 1);
      expect(admitted.filter((t) => t < W).length).toBeGreaterThanOrEqual(Math.floor(L / nodes));
      expect(worstRolling(admitted, W), `${nodes} nodes`).toBeLessThanOrEqual(L);
    }
  });

  it('stay counted with a request before and one after them in the same bucket', () => {
    // the burst is a middle group: spread evenly from the early request, it slid out as on
    // 4f3ac11 (128 on 2 nodes, 114 on 4)
    for (const after of [5_300, 5_500, 5_900, 5_990]) {
      for (const nodes of [2, 4]) {
        const sim = mesh(nodes, 'controlled');
        const admitted: number[] = [];
        const req = (t: number, n: number) => {
          sim.runUntil(t);
          if (sim.request(n, 'p', 'k').allowed) admitted.push(t);
        };
        req(20, 0);
        // the burst close to the request after it at 5.99 s: the two arrive as one group, after the bucket
        const burstAt = after === 5_990 ? 5_900 : 5_000;
        for (let i = 0; i < 80; i++) req(burstAt, 0);
        req(after, 0);
        for (let t = W; t < W + 10_000; t += 50) req(t, 1 + ((t / 50) % (nodes - 1)));
        expect(worstRolling(admitted, W), `one more at ${after} ms, ${nodes} nodes`).toBeLessThanOrEqual(L);
      }
    }
  });

  it('leave as soon as the window passes when they arrived', () => {
    // the burst at 5.9 s went out at once (an early publish) and arrived by 5.91 s, so it is out
    // of the window from 65.91 s: the other nodes then admit again, before its bucket has wholly
    // left the window at 66 s
    const admitted = burstThenTraffic(4, 5_900, 90, 0);
    const burst = admitted.filter((t) => t === 5_900).length;
    const after = admitted.filter((t) => t >= W);
    expect(after.filter((t) => t < 65_900).length).toBeLessThanOrEqual(L - burst);
    expect(after.filter((t) => t >= 65_900 && t < 66_000).length).toBeGreaterThan(0);
    expect(worstRolling(admitted, W)).toBeLessThanOrEqual(L);
  });

  it('a peer cut off after its burst still counts as at least L/N in the stale reserve', () => {
    // node 0 bursts in a bucket, then is cut off; the others' stale reserve for it weighs its
    // counts as the estimate does (weighed evenly there, the reserve fell as the estimate
    // dropped the burst: controlled up to 102, naive up to 135)
    for (const mode of ['controlled', 'naive'] as const) {
      for (const [at, burst] of [
        [59_000, 90],
        [61_000, 80],
        [61_000, 60],
        [63_000, 80],
      ] as const) {
        // the naive rule's figure below is as measured with early publishes
        const sim = new Simulator({
          nodes: 3,
          policies: [{ name: 'p', limit: L, windowMs: W, buckets: 10, overAdmission: mode, fallback: true }],
          gossipIntervalMs: 100,
          delayMs: 10,
          seed: 1,
          cuts: [{ node: 0, fromMs: 70_000, toMs: 300_000 }],
          engine: { expectedMembers: 3, departAfterMs: 200_000 },
        });
        const admitted: number[] = [];
        if (sim.request(0, 'p', 'k').allowed) admitted.push(0);
        sim.runUntil(at);
        for (let i = 0; i < burst; i++) if (sim.request(0, 'p', 'k').allowed) admitted.push(at);
        for (let t = at + W; t < at + W + 6_000; t += 20) {
          sim.runUntil(t);
          for (const n of [0, 1, 2]) if (sim.request(n, 'p', 'k').allowed) admitted.push(t);
        }
        // naive holds no share of the headroom: one over L is the rule's, as before arrival times
        expect(worstRolling(admitted, W), `${mode}, ${burst} at ${at}`).toBeLessThanOrEqual(
          mode === 'controlled' ? L : L + 1,
        );
      }
    }
  });
});
