/**
 * mesh:two-sided's arithmetic, without processes: each node's decisions by the default rule and
 * by the naive rule paired request by request, merged over nodes by decision time, and both
 * errors against the exact log on those times.
 */
import { describe, expect, it } from 'vitest';
import type { DecisionRecord } from '../../mesh-test/harness.js';
import { bothErrors, pairLive } from '../../mesh-test/two-sided.js';

const rec = (t: number, allowed: boolean): DecisionRecord => ({ t, allowed, mode: 'global' });

describe('mesh:two-sided pairing', () => {
  it('pairs each node by order and merges the nodes by time', () => {
    const primary = [
      [rec(1, true), rec(5, false)],
      [rec(2, true), rec(3, true), rec(9, true)],
    ];
    const also = [
      [rec(1.01, true), rec(5.01, true)],
      [rec(2.01, false), rec(3.01, true), rec(9.01, true)],
    ];
    const p = pairLive(primary, also);
    expect(p.arrivals.t).toEqual([1, 2, 3, 5, 9]);
    expect(p.arrivals.node).toEqual([0, 1, 1, 0, 1]);
    expect([...p.controlled]).toEqual([1, 1, 1, 0, 1]);
    expect([...p.naive]).toEqual([1, 0, 1, 1, 1]);
  });

  it('refuses a node whose two rules decided different numbers of requests', () => {
    expect(() => pairLive([[rec(1, true)]], [[]])).toThrow(/node 0 decided 1 requests by one rule and 0/);
    expect(() => pairLive([[rec(1, true)]], [])).toThrow(/different meshes/);
  });

  it('counts a denial the exact log would admit as false, and a window past L as the other error', () => {
    // 1,200 requests 0.5 ms apart over 600 ms: the exact log (L = 1,000 per 1 s) admits the first 1,000
    const n = 1200;
    const primary = [Array.from({ length: n }, (_, i) => rec(i * 0.5, i !== 10 && i < 1000))];
    // the naive rule admits everything: 200 past L, none falsely denied
    const also = [Array.from({ length: n }, (_, i) => rec(i * 0.5 + 0.01, true))];
    const p = pairLive(primary, also);
    const c = bothErrors(p.arrivals, p.controlled);
    expect(c.exact).toBe(1000);
    expect(c.false_denials_pct).toBe(0.1);
    expect(c.worst_window_minus_l).toBe(-1);
    expect(c.admitted_vs_exact).toBe(0.999);
    const nv = bothErrors(p.arrivals, p.naive);
    expect(nv.false_denials_pct).toBe(0);
    expect(nv.worst_window_minus_l).toBe(200);
  });
});
