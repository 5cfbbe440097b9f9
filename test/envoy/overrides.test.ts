import { describe, expect, it } from 'vitest';
import { LimitOverrides, MAX_OVERRIDES } from '../../src/envoy/overrides.js';
import { RlsService } from '../../src/envoy/service.js';
import type { PolicySpec } from '../../src/types.js';
import { config, EngineLimiter, entries } from './helpers.js';

const YAML =
  'domain: web\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n';

function setup() {
  const cfg = config(YAML);
  const limiter = new EngineLimiter(cfg.policies);
  void limiter.start();
  const installed: PolicySpec[][] = [];
  const overrides = new LimitOverrides((added) => {
    installed.push([...added]);
    limiter.replacePolicies([...cfg.policies, ...added]);
  });
  const service = new RlsService({ config: cfg, limiter, clock: limiter.clock, overrides });
  const call = (limit: { requests_per_unit: number; unit: string }, value = 'a') =>
    service.shouldRateLimit({
      domain: 'web',
      hits_addend: 1,
      descriptors: [{ entries: entries(`user=${value}`), limit, hits_addend: null }],
    });
  return { call, installed, overrides };
}

describe('limit overrides in requests', () => {
  it('each distinct (requests_per_unit, unit) is one policy, installed once, counted under the descriptor', () => {
    const { call, installed, overrides } = setup();
    const r = call({ requests_per_unit: 2, unit: 'HOUR' });
    expect(r.ok && r.response.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 2, unit: 'HOUR' },
      limit_remaining: 1,
    });
    call({ requests_per_unit: 2, unit: 'HOUR' });
    const over = call({ requests_per_unit: 2, unit: 'HOUR' });
    expect(over.ok && over.response.overall_code).toBe('OVER_LIMIT');
    // another value of the descriptor has its own count
    const other = call({ requests_per_unit: 2, unit: 'HOUR' }, 'b');
    expect(other.ok && other.response.statuses[0]!.limit_remaining).toBe(1);
    expect(installed).toHaveLength(1);
    expect(overrides.policies().map((p) => p.name)).toEqual(['envoy-override:2-hour']);
    // requests_per_unit 0 is always over, and needs no policy
    const zero = call({ requests_per_unit: 0, unit: 'SECOND' });
    expect(zero.ok && zero.response.overall_code).toBe('OVER_LIMIT');
    expect(installed).toHaveLength(1);
  });

  it(`at most ${MAX_OVERRIDES} distinct overrides per node; past that INVALID_ARGUMENT naming the field`, () => {
    const { call, overrides } = setup();
    for (let i = 1; i <= MAX_OVERRIDES; i++)
      expect(call({ requests_per_unit: i, unit: 'MINUTE' }).ok).toBe(true);
    const r = call({ requests_per_unit: MAX_OVERRIDES + 1, unit: 'MINUTE' });
    expect(r).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    expect(!r.ok && r.message).toMatch(/^descriptors\[0\]\.limit: at most 64 distinct limit overrides/);
    expect(overrides.policies()).toHaveLength(MAX_OVERRIDES);
    // one already made still works
    expect(call({ requests_per_unit: 1, unit: 'MINUTE' }).ok).toBe(true);
  });

  it('an unknown unit or a bad count is INVALID_ARGUMENT', () => {
    const { call } = setup();
    expect(call({ requests_per_unit: 1, unit: 'UNKNOWN' })).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
    expect(call({ requests_per_unit: -1, unit: 'SECOND' })).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    });
  });
});
