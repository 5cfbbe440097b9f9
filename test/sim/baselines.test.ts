import { describe, expect, it } from 'vitest';
import { gcraBound, runBaselines } from '../../src/sim/baselines.js';
import { worstAligned, worstRolling } from '../../src/sim/metrics.js';
import { seedTrace } from '../../src/sim/trace.js';

describe('the seed baselines (shared/seeds/000), exactly', () => {
  const trace = seedTrace();
  const rows = runBaselines(trace);
  const by = Object.fromEntries(rows.map((r) => [r.design, r]));

  it('limit bound 10095 of 20000 offered', () => {
    expect(gcraBound(trace)).toBe(10_095);
    expect(trace.t.length).toBe(20_000);
  });

  it('central: 10095 admitted, 1.000 calls per request, never above the bound', () => {
    expect(by.central!.admitted.length).toBe(10_095);
    expect((by.central!.calls / 20_000).toFixed(3)).toBe('1.000');
    expect(by.central!.admitted.length).toBeLessThanOrEqual(gcraBound(trace));
  });

  it('static L/N: 8997 admitted, 0 calls', () => {
    expect(by.static!.admitted.length).toBe(8997);
    expect((by.static!.calls / 20_000).toFixed(3)).toBe('0.000');
  });

  it('lease x20: 10058 admitted, 0.566 calls per request', () => {
    expect(by.lease!.admitted.length).toBe(10_058);
    expect((by.lease!.calls / 20_000).toFixed(3)).toBe('0.566');
  });

  it('rows in the seed order, admitted times ascending and drawn from the trace', () => {
    expect(rows.map((r) => r.design)).toEqual(['central', 'static', 'lease']);
    for (const r of rows) {
      for (let i = 1; i < r.admitted.length; i++) expect(r.admitted[i]!).toBeGreaterThan(r.admitted[i - 1]!);
      for (const t of r.admitted.slice(0, 50)) expect(Number.isInteger(t * 2)).toBe(true);
    }
    // central: GCRA of burst 96 at 1/ms admits at most 96 + w in any [s, s + w)
    expect(worstRolling(by.central!.admitted, 1000)).toBeLessThanOrEqual(96 + 1000);
    expect(worstAligned(by.central!.admitted, 100)).toBeLessThanOrEqual(96 + 100);
  });

  it('is deterministic', () => {
    const again = runBaselines(seedTrace());
    expect(again.map((r) => [r.admitted.length, r.calls])).toEqual(
      rows.map((r) => [r.admitted.length, r.calls]),
    );
  });

  it('gcraBound on a small trace', () => {
    expect(gcraBound({ t: new Float64Array([0, 10.5]), node: new Uint8Array(2), nodes: 1 })).toBe(96 + 10);
    expect(gcraBound({ t: new Float64Array([0, 100]), node: new Uint8Array(2), nodes: 1 }, 2, 5)).toBe(
      5 + 50,
    );
  });
});
