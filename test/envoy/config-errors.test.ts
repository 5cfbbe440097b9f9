import { describe, expect, it } from 'vitest';
import { EnvoyConfigError, parseEnvoyConfig } from '../../src/envoy/config.js';
import { config } from './helpers.js';

/** The error a config throws: file, YAML path, line and reason. */
function errorOf(texts: string | string[], opts?: Parameters<typeof config>[1]): EnvoyConfigError {
  try {
    config(texts, opts);
  } catch (err) {
    if (err instanceof EnvoyConfigError) return err;
    throw err;
  }
  throw new Error('expected the config to be refused');
}

const ok = (rl: string) => `domain: d\ndescriptors:\n  - key: k\n    rate_limit: ${rl}\n`;

describe('config errors name the file, the YAML path and the reason', () => {
  it('a bad unit', () => {
    const e = errorOf(ok('{ unit: fortnight, requests_per_unit: 5 }'));
    expect(e.file).toBe('a.yaml');
    expect(e.yamlPath).toBe('descriptors[0].rate_limit.unit');
    expect(e.line).toBe(4);
    expect(e.problem).toMatch(/^invalid rate limit unit 'fortnight'/);
    expect(e.message).toBe(`a.yaml: descriptors[0].rate_limit.unit (line 4): ${e.problem}`);
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.field).toBe('descriptors[0].rate_limit.unit');
  });

  it.each([
    ['no domain', 'descriptors: []\n', 'domain', /config file cannot have empty domain/],
    ['an empty file', '', 'domain', /config file cannot have empty domain/],
    ['an empty domain', 'domain: ""\n', 'domain', /empty domain/],
    [
      'a descriptor without a key',
      'domain: d\ndescriptors:\n  - value: v\n',
      'descriptors[0].key',
      /empty key/,
    ],
    [
      'a duplicate descriptor',
      'domain: d\ndescriptors:\n  - { key: k, value: v }\n  - { key: k, value: v }\n',
      'descriptors[1]',
      /duplicate descriptor composite key 'd.k_v'/,
    ],
    [
      'a duplicate key-only descriptor, nested',
      'domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - { key: k }\n      - { key: k }\n',
      'descriptors[0].descriptors[1]',
      /duplicate descriptor composite key 'd.a.k'/,
    ],
    [
      'their composite-key collision (key a_b vs key a value b)',
      'domain: d\ndescriptors:\n  - { key: a_b }\n  - { key: a, value: b }\n',
      'descriptors[1]',
      /duplicate descriptor composite key/,
    ],
    ['a duplicate YAML key', 'domain: d\ndomain: e\n', '(document)', /duplicate key/],
    ['broken YAML', 'domain: [d\n', '(document)', /not valid YAML/],
    [
      'an unknown key',
      'domain: d\ndescriptors:\n  - { key: k, rate: 1 }\n',
      'descriptors[0].rate',
      /unknown key 'rate'/,
    ],
    ['an unknown top-level key', 'domain: d\nlimits: []\n', 'limits', /unknown key 'limits'/],
    [
      'a list of non-maps',
      'domain: d\ndescriptors:\n  - k\n',
      'descriptors[0]',
      /list of type other than map/,
    ],
    ['descriptors not a list', 'domain: d\ndescriptors: { key: k }\n', 'descriptors', /must be a list/],
    ['a float', 'domain: d\ndescriptors:\n  - { key: k, value: 1.5 }\n', 'descriptors[0].value', /floats/],
    [
      'shadow_mode not a boolean',
      ok('{ unit: second, requests_per_unit: 1 }').replace(
        '  - key: k\n',
        '  - key: k\n    shadow_mode: "yes"\n',
      ),
      'descriptors[0].shadow_mode',
      /true or false/,
    ],
    [
      'a unit with unlimited',
      ok('{ unlimited: true, unit: second }'),
      'descriptors[0].rate_limit.unit',
      /should not specify rate limit unit when unlimited/,
    ],
    [
      'no unit',
      ok('{ requests_per_unit: 1 }'),
      'descriptors[0].rate_limit.unit',
      /invalid rate limit unit ''/,
    ],
    [
      'unit UNKNOWN',
      ok('{ unit: unknown, requests_per_unit: 1 }'),
      'descriptors[0].rate_limit.unit',
      /invalid rate limit unit/,
    ],
    [
      'unit_multiplier 0',
      ok('{ unit: second, requests_per_unit: 1, unit_multiplier: 0 }'),
      'descriptors[0].rate_limit.unit_multiplier',
      /invalid unit multiplier of 0/,
    ],
    [
      'a negative requests_per_unit',
      ok('{ unit: second, requests_per_unit: -1 }'),
      'descriptors[0].rate_limit.requests_per_unit',
      /0\.\.4294967295/,
    ],
    [
      'a quoted requests_per_unit',
      ok('{ unit: second, requests_per_unit: "5" }'),
      'descriptors[0].rate_limit.requests_per_unit',
      /integer/,
    ],
    [
      'a missing requests_per_unit',
      ok('{ unit: second }'),
      'descriptors[0].rate_limit.requests_per_unit',
      /is required/,
    ],
    [
      'an empty replaces entry',
      ok('{ unit: second, requests_per_unit: 1, replaces: [ { name: "" } ] }'),
      'descriptors[0].rate_limit.replaces[0]',
      /empty replaces entry/,
    ],
    [
      'replaces naming itself',
      ok('{ name: me, unit: second, requests_per_unit: 1, replaces: [ { name: me } ] }'),
      'descriptors[0].rate_limit.replaces[0].name',
      /same descriptor/,
    ],
    [
      'share_threshold without a wildcard',
      'domain: d\ndescriptors:\n  - { key: k, value: v, share_threshold: true }\n',
      'descriptors[0].share_threshold',
      /only be used with wildcard/,
    ],
    [
      'two years (longer than ratemesh enforces)',
      ok('{ unit: year, requests_per_unit: 1, unit_multiplier: 2 }'),
      'descriptors[0].rate_limit.unit_multiplier',
      /at most 366 days \(31622400 s\); 2 × year is 63072000 s/,
    ],
    [
      'thirteen months',
      ok('{ unit: month, requests_per_unit: 1, unit_multiplier: 13 }'),
      'descriptors[0].rate_limit.unit_multiplier',
      /at most 366 days/,
    ],
    [
      'more requests than ratemesh counts',
      ok('{ unit: second, requests_per_unit: 4000000000 }'),
      'descriptors[0].rate_limit.requests_per_unit',
      /at most 1000000000/,
    ],
  ])('%s', (_name, text, path, reason) => {
    const e = errorOf(text);
    expect(e.file).toBe('a.yaml');
    expect(e.yamlPath).toBe(path);
    expect(e.problem).toMatch(reason);
    expect(e.message.startsWith(`a.yaml: ${path}`)).toBe(true);
  });

  it('a domain in two files, unless merging is asked for', () => {
    const one =
      'domain: d\ndescriptors:\n  - { key: a, rate_limit: { unit: second, requests_per_unit: 1 } }\n';
    const two =
      'domain: d\ndescriptors:\n  - { key: b, rate_limit: { unit: second, requests_per_unit: 2 } }\n';
    const e = errorOf([one, two]);
    expect(e.file).toBe('b.yaml');
    expect(e.yamlPath).toBe('domain');
    expect(e.problem).toMatch(/duplicate domain 'd': already defined in a.yaml/);
    const merged = config([one, two], { mergeDomains: true });
    expect(merged.policies).toHaveLength(2);
    // merging still refuses a descriptor defined in both
    expect(errorOf([one, one], { mergeDomains: true }).problem).toMatch(
      /duplicate descriptor composite key 'd.a'/,
    );
  });

  it('reads values written as integers or booleans as text, as yaml.v2 does', () => {
    const cfg = config(
      'domain: 42\ndescriptors:\n  - { key: phone, value: 2061234567, rate_limit: { unit: hour, requests_per_unit: 3 } }\n',
    );
    expect(cfg.domains.has('42')).toBe(true);
    expect(cfg.domains.get('42')?.exact.get('phone')?.has('2061234567')).toBe(true);
  });

  it('accepts the fields ratemesh only reads for metrics or ignores', () => {
    const cfg = config(`
domain: d
descriptors:
  - key: k
    detailed_metric: true
    value_to_metric: true
    quota_mode: true
    metadata: { team: { name: x }, tags: [a, b] }
    rate_limit: { unit: second, requests_per_unit: 1, name: n }
`);
    expect(cfg.rateLimits[0]).toMatchObject({ detailedMetric: true, quota: true, name: 'n' });
    expect(cfg.rateLimits[0]!.metadata).toEqual({ team: { name: 'x' }, tags: ['a', 'b'] });
  });

  it('refuses an unknown algorithm or bucket count', () => {
    expect(() => parseEnvoyConfig([], { algorithm: 'leaky-bucket' as never })).toThrow(/algorithm/);
    expect(() => parseEnvoyConfig([], { buckets: 0 })).toThrow(/buckets/);
  });

  it('bounds nesting', () => {
    let yaml = 'domain: d\ndescriptors:\n';
    let indent = '  ';
    for (let i = 0; i < 40; i++) {
      yaml += `${indent}- key: k${i}\n${indent}  descriptors:\n`;
      indent += '    ';
    }
    yaml += `${indent}- key: leaf\n`;
    expect(errorOf(yaml).problem).toMatch(/deeper than 32/);
  });

  it('bounds alias expansion ("billion laughs" through nested descriptor lists)', () => {
    // L_k is a list of 10 descriptors whose children are all L_(k-1): 10^7 nodes once expanded
    const list = (k: number): string => {
      const items = Array.from({ length: 10 }, (_, i) => {
        const children = k === 0 ? '' : `, descriptors: ${i === 0 ? list(k - 1) : `*l${k - 1}`}`;
        return `{ key: k${k}_${i}${children} }`;
      });
      return `&l${k} [${items.join(', ')}]`;
    };
    const e = errorOf(`domain: d\ndescriptors: ${list(6)}\n`);
    expect(e.problem).toMatch(/more than 1000 aliases followed/);
  });

  it('resolves YAML anchors and aliases', () => {
    const cfg = config(`
domain: d
descriptors:
  - key: a
    rate_limit: &rl { unit: second, requests_per_unit: 3 }
  - key: b
    rate_limit: *rl
`);
    expect(cfg.rateLimits.map((r) => r.requestsPerUnit)).toEqual([3, 3]);
    expect(cfg.policies).toHaveLength(2);
  });
});
