import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { ErrorCodes } from '../../src/errors.js';
import { compilePolicies, compilePolicy } from '../../src/policy/index.js';
import { expectRateMeshError } from './expect-error.js';

const base = { name: 'api', limit: 100, windowMs: 1000 };

/** Compiles `[spec]` and returns the POLICY_INVALID error for `field` (a path under policies[0]). */
function invalid(spec: unknown, field: string) {
  return expectRateMeshError(() => compilePolicies([spec]), ErrorCodes.POLICY_INVALID, field);
}

describe('compilePolicies: the set', () => {
  it('rejects anything but a non-empty array', () => {
    expect(
      expectRateMeshError(() => compilePolicies({}), ErrorCodes.POLICY_INVALID, 'policies').message,
    ).toBe('policies: must be an array of policies (got an object)');
    expect(
      expectRateMeshError(() => compilePolicies(undefined), ErrorCodes.POLICY_INVALID, 'policies').message,
    ).toMatch(/got undefined/);
    expect(
      expectRateMeshError(() => compilePolicies([]), ErrorCodes.POLICY_INVALID, 'policies').message,
    ).toBe('policies: must hold at least one policy (got an empty array)');
  });

  it('rejects duplicate names with their own code, naming both positions', () => {
    const err = expectRateMeshError(
      () => compilePolicies([base, { ...base, name: 'other' }, { ...base, limit: 5 }]),
      ErrorCodes.POLICY_DUPLICATE,
      'policies[2].name',
    );
    expect(err.message).toContain('"api" is already used by policies[0]');
  });

  it('looks policies up by name and index, in the given order', () => {
    const set = compilePolicies([base, { ...base, name: 'login', limit: 5 }]);
    expect(set.policies.map((p) => p.name)).toEqual(['api', 'login']);
    expect(set.byName('login')?.limit).toBe(5);
    expect(set.byName('nope')).toBeUndefined();
    expect(set.byName('toString')).toBeUndefined();
    expect(set.index('api')).toBe(0);
    expect(set.index('login')).toBe(1);
    expect(set.index('nope')).toBe(-1);
    expect(set.version).toMatch(/^[0-9a-f]{16}$/);
  });

  it('freezes the set, its policies and their local specs', () => {
    const set = compilePolicies([{ ...base, local: { limit: 10, windowMs: 100 } }]);
    const p = set.policies[0]!;
    expect(Object.isFrozen(set)).toBe(true);
    expect(Object.isFrozen(set.policies)).toBe(true);
    expect(Object.isFrozen(p)).toBe(true);
    expect(Object.isFrozen(p.local)).toBe(true);
    expect(() => {
      (p as { limit: number }).limit = 1;
    }).toThrow(TypeError);
    expect(() => {
      (set.policies as unknown[]).push(p);
    }).toThrow(TypeError);
  });

  it('accepts policies parsed from YAML', () => {
    const set = compilePolicies(
      parseYaml(`
- name: api
  limit: 1000
  windowMs: 1000
  local: { algorithm: token-bucket, limit: 50, windowMs: 100, burst: 96 }
- name: login
  scope: local
  algorithm: leaky-bucket
  limit: 5
  windowMs: 60000
  queue: 2
  failureMode: closed
`),
    );
    expect(set.byName('api')?.local).toEqual({
      algorithm: 'token-bucket',
      limit: 50,
      windowMs: 100,
      burst: 96,
      buckets: 10,
      queue: 50,
      deadlineMs: 100,
    });
    expect(set.byName('login')?.failureMode).toBe('closed');
  });

  it('a typo in YAML (a quoted number) is caught with a hint', () => {
    const err = expectRateMeshError(
      () => compilePolicies(parseYaml('- { name: api, limit: "10", windowMs: 1000 }')),
      ErrorCodes.POLICY_INVALID,
      'policies[0].limit',
    );
    expect(err.message).toBe(
      'policies[0].limit: must be a positive integer number of cells, at most 1000000000; write it without quotes (got "10")',
    );
  });
});

describe('compilePolicy: defaults', () => {
  it('fills every default of a global policy', () => {
    expect(compilePolicy(base)).toEqual({
      name: 'api',
      scope: 'global',
      limit: 100,
      windowMs: 1000,
      buckets: 10,
      local: undefined,
      failureMode: 'open',
      shadow: false,
      maxCost: 100,
      overAdmission: 'controlled',
      fallback: true,
    });
  });

  it('fills a local policy: gcra, with limit and window copied into local', () => {
    expect(compilePolicy({ ...base, scope: 'local' })).toEqual({
      name: 'api',
      scope: 'local',
      limit: 100,
      windowMs: 1000,
      buckets: 10,
      local: {
        algorithm: 'gcra',
        limit: 100,
        windowMs: 1000,
        burst: 100,
        buckets: 10,
        queue: 100,
        deadlineMs: 1000,
      },
      failureMode: 'open',
      shadow: false,
      maxCost: 100,
      overAdmission: 'controlled',
      fallback: true,
    });
  });

  it('keeps the values given', () => {
    const p = compilePolicy({
      ...base,
      buckets: 20,
      failureMode: 'closed',
      shadow: true,
      maxCost: 5000,
      overAdmission: 'naive',
      fallback: false,
      algorithm: 'sliding-window-counter',
    });
    expect(p).toMatchObject({
      buckets: 20,
      failureMode: 'closed',
      shadow: true,
      maxCost: 5000,
      overAdmission: 'naive',
      fallback: false,
    });
  });

  it('fills a front limiter on a global policy', () => {
    expect(compilePolicy({ ...base, local: { limit: 10, windowMs: 100, burst: 20 } }).local).toEqual({
      algorithm: 'gcra',
      limit: 10,
      windowMs: 100,
      burst: 20,
      buckets: 10,
      queue: 10,
      deadlineMs: 100,
    });
  });

  it('uses one bucket per ms when the window is shorter than 10 ms', () => {
    expect(compilePolicy({ ...base, windowMs: 4 }).buckets).toBe(4);
    expect(compilePolicy({ ...base, windowMs: 1, scope: 'local' }).local?.buckets).toBe(1);
  });

  it('accepts each algorithm with its own fields', () => {
    const local = { ...base, scope: 'local' };
    expect(compilePolicy({ ...local, algorithm: 'gcra', burst: 5 }).local?.burst).toBe(5);
    expect(compilePolicy({ ...local, algorithm: 'token-bucket', burst: 500 }).local?.burst).toBe(500);
    expect(compilePolicy({ ...local, algorithm: 'fixed-window' }).local?.algorithm).toBe('fixed-window');
    expect(compilePolicy({ ...local, algorithm: 'sliding-window-counter', buckets: 60 }).buckets).toBe(60);
    expect(compilePolicy({ ...local, algorithm: 'sliding-window-log' }).local?.algorithm).toBe(
      'sliding-window-log',
    );
    expect(
      compilePolicy({ ...local, algorithm: 'leaky-bucket', queue: 3, deadlineMs: 250 }).local,
    ).toMatchObject({
      queue: 3,
      deadlineMs: 250,
    });
  });

  it('treats undefined fields as absent', () => {
    expect(compilePolicy({ ...base, shadow: undefined, local: undefined, buckets: undefined })).toEqual(
      compilePolicy(base),
    );
  });

  it('accepts the bounds', () => {
    expect(compilePolicy({ name: 'a'.repeat(64), limit: 1e9, windowMs: 86_400_000, buckets: 60 }).limit).toBe(
      1e9,
    );
    expect(compilePolicy({ name: 'A-z_0.9:x', limit: 1, windowMs: 1 }).windowMs).toBe(1);
    expect(compilePolicy({ ...base, maxCost: 1e9 }).maxCost).toBe(1e9);
  });

  it('accepts a null-prototype object', () => {
    const spec = Object.assign(Object.create(null), base);
    expect(compilePolicy(spec).name).toBe('api');
  });

  it('uses the given path in errors', () => {
    expectRateMeshError(
      () => compilePolicy({ ...base, limit: 0 }),
      ErrorCodes.POLICY_INVALID,
      'policies[0].limit',
    );
    expectRateMeshError(
      () => compilePolicy({ ...base, limit: 0 }, 'cfg.p'),
      ErrorCodes.POLICY_INVALID,
      'cfg.p.limit',
    );
    const second = expectRateMeshError(
      () => compilePolicies([base, { ...base, name: 'b', windowMs: -5 }]),
      ErrorCodes.POLICY_INVALID,
      'policies[1].windowMs',
    );
    expect(second.message).toBe(
      'policies[1].windowMs: must be an integer number of milliseconds between 1 and 31622400000 (got -5)',
    );
  });
});

describe('compilePolicy: every invalid field', () => {
  const local = { ...base, scope: 'local' };
  // [what, spec, field under policies[0], message fragment]
  const cases: [string, unknown, string, string][] = [
    ['null policy', null, '', 'must be an object (got null)'],
    ['array policy', [base], '', 'must be an object (got an array of 1)'],
    ['string policy', 'api', '', 'must be an object (got "api")'],
    ['class instance', new Map(), '', 'must be a plain object'],
    ['inherited fields', Object.create(base), '', 'must be a plain object'],
    ['missing name', { limit: 1, windowMs: 1 }, '.name', 'is required: a string of 1 to 64'],
    [
      'empty name',
      { ...base, name: '' },
      '.name',
      'must be a string of 1 to 64 characters from A-Z a-z 0-9 _ . : - (got "")',
    ],
    ['long name', { ...base, name: 'a'.repeat(65) }, '.name', '(65 characters)'],
    ['name with space', { ...base, name: 'a b' }, '.name', '(got "a b")'],
    ['non-ASCII name', { ...base, name: 'é' }, '.name', '(got "é")'],
    ['name with newline', { ...base, name: 'a\n' }, '.name', '(got "a\\n")'],
    ['numeric name', { ...base, name: 5 }, '.name', '(got 5)'],
    ['unknown field', { ...base, limt: 5 }, '.limt', 'unknown field; did you mean "limit"? (got 5)'],
    ['unknown field, case', { ...base, WindowMS: 5 }, '.WindowMS', 'did you mean "windowMs"?'],
    [
      'unknown field, far',
      { ...base, colour: 'red' },
      '.colour',
      'unknown field; known fields: name, scope, limit',
    ],
    [
      '__proto__ from JSON',
      JSON.parse('{"name":"a","limit":1,"windowMs":1,"__proto__":{"x":1}}'),
      '.__proto__',
      'unknown field',
    ],
    ['odd field name', { ...base, 'a b': 1 }, '["a b"]', 'unknown field'],
    ['scope', { ...base, scope: 'regional' }, '.scope', 'must be one of "global", "local" (got "regional")'],
    ['scope type', { ...base, scope: 1 }, '.scope', '(got 1)'],
    [
      'missing limit',
      { name: 'a', windowMs: 1 },
      '.limit',
      'is required: a positive integer number of cells, at most 1000000000 (got undefined)',
    ],
    [
      'zero limit',
      { ...base, limit: 0 },
      '.limit',
      'must be a positive integer number of cells, at most 1000000000 (got 0)',
    ],
    ['negative limit', { ...base, limit: -1 }, '.limit', '(got -1)'],
    ['fractional limit', { ...base, limit: 1.5 }, '.limit', '(got 1.5)'],
    ['huge limit', { ...base, limit: 1e9 + 1 }, '.limit', '(got 1000000001)'],
    ['NaN limit', { ...base, limit: Number.NaN }, '.limit', '(got NaN)'],
    ['Infinity limit', { ...base, limit: Number.POSITIVE_INFINITY }, '.limit', '(got Infinity)'],
    ['string limit', { ...base, limit: '10' }, '.limit', 'write it without quotes (got "10")'],
    ['word limit', { ...base, limit: 'many' }, '.limit', 'at most 1000000000 (got "many")'],
    ['null limit', { ...base, limit: null }, '.limit', '(got null)'],
    ['boolean limit', { ...base, limit: true }, '.limit', '(got true)'],
    ['bigint limit', { ...base, limit: 10n }, '.limit', '(got 10n (a bigint))'],
    [
      'missing window',
      { name: 'a', limit: 1 },
      '.windowMs',
      'is required: an integer number of milliseconds',
    ],
    [
      'negative window',
      { ...base, windowMs: -5 },
      '.windowMs',
      'must be an integer number of milliseconds between 1 and 31622400000 (got -5)',
    ],
    ['zero window', { ...base, windowMs: 0 }, '.windowMs', '(got 0)'],
    ['window over 366 days', { ...base, windowMs: 31_622_400_001 }, '.windowMs', '(got 31622400001)'],
    ['fractional window', { ...base, windowMs: 0.5 }, '.windowMs', '(got 0.5)'],
    ['string window', { ...base, windowMs: '1s' }, '.windowMs', '(got "1s")'],
    ['zero buckets', { ...base, buckets: 0 }, '.buckets', 'must be an integer between 1 and 60 (got 0)'],
    ['61 buckets', { ...base, buckets: 61 }, '.buckets', '(got 61)'],
    ['fractional buckets', { ...base, buckets: 2.5 }, '.buckets', '(got 2.5)'],
    [
      'buckets under 1 ms',
      { ...base, windowMs: 5, buckets: 6 },
      '.buckets',
      'must not exceed windowMs (5): each bucket must span at least 1 ms (got 6)',
    ],
    [
      'global algorithm',
      { ...base, algorithm: 'gcra' },
      '.algorithm',
      "give local: { algorithm: 'gcra', limit, windowMs }",
    ],
    [
      'global algorithm says scope',
      { ...base, algorithm: 'leaky-bucket' },
      '.algorithm',
      "or set scope: 'local'",
    ],
    [
      'unknown algorithm',
      { ...base, algorithm: 'magic' },
      '.algorithm',
      'must be one of "gcra", "token-bucket", "fixed-window"',
    ],
    ['unknown local algorithm', { ...local, algorithm: 'GCRA' }, '.algorithm', '(got "GCRA")'],
    [
      'global burst',
      { ...base, burst: 5 },
      '.burst',
      'applies only to scope "local", or to the front limiter given in `local` (got 5)',
    ],
    ['global queue', { ...base, queue: 5 }, '.queue', 'applies only to scope "local"'],
    ['global deadline', { ...base, deadlineMs: 5 }, '.deadlineMs', 'applies only to scope "local"'],
    [
      'local with front',
      { ...local, local: { limit: 1, windowMs: 1 } },
      '.local',
      'applies only to scope "global"; a local policy is enforced by its algorithm on this process alone (got an object)',
    ],
    [
      'local overAdmission',
      { ...local, overAdmission: 'naive' },
      '.overAdmission',
      'applies only to scope "global"',
    ],
    ['local fallback', { ...local, fallback: false }, '.fallback', 'applies only to scope "global"'],
    [
      'routing (removed)',
      { ...base, routing: 'spread' },
      '.routing',
      'was removed: the decision rule needs no routing hint',
    ],
    [
      'burst on fixed-window',
      { ...local, algorithm: 'fixed-window', burst: 5 },
      '.burst',
      'applies only to algorithm gcra or token-bucket, not fixed-window (got 5)',
    ],
    ['queue on gcra', { ...local, queue: 5 }, '.queue', 'applies only to algorithm leaky-bucket, not gcra'],
    [
      'deadline on token-bucket',
      { ...local, algorithm: 'token-bucket', deadlineMs: 5 },
      '.deadlineMs',
      'applies only to algorithm leaky-bucket, not token-bucket',
    ],
    [
      'buckets on gcra',
      { ...local, buckets: 5 },
      '.buckets',
      'applies only to algorithm sliding-window-counter, not gcra',
    ],
    [
      'zero burst',
      { ...local, burst: 0 },
      '.burst',
      'must be a positive integer number of cells, at most 1000000000 (got 0)',
    ],
    ['fractional queue', { ...local, algorithm: 'leaky-bucket', queue: 1.5 }, '.queue', '(got 1.5)'],
    [
      'zero deadline',
      { ...local, algorithm: 'leaky-bucket', deadlineMs: 0 },
      '.deadlineMs',
      'must be an integer number of milliseconds between 1 and 86400000 (got 0)',
    ],
    [
      'long deadline',
      { ...local, algorithm: 'leaky-bucket', deadlineMs: 86_400_001 },
      '.deadlineMs',
      '(got 86400001)',
    ],
    [
      'local buckets under 1 ms',
      { ...local, windowMs: 3, algorithm: 'sliding-window-counter', buckets: 4 },
      '.buckets',
      'must not exceed windowMs (3)',
    ],
    ['front not an object', { ...base, local: 'gcra' }, '.local', 'must be an object (got "gcra")'],
    [
      'front unknown field',
      { ...base, local: { limit: 1, windowMs: 1, brust: 2 } },
      '.local.brust',
      'did you mean "burst"?',
    ],
    [
      'front policy-only field',
      { ...base, local: { limit: 1, windowMs: 1, shadow: true } },
      '.local.shadow',
      'unknown field',
    ],
    ['front missing limit', { ...base, local: { windowMs: 1 } }, '.local.limit', 'is required'],
    ['front missing window', { ...base, local: { limit: 1 } }, '.local.windowMs', 'is required'],
    [
      'front bad algorithm',
      { ...base, local: { algorithm: 'x', limit: 1, windowMs: 1 } },
      '.local.algorithm',
      'must be one of',
    ],
    [
      'front wrong field',
      { ...base, local: { limit: 1, windowMs: 1, queue: 1 } },
      '.local.queue',
      'applies only to algorithm leaky-bucket, not gcra',
    ],
    ['front bad burst', { ...base, local: { limit: 1, windowMs: 1, burst: -1 } }, '.local.burst', '(got -1)'],
    [
      'failureMode',
      { ...base, failureMode: 'half' },
      '.failureMode',
      'must be one of "open", "closed" (got "half")',
    ],
    ['shadow string', { ...base, shadow: 'yes' }, '.shadow', 'must be true or false (got "yes")'],
    ['shadow number', { ...base, shadow: 1 }, '.shadow', '(got 1)'],
    [
      'zero maxCost',
      { ...base, maxCost: 0 },
      '.maxCost',
      'must be a positive integer number of cells, at most 1000000000 (got 0)',
    ],
    ['fractional maxCost', { ...base, maxCost: 2.5 }, '.maxCost', '(got 2.5)'],
    [
      'overAdmission',
      { ...base, overAdmission: 'smart' },
      '.overAdmission',
      'must be one of "controlled", "naive" (got "smart")',
    ],
    ['fallback', { ...base, fallback: 'no' }, '.fallback', 'must be true or false (got "no")'],
  ];

  it.each(cases)('%s', (_what, spec, field, fragment) => {
    const path = `policies[0]${field}`;
    const err = invalid(spec, path);
    expect(err.message).toContain(fragment);
    expect(err.message).toMatch(/\(got .+\)$/);
    // compilePolicy reports the same field.
    expectRateMeshError(() => compilePolicy(spec), ErrorCodes.POLICY_INVALID, path);
  });

  it('keeps messages short for huge values', () => {
    const err = invalid({ ...base, name: 'x'.repeat(100_000) }, 'policies[0].name');
    expect(err.message.length).toBeLessThan(250);
    const key = invalid(
      { ...base, ['k'.repeat(10_000)]: 1 },
      `policies[0][${JSON.stringify('k'.repeat(64))}…]`,
    );
    expect(key.message.length).toBeLessThan(400);
  });
});

describe('placement (issue 27)', () => {
  it('defaults to auto, left out of the compiled policy (versions unchanged)', () => {
    const p = compilePolicy({ name: 'login', limit: 5, windowMs: 60_000 });
    expect(p.placement).toBeUndefined();
    expect(p.ownerDeadlineMs).toBeUndefined();
  });
  it('keeps local and owner, and a deadline other than the default', () => {
    expect(compilePolicy({ name: 'a', limit: 5, windowMs: 1000, placement: 'owner' }).placement).toBe(
      'owner',
    );
    expect(compilePolicy({ name: 'a', limit: 5, windowMs: 1000, placement: 'local' }).placement).toBe(
      'local',
    );
    expect(compilePolicy({ name: 'a', limit: 5, windowMs: 1000, ownerDeadlineMs: 20 }).ownerDeadlineMs).toBe(
      20,
    );
  });
  it('refuses other placements, bad deadlines, and both on a local-scope policy', () => {
    expect(() => compilePolicy({ name: 'a', limit: 5, windowMs: 1000, placement: 'remote' })).toThrow(
      /placement/,
    );
    expect(() => compilePolicy({ name: 'a', limit: 5, windowMs: 1000, ownerDeadlineMs: 0 })).toThrow(
      /ownerDeadlineMs/,
    );
    expect(() => compilePolicy({ name: 'a', limit: 5, windowMs: 1000, ownerDeadlineMs: 1.5 })).toThrow(
      /ownerDeadlineMs/,
    );
    expect(() =>
      compilePolicy({ name: 'a', scope: 'local', limit: 5, windowMs: 1000, placement: 'owner' }),
    ).toThrow(/placement/);
  });
});
