import { describe, expect, it } from 'vitest';
import { counterKey } from '../../src/envoy/key.js';
import { wildcardMatch } from '../../src/envoy/tree.js';
import { config, entries, match } from './helpers.js';

// Each case follows a rule of envoyproxy/ratelimit's README ("Configuration",
// examples 1-11) or its loader (src/config/config_impl.go, GetLimit).

describe('descriptor matching, as envoyproxy/ratelimit documents it', () => {
  it('example 1: a key with a value matches only that value', () => {
    const cfg = config(`
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: { unit: second, requests_per_unit: 500 }
  - key: database
    value: default
    rate_limit: { unit: second, requests_per_unit: 50 }
`);
    expect(match(cfg, 'mongo_cps', 'database=users')?.limit.requestsPerUnit).toBe(500);
    expect(match(cfg, 'mongo_cps', 'database=default')?.limit.requestsPerUnit).toBe(50);
    expect(match(cfg, 'mongo_cps', 'database=other')).toBeUndefined();
    expect(match(cfg, 'mongo_cps', 'table=users')).toBeUndefined();
    // descriptors are case-sensitive
    expect(match(cfg, 'mongo_cps', 'database=Users')).toBeUndefined();
  });

  it('example 2: nested descriptors, and a key without a value counts each value separately', () => {
    const cfg = config(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: { unit: day, requests_per_unit: 5 }
  - key: to_number
    rate_limit: { unit: day, requests_per_unit: 100 }
`);
    const a = match(cfg, 'messaging', 'message_type=marketing', 'to_number=2061111111');
    const b = match(cfg, 'messaging', 'message_type=marketing', 'to_number=2062222222');
    expect(a?.limit.requestsPerUnit).toBe(5);
    expect(b?.limit).toBe(a?.limit);
    expect(a?.key).not.toBe(b?.key);
    const c = match(cfg, 'messaging', 'to_number=2061111111');
    expect(c?.limit.requestsPerUnit).toBe(100);
    expect(c?.limit.policy).not.toBe(a?.limit.policy);
    // the placeholder level has no limit of its own
    expect(match(cfg, 'messaging', 'message_type=marketing')).toBeUndefined();
    // another message type reaches no node
    expect(match(cfg, 'messaging', 'message_type=alert', 'to_number=2061111111')).toBeUndefined();
  });

  it('example 3: key+value is tried before the key alone', () => {
    const cfg = config(`
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: remote_address
    value: 50.0.0.5
    rate_limit: { unit: second, requests_per_unit: 0 }
`);
    expect(match(cfg, 'edge_proxy_per_ip', 'remote_address=50.0.0.1')?.limit.requestsPerUnit).toBe(10);
    const black = match(cfg, 'edge_proxy_per_ip', 'remote_address=50.0.0.5')?.limit;
    expect(black?.requestsPerUnit).toBe(0);
    expect(black?.policy).toBeUndefined(); // nothing to count: every request is over
  });

  it('example 4: the request must reach the level of the rate_limit, no deeper and no shallower', () => {
    const flat = config(`
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit: { requests_per_unit: 300, unit: second }
`);
    expect(match(flat, 'example4', 'key=value', 'subkey=subvalue')).toBeUndefined();
    expect(match(flat, 'example4', 'key=value')?.limit.requestsPerUnit).toBe(300);

    const nested = config(`
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit: { requests_per_unit: 300, unit: second }
`);
    expect(match(nested, 'example4', 'key=value', 'subkey=subvalue')?.limit.requestsPerUnit).toBe(300);
    expect(match(nested, 'example4', 'key=value')).toBeUndefined();
    expect(match(nested, 'example4', 'key=value', 'subkey=subvalue', 'x=y')).toBeUndefined();
  });

  it('a limit on an inner level applies only to requests that end there', () => {
    const cfg = config(`
domain: d
descriptors:
  - key: a
    rate_limit: { requests_per_unit: 1, unit: second }
    descriptors:
      - key: b
        rate_limit: { requests_per_unit: 2, unit: second }
`);
    expect(match(cfg, 'd', 'a=1')?.limit.requestsPerUnit).toBe(1);
    expect(match(cfg, 'd', 'a=1', 'b=2')?.limit.requestsPerUnit).toBe(2);
  });

  it('never backtracks: a key+value node without the next level does not fall back to the key alone', () => {
    const cfg = config(`
domain: d
descriptors:
  - key: user
    value: admin
    rate_limit: { requests_per_unit: 1, unit: second }
  - key: user
    descriptors:
      - key: path
        rate_limit: { requests_per_unit: 7, unit: second }
`);
    expect(match(cfg, 'd', 'user=bob', 'path=/x')?.limit.requestsPerUnit).toBe(7);
    expect(match(cfg, 'd', 'user=admin', 'path=/x')).toBeUndefined();
  });

  it('example 5: unlimited descriptors match with nothing to count', () => {
    const cfg = config(`
domain: internal
descriptors:
  - key: ldap
    rate_limit: { unlimited: true }
  - key: azure
    rate_limit: { unit: minute, requests_per_unit: 100 }
`);
    const ldap = match(cfg, 'internal', 'ldap=x')?.limit;
    expect(ldap?.unlimited).toBe(true);
    expect(ldap?.policy).toBeUndefined();
    expect(match(cfg, 'internal', 'azure=x')?.limit.windowMs).toBe(60_000);
    expect(cfg.policies.map((p) => p.limit)).toEqual([100]);
  });

  it('example 6: shadow_mode is carried to the policy', () => {
    const cfg = config(`
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: { requests_per_unit: 10, unit: second }
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit: { requests_per_unit: 20, unit: second }
`);
    const a = match(cfg, 'example6', 'service=auth', 'user=user-a')!.limit;
    const b = match(cfg, 'example6', 'service=auth', 'user=user-b')!.limit;
    expect(a.shadow).toBe(true);
    expect(b.shadow).toBe(false);
    expect(cfg.policies.find((p) => p.name === a.policy)?.shadow).toBe(true);
  });

  it('example 7: name and replaces are read', () => {
    const cfg = config(`
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: { name: specific_limit, requests_per_unit: 5, unit: second }
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`);
    expect(match(cfg, 'example7', 'key_1=value_1', 'user=bkthomps')?.limit.name).toBe('specific_limit');
    expect(match(cfg, 'example7', 'key_2=value_2', 'user=bkthomps')?.limit.replaces).toEqual([
      'specific_limit',
    ]);
  });

  it('example 9: wildcards, trailing, middle and several, each * matching zero or more characters', () => {
    const cfg = config(`
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: path
    value: /api/*/action
    rate_limit: { unit: minute, requests_per_unit: 21 }
  - key: route
    value: /api/*/resource/*/action
    rate_limit: { unit: minute, requests_per_unit: 22 }
`);
    for (const v of ['value', 'value1', 'valueXYZ'])
      expect(match(cfg, 'example9', `key1=${v}`)).toBeDefined();
    expect(match(cfg, 'example9', 'key1=valu')).toBeUndefined();
    expect(match(cfg, 'example9', 'key1=xvalue')).toBeUndefined();
    expect(match(cfg, 'example9', 'path=/api/123/action')?.limit.requestsPerUnit).toBe(21);
    expect(match(cfg, 'example9', 'path=/api/user-id/action')).toBeDefined();
    expect(match(cfg, 'example9', 'path=/api/123/other')).toBeUndefined();
    expect(match(cfg, 'example9', 'route=/api/v1/resource/123/action')?.limit.requestsPerUnit).toBe(22);
    expect(match(cfg, 'example9', 'route=/api/v1/resource/action')).toBeUndefined();
    // each value matching a wildcard counts separately
    expect(match(cfg, 'example9', 'key1=value1')?.key).not.toBe(match(cfg, 'example9', 'key1=value2')?.key);
  });

  it('wildcard precedence: exact value, then wildcards in config order, then the key alone', () => {
    const cfg = config(`
domain: d
descriptors:
  - key: k
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: k
    value: ab*
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: k
    value: a*
    rate_limit: { unit: second, requests_per_unit: 3 }
  - key: k
    value: abc
    rate_limit: { unit: second, requests_per_unit: 4 }
`);
    expect(match(cfg, 'd', 'k=abc')?.limit.requestsPerUnit).toBe(4);
    expect(match(cfg, 'd', 'k=abd')?.limit.requestsPerUnit).toBe(2);
    expect(match(cfg, 'd', 'k=ax')?.limit.requestsPerUnit).toBe(3);
    expect(match(cfg, 'd', 'k=zzz')?.limit.requestsPerUnit).toBe(1);
  });

  it('example 11: share_threshold makes every value matching the wildcard share one count', () => {
    const cfg = config(`
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit: { unit: hour, requests_per_unit: 10 }
`);
    expect(match(cfg, 'example11', 'files=files/a.pdf')?.key).toBe(
      match(cfg, 'example11', 'files=files/b.csv')?.key,
    );
    expect(match(cfg, 'example11', 'files_no_share=files_no_share/a.pdf')?.key).not.toBe(
      match(cfg, 'example11', 'files_no_share=files_no_share/b.csv')?.key,
    );
  });

  it('an entry with an empty value looks up the key alone', () => {
    const cfg = config(`
domain: d
descriptors:
  - key: k
    rate_limit: { unit: second, requests_per_unit: 1 }
`);
    expect(match(cfg, 'd', 'k=')?.limit.requestsPerUnit).toBe(1);
  });

  it('several files and domains', () => {
    const cfg = config([
      'domain: one\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 1 }\n',
      'domain: two\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 2 }\n',
    ]);
    expect(match(cfg, 'one', 'k=x')?.limit.requestsPerUnit).toBe(1);
    expect(match(cfg, 'two', 'k=x')?.limit.requestsPerUnit).toBe(2);
    expect(match(cfg, 'two', 'k=x')?.limit.file).toBe('b.yaml');
    expect(new Set(cfg.policies.map((p) => p.name)).size).toBe(2);
  });

  it('units, unit_multiplier and the longer units, as windows', () => {
    const cfg = config(`
domain: d
descriptors:
  - { key: s, rate_limit: { unit: SECOND, requests_per_unit: 1 } }
  - { key: m, rate_limit: { unit: Minute, requests_per_unit: 1 } }
  - { key: h, rate_limit: { unit: hour, requests_per_unit: 1 } }
  - { key: d, rate_limit: { unit: day, requests_per_unit: 1 } }
  - { key: x, rate_limit: { unit: second, requests_per_unit: 1, unit_multiplier: 30 } }
  - { key: y, rate_limit: { unit: minute, requests_per_unit: 1, unit_multiplier: 5 } }
  - { key: w, rate_limit: { unit: week, requests_per_unit: 1 } }
  - { key: mo, rate_limit: { unit: MONTH, requests_per_unit: 1, unit_multiplier: 12 } }
  - { key: yr, rate_limit: { unit: year, requests_per_unit: 1 } }
`);
    const w = (k: string) => match(cfg, 'd', `${k}=v`)!.limit.windowMs;
    expect([w('s'), w('m'), w('h'), w('d'), w('x'), w('y')]).toEqual([
      1000, 60_000, 3_600_000, 86_400_000, 30_000, 300_000,
    ]);
    // as theirs: a week is 7 days, a month 30, a year 365
    expect([w('w'), w('mo'), w('yr')]).toEqual([604_800_000, 12 * 2_592_000_000, 31_536_000_000]);
    expect(match(cfg, 'd', 'yr=v')!.limit.unit).toBe('year');
  });

  it('the algorithm is chosen per config: sliding window (global) by default, or a local one', () => {
    const yaml =
      'domain: d\ndescriptors:\n  - { key: k, rate_limit: { unit: minute, requests_per_unit: 9 } }\n';
    const global = config(yaml).policies[0]!;
    expect(global).toMatchObject({ limit: 9, windowMs: 60_000, buckets: 10 });
    expect(global.scope).toBeUndefined();
    expect(config(yaml, { buckets: 60 }).policies[0]!.buckets).toBe(60);
    expect(config(yaml, { algorithm: 'fixed-window' }).policies[0]).toMatchObject({
      scope: 'local',
      algorithm: 'fixed-window',
      limit: 9,
      windowMs: 60_000,
    });
  });
});

describe('counter keys', () => {
  it('are the values joined, escaped so that distinct values never collide', () => {
    const k = (...p: string[]) => counterKey(entries(...p), []);
    expect(k('a=x', 'b=y')).toBe('d:x|y');
    expect(k('a=x|y')).not.toBe(k('a=x', 'b=y'));
    expect(k('a=x%7Cy')).not.toBe(k('a=x|y'));
    expect(k('a=')).toBe('d:');
    expect(k('a=\u0000\n')).toBe('d:%00%0A');
    expect(k('a=\u0085')).toBe('d:%85');
    expect(k('a=caf\u00e9')).toBe('d:caf\u00e9');
    expect(k(`a=${'\ud800'}x`)).toBe('d:%uD800x');
  });

  it('are hashed when longer than 512 bytes', () => {
    const long = counterKey(entries(`a=${'x'.repeat(600)}`), []);
    expect(long).toMatch(/^h:[A-Za-z0-9_-]{43}$/);
    expect(counterKey(entries(`a=${'x'.repeat(599)}y`), [])).not.toBe(long);
    expect(counterKey(entries(`a=${'x'.repeat(510)}`), [])).toBe(`d:${'x'.repeat(510)}`);
  });
});

describe('wildcardMatch', () => {
  it('matches as envoyproxy/ratelimit does', () => {
    const m = (pattern: string, v: string) => wildcardMatch(pattern.split('*'), v);
    expect(m('abc', 'abc')).toBe(true);
    expect(m('abc', 'abcd')).toBe(false);
    expect(m('a*', 'a')).toBe(true);
    expect(m('*', '')).toBe(true);
    expect(m('a*c', 'ac')).toBe(true);
    expect(m('a*c', 'abbbc')).toBe(true);
    expect(m('a*c', 'abcd')).toBe(false);
    expect(m('ab*ba', 'aba')).toBe(false); // fixed parts may not overlap
    expect(m('a*b*c', 'axbyc')).toBe(true);
    expect(m('a*b*c', 'acb')).toBe(false);
    expect(m('a*bc*c', 'abcc')).toBe(true);
    expect(m('a*bc*c', 'abc')).toBe(false);
  });
});
