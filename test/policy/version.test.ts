import { describe, expect, it } from 'vitest';
import { canonicalPolicyJson, compilePolicies, policySetVersion } from '../../src/policy/index.js';

const specs = [
  {
    name: 'api',
    limit: 1000,
    windowMs: 1000,
    local: { algorithm: 'gcra', limit: 100, windowMs: 100, burst: 96 },
  },
  { name: 'login', scope: 'local', algorithm: 'leaky-bucket', limit: 5, windowMs: 60_000, queue: 2 },
  { name: 'export', limit: 10, windowMs: 3_600_000, maxCost: 50, shadow: true },
];

const version = (s: unknown) => compilePolicies(s).version;

describe('policy set version', () => {
  it('is 16 hex characters, pinned: the same in every process and release', () => {
    const v = version(specs);
    expect(v).toMatch(/^[0-9a-f]{16}$/);
    // Pinned: a change here means every deployed mesh would see a version mismatch on upgrade.
    expect(v).toBe(GOLDEN);
  });

  it('ignores the order of keys and of policies', () => {
    const reordered = [
      { windowMs: 3_600_000, shadow: true, maxCost: 50, limit: 10, name: 'export' },
      { queue: 2, windowMs: 60_000, limit: 5, algorithm: 'leaky-bucket', scope: 'local', name: 'login' },
      {
        local: { burst: 96, windowMs: 100, limit: 100, algorithm: 'gcra' },
        windowMs: 1000,
        limit: 1000,
        name: 'api',
      },
    ];
    expect(version(reordered)).toBe(version(specs));
  });

  it('ignores whether defaults were written out', () => {
    const explicit = [
      {
        ...specs[0],
        scope: 'global',
        buckets: 10,
        algorithm: 'sliding-window-counter',
        failureMode: 'open',
        shadow: false,
        maxCost: 1000,
        overAdmission: 'controlled',
        fallback: true,
        local: { algorithm: 'gcra', limit: 100, windowMs: 100, burst: 96 },
      },
      { ...specs[1], failureMode: 'open', maxCost: 5, deadlineMs: 60_000 },
      { ...specs[2], burst: undefined, local: undefined },
    ];
    expect(version(explicit)).toBe(version(specs));
  });

  it('changes with any semantic change', () => {
    const [api, login, exp] = specs as unknown as [
      Record<string, unknown>,
      Record<string, unknown>,
      Record<string, unknown>,
    ];
    const variants: unknown[][] = [
      specs,
      [{ ...api, name: 'api2' }, login, exp],
      [{ ...api, limit: 1001 }, login, exp],
      [{ ...api, windowMs: 1001 }, login, exp],
      [{ ...api, buckets: 20 }, login, exp],
      [{ ...api, failureMode: 'closed' }, login, exp],
      [{ ...api, shadow: true }, login, exp],
      [{ ...api, maxCost: 1 }, login, exp],
      [{ ...api, overAdmission: 'naive' }, login, exp],
      [{ ...api, fallback: false }, login, exp],
      [{ ...api, local: undefined }, login, exp],
      [{ ...api, local: { algorithm: 'gcra', limit: 100, windowMs: 100, burst: 97 } }, login, exp],
      [{ ...api, local: { algorithm: 'token-bucket', limit: 100, windowMs: 100, burst: 96 } }, login, exp],
      [api, { ...login, queue: 3 }, exp],
      [api, { ...login, deadlineMs: 1000 }, exp],
      [api, { ...login, algorithm: 'gcra', queue: undefined }, exp],
      [api, { ...login, scope: 'global', algorithm: undefined, queue: undefined }, exp],
      [api, login],
      [api, login, exp, { name: 'more', limit: 1, windowMs: 1 }],
    ];
    const versions = new Set(variants.map(version));
    expect(versions.size).toBe(variants.length);
  });

  it('hashes a canonical JSON with sorted keys and policies sorted by name', () => {
    const set = compilePolicies([
      { name: 'b', limit: 1, windowMs: 10 },
      { name: 'a', limit: 2, windowMs: 10 },
    ]);
    const json = canonicalPolicyJson(set.policies);
    expect(json).toBe(
      '{"policies":[' +
        '{"buckets":10,"failureMode":"open","fallback":true,"limit":2,"local":null,"maxCost":2,"name":"a","overAdmission":"controlled","scope":"global","shadow":false,"windowMs":10},' +
        '{"buckets":10,"failureMode":"open","fallback":true,"limit":1,"local":null,"maxCost":1,"name":"b","overAdmission":"controlled","scope":"global","shadow":false,"windowMs":10}' +
        '],"schema":"ratemesh.policy/1"}',
    );
    expect(policySetVersion(set.policies)).toBe(set.version);
    expect(policySetVersion([...set.policies].reverse())).toBe(set.version);
  });

  it('sorts names by code unit, not by locale', () => {
    const a = compilePolicies([
      { name: 'B', limit: 1, windowMs: 10 },
      { name: 'a', limit: 1, windowMs: 10 },
    ]);
    expect(canonicalPolicyJson(a.policies).indexOf('"B"')).toBeLessThan(
      canonicalPolicyJson(a.policies).indexOf('"a"'),
    );
  });
});

const GOLDEN = 'b0c6c3b889de5595';
