/**
 * envoyproxy/ratelimit's own expectations, ported: their `test/integration`
 * (testBasicBaseConfig, testConfigReload), `test/redis` (TestRedis,
 * TestOverLimitWithStopCacheKeyIncrementWhenOverlimitConfig), `test/service`
 * (shadow mode, quota mode, unlimited, headers, health), `test/config`
 * (TestBasicConfig, TestConfigLimitOverride) and `integration-test/scripts/*.sh`,
 * on their own config files (test/envoy/anchor/, Apache-2.0), over gRPC,
 * against one node and against a 2-node mesh whose calls alternate between
 * the nodes.
 *
 * On the mesh every answer's fields (limit, unit, reset, remaining 0 when
 * over) and every refusal the anchor makes must hold: the mesh never admits
 * past the limit. What the anchor admits, the mesh may still refuse while its
 * under-admission defect is open (the decision rule, not this layer): those
 * expectations are checked exactly on one node, and on the mesh only with
 * ANCHOR_MESH_EXACT=1 (which lists the cases the defect still breaks).
 *
 * Where ratemesh differs on purpose, the tests assert ratemesh's documented
 * answer and say so (docs/envoy.md, "Deliberate differences").
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEnvoyConfig } from '../../src/envoy/config.js';
import { RlsService } from '../../src/envoy/service.js';
import {
  ANCHOR_DIR,
  type Answer,
  anchorReset,
  type Desc,
  fresh,
  fromStruct,
  Target,
} from './anchor-harness.js';
import { EngineLimiter } from './helpers.js';

const KINDS = ['single node', '2-node mesh'] as const;
const EXACT_MESH = process.env.ANCHOR_MESH_EXACT === '1';

const d = (...entries: [string, string][]): Desc => ({ entries });
const UNIT_S: Record<string, number> = { SECOND: 1, MINUTE: 60, HOUR: 3600, DAY: 86_400 };

/**
 * The anchor's answer for one status: code, limit, remaining, and the reset of
 * their CalculateReset, taken around the call (the second may turn during it).
 */
function expectStatus(
  t: Target,
  got: Answer['statuses'][number],
  want: { code: 'OK' | 'OVER_LIMIT'; rpu: number; unit: string; remaining: number },
  before: number,
  after: number,
  label = '',
): void {
  expect(got.code === 'OVER_LIMIT' ? 'OVER_LIMIT' : 'OK', label).toBe(
    // the mesh may refuse what the anchor admits (under-admission, see the header), never admit what it refuses
    !t.mesh || EXACT_MESH || want.code === 'OVER_LIMIT' ? want.code : got.code,
  );
  expect(got.current_limit).toMatchObject({ requests_per_unit: want.rpu, unit: want.unit });
  if (got.code === 'OVER_LIMIT') expect(got.limit_remaining).toBe(0);
  else if (!t.mesh || EXACT_MESH) expect(got.limit_remaining).toBe(want.remaining);
  else expect(got.limit_remaining).toBeLessThanOrEqual(want.rpu);
  const u = UNIT_S[want.unit]!;
  expect([anchorReset(u, before), anchorReset(u, after)]).toContain(
    Number(got.duration_until_reset!.seconds),
  );
  expect(got.duration_until_reset!.nanos).toBe(0);
}

/** Calls and checks the overall codes against the anchor's (see expectStatus for the mesh). */
async function expectCodes(t: Target, calls: (() => Promise<Answer>)[], want: ('OK' | 'OVER_LIMIT')[]) {
  const got: string[] = [];
  for (const c of calls) got.push((await c()).overall_code);
  if (!t.mesh || EXACT_MESH) expect(got, `codes: ${got.join(' ')}`).toEqual(want);
  else
    for (let i = 0; i < want.length; i++)
      if (want[i] === 'OVER_LIMIT') expect(got[i], `call ${i}`).toBe(want[i]);
}

describe.each(KINDS)('envoyproxy/ratelimit expectations on a %s', (kind) => {
  describe('their integration test: basic.yaml and another.yaml over gRPC (testBasicBaseConfig)', () => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, ['basic.yaml', 'another.yaml']);
    });
    afterAll(() => t.stop());

    it('a domain no file names: OK with no limit (theirs)', async () => {
      const r = await t.call('foo', [d(['hello', 'world'])], 1);
      expect(r).toMatchObject({
        overall_code: 'OK',
        statuses: [{ code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null }],
        response_headers_to_add: [],
      });
    });

    it('basic key1: 50 per SECOND, 49 left', async () => {
      const before = Date.now();
      const r = await t.call('basic', [d(['key1', 'foo'])], 1);
      expectStatus(
        t,
        r.statuses[0]!,
        { code: 'OK', rpu: 50, unit: 'SECOND', remaining: 49 },
        before,
        Date.now(),
      );
    });

    it('another key2 (20 per MINUTE), 25 calls: 20 OK counting down, then OVER_LIMIT with 0 left', async () => {
      const key = fresh();
      let admitted = 0;
      for (let i = 0; i < 25; i++) {
        const before = Date.now();
        const r = await t.call('another', [d(['key2', key])], 1);
        const over = i >= 20;
        expect(r.overall_code).toBe(r.statuses[0]!.code);
        expectStatus(
          t,
          r.statuses[0]!,
          { code: over ? 'OVER_LIMIT' : 'OK', rpu: 20, unit: 'MINUTE', remaining: 20 - (i + 1) },
          before,
          Date.now(),
          `call ${i + 1}`,
        );
        if (r.overall_code === 'OK') admitted++;
      }
      expect(admitted).toBeLessThanOrEqual(20);
    });

    it('two keys in one request (key2 20/MINUTE, key3 10/HOUR): key3 goes over at the 11th, key2 keeps counting (every hit counts)', async () => {
      const key = fresh();
      for (let i = 0; i < 15; i++) {
        const before = Date.now();
        const r = await t.call('another', [d(['key2', key]), d(['key3', key])], 1);
        const after = Date.now();
        const over = i >= 10;
        expect(r.overall_code).toBe(over ? 'OVER_LIMIT' : t.mesh && !EXACT_MESH ? r.overall_code : 'OK');
        expectStatus(
          t,
          r.statuses[0]!,
          { code: 'OK', rpu: 20, unit: 'MINUTE', remaining: 20 - (i + 1) },
          before,
          after,
          `call ${i + 1}`,
        );
        expectStatus(
          t,
          r.statuses[1]!,
          { code: over ? 'OVER_LIMIT' : 'OK', rpu: 10, unit: 'HOUR', remaining: 10 - (i + 1) },
          before,
          after,
          `call ${i + 1}`,
        );
      }
    });

    it('duration_until_reset is the time to the end of the unit, in whole seconds (key4: DAY)', async () => {
      const before = Date.now();
      const r = await t.call('another', [d(['key4', 'durTest'])], 1);
      expectStatus(
        t,
        r.statuses[0]!,
        { code: 'OK', rpu: 20, unit: 'DAY', remaining: 19 },
        before,
        Date.now(),
      );
      expect(Number(r.statuses[0]!.duration_until_reset!.seconds)).toBeLessThanOrEqual(86_400);
      // RateLimit-Reset (their LIMIT_RESPONSE_HEADERS_ENABLED) carries the same seconds
      const h = Object.fromEntries(r.response_headers_to_add.map((x) => [x.key, x.value]));
      expect(h).toMatchObject({
        'RateLimit-Limit': '20',
        'RateLimit-Remaining': String(r.statuses[0]!.limit_remaining),
      });
      expect(Number(h['RateLimit-Reset'])).toBe(Number(r.statuses[0]!.duration_until_reset!.seconds));
    });

    it('a request bigger than what is left (hits_addend 21 on a fresh 20/MINUTE key): OVER_LIMIT, 0 left, reset to the end of the minute; counted, so the next call is over', async () => {
      const key = fresh();
      const before = Date.now();
      const r = await t.call('another', [d(['key2', key])], 21);
      expectStatus(
        t,
        r.statuses[0]!,
        { code: 'OVER_LIMIT', rpu: 20, unit: 'MINUTE', remaining: 0 },
        before,
        Date.now(),
      );
      const h = Object.fromEntries(r.response_headers_to_add.map((x) => [x.key, x.value]));
      expect(h['RateLimit-Remaining']).toBe('0');
      expect(Number(h['RateLimit-Reset'])).toBeGreaterThan(0);
      expect(Number(h['RateLimit-Reset'])).toBeLessThanOrEqual(60);
      // the hits counted: one more is over, on whichever node (the other learns it by gossip)
      if (t.mesh) await settle(t, 'another', d(['key2', key]));
      expect((await t.call('another', [d(['key2', key])], 1)).overall_code).toBe('OVER_LIMIT');
    });

    it('per-descriptor hits_addend 0 looks without counting; the request-wide one counts the others (TestRedis)', async () => {
      const key = fresh();
      const r = await t.call('another', [{ ...d(['key2', key]), hits: 0 }, d(['key3', key])], 1);
      expect(r.statuses.map((s) => s.limit_remaining)).toEqual([20, 9]);
      const again = await t.call('another', [{ ...d(['key2', key]), hits: 0 }], 0, 0);
      expect(again.statuses[0]!.limit_remaining).toBe(20);
    });

    it('the same descriptor twice in one request: each copy sees the hits of those before it (19 then 18)', async () => {
      const key = fresh();
      const r = await t.call('another', [d(['key2', key]), d(['key2', key])], 1);
      expect(r.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
        ['OK', 19],
        ['OK', 18],
      ]);
    });

    it('token quotas: hits_addend 0 checks and stream-done debits larger than what is left (20/MINUTE, debits of 15): over from the 5th call', async () => {
      const key = fresh();
      const check = () => t.call('another', [{ ...d(['key2', key]), hits: 0 }], 0, 0);
      const debit = () => t.call('another', [{ ...d(['key2', key]), hits: 15 }], 0, 0);
      await expectCodes(
        t,
        [check, debit, check, debit, check],
        ['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT'],
      );
    });

    it('health: grpc.health.v1 SERVING for "", the RLS service and their own name "ratelimit", on every node', async () => {
      for (let i = 0; i < t.daemons.length; i++) {
        expect(await t.check('', i)).toBe('SERVING');
        expect(await t.check('envoy.service.ratelimit.v3.RateLimitService', i)).toBe('SERVING');
        expect(await t.check('ratelimit', i)).toBe('SERVING');
      }
    });
  });

  describe('STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT (countHits: stop-when-over)', () => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, ['basic.yaml', 'another.yaml'], '  countHits: stop-when-over\n');
    });
    afterAll(() => t.stop());

    it('once key3 is over, key2 of the same request stops counting (10 left), key3 stays over', async () => {
      const key = fresh();
      for (let i = 0; i < 15; i++) {
        const before = Date.now();
        const r = await t.call('another', [d(['key2', key]), d(['key3', key])], 1);
        const after = Date.now();
        const over = i >= 10;
        if (over) expect(r.overall_code).toBe('OVER_LIMIT');
        expectStatus(
          t,
          r.statuses[0]!,
          { code: 'OK', rpu: 20, unit: 'MINUTE', remaining: over ? 10 : 20 - (i + 1) },
          before,
          after,
          `call ${i + 1}`,
        );
        expectStatus(
          t,
          r.statuses[1]!,
          { code: over ? 'OVER_LIMIT' : 'OK', rpu: 10, unit: 'HOUR', remaining: 10 - (i + 1) },
          before,
          after,
          `call ${i + 1}`,
        );
      }
    });
  });

  describe('their integration-test scripts on examples/ratelimit/config/example.yaml', () => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, ['example.yaml']);
    });
    afterAll(() => t.stop());

    it('example.yaml loads (quota_mode and metadata included)', () => {
      expect(t.daemons.every((x) => x.limiter.ready)).toBe(true);
    });

    it('simple-get.sh: /twoheader foo=test baz=shady is OK', async () => {
      expect((await t.call('rl', [d(['foo', 'test'], ['baz', 'shady'])])).overall_code).toBe('OK');
    });

    it('trigger-ratelimit.sh: (foo: pelle, baz: not-so-shady) 3/min: the 4th and 5th are limited', async () => {
      const c = () => t.call('rl', [d(['foo', 'pelle'], ['baz', 'not-so-shady'])]);
      await expectCodes(t, [c, c, c, c, c], ['OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    });

    it('trigger-shadow-mode-key.sh: (foo: pelle, baz: shady) 3/min in shadow mode is never limited, and reports 0 left past its limit', async () => {
      const c = () => t.call('rl', [d(['foo', 'pelle'], ['baz', 'shady'])]);
      let last: Answer | undefined;
      for (let i = 0; i < 6; i++) {
        last = await c();
        expect(last.overall_code).toBe('OK');
      }
      expect(last!.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
      // a large request in shadow mode: OK, with the load it would shed shown (0 left)
      const big = await t.call('rl', [d(['foo', fresh()], ['baz', 'shady'])], 21);
      expect(big.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
    });

    it('value-included-in-stats-key-when-unspecified.sh: (unspec: x) 2/min: the 3rd is limited', async () => {
      const c = () => t.call('rl', [d(['unspec', 'unspecified_value'])]);
      await expectCodes(t, [c, c, c], ['OK', 'OK', 'OVER_LIMIT']);
    });

    it('quota.sh: quota_mode service_1 (1/min) and service_2 (2/min) in one request: over only when both are', async () => {
      const c = () => t.call('rl', [d(['service', 'service_1']), d(['service', 'service_2'])]);
      const first = await c();
      expect(first.overall_code).toBe('OK');
      const second = await c();
      // service_1 is over in its status, but a quota descriptor alone does not refuse the request
      expect(second.statuses[0]!.code).toBe('OVER_LIMIT');
      if (!t.mesh || EXACT_MESH) expect(second.overall_code).toBe('OK');
      expect((await c()).overall_code).toBe('OVER_LIMIT');
    });

    it('replaces.sh: the whole script', async () => {
      const two = (foo: string, bar: string) => () => t.call('rl', [d(['foo', foo], ['bar', bar])]);
      const four = (foo: string, bar: string, dc: string) => () =>
        t.call('rl', [
          d(['foo', foo], ['bar', bar]),
          d(['source_cluster', 'proxy'], ['destination_cluster', dc]),
        ]);
      const five = (foo: string, bar: string, dc: string) => () =>
        t.call('rl', [
          d(['foo', foo], ['bar', bar]),
          d(['source_cluster', 'proxy'], ['destination_cluster', dc]),
          d(['category', 'account']),
        ]);
      const OK = 'OK' as const;
      const NO = 'OVER_LIMIT' as const;
      await expectCodes(
        t,
        [
          two('bkthomps', 'banned'),
          four('bkthomps', 'banned', 'mock'),
          four('bkthomps', 'banned', 'override'),
          four('bkthomps', 'banned', 'override'),
          four('bkthomps', 'banned', 'override'),
          four('my_foo', 'bkthomps', 'bkthomps'),
          four('my_foo', 'bkthomps', 'bkthomps'),
          four('my_foo', 'bkthomps', 'bkthomps'),
          four('my_foo', 'bkthomps', 'not_bkthomps'),
          four('my_foo', 'bkthomps', 'not_bkthomps'),
          four('my_foo', 'bkthomps', 'bkthomps'),
          five('my_foo', 'bkthomps', 'fake'),
          five('my_foo', 'bkthomps', 'fake'),
          five('my_foo', 'bkthomps', 'fake'),
          five('my_foo', 'bkthomps', 'fake'),
          five('my_foo', 'bkthomps', 'fake'),
          two('foo_2', 'bkthomps'),
          two('foo_2', 'bkthomps'),
          four('foo_3', 'bar_3', 'fake'),
          four('foo_3', 'bar_3', 'fake'),
          four('foo_3', 'bar_3', 'fake'),
          five('my_foo', 'bkthomps', 'fake'),
        ],
        [NO, NO, OK, OK, NO, OK, OK, NO, OK, NO, NO, OK, OK, OK, OK, NO, OK, NO, OK, OK, NO, NO],
      );
    });

    it('unlimited (foo → bay, and qux): OK with 4294967295 left (TestUnlimited)', async () => {
      const r = await t.call('rl', [d(['foo', 'x'], ['bay', 'y']), d(['qux', 'z'])]);
      expect(r.overall_code).toBe('OK');
      expect(r.statuses.map((s) => s.limit_remaining)).toEqual([4294967295, 4294967295]);
    });
  });

  describe('token-quota.sh on example.yaml (its own node or mesh: quota.sh spends the same service_2)', () => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, ['example.yaml']);
    });
    afterAll(() => t.stop());

    it('token-quota.sh: checks with hits_addend 0, the debit at stream done (service_2, 2/min): deliberate difference, the 3rd request is limited (theirs: the 4th)', async () => {
      const key = ['service', 'service_2'] as [string, string];
      const codes: string[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await t.call('rl', [{ ...d(key), hits: 0 }]);
        codes.push(r.overall_code);
        // Envoy sends the debit once the response is done (apply_on_stream_done)
        await t.call('rl', [{ ...d(key), hits: 1 }]);
        // on the mesh the check goes to the other node, which counts the debit once gossip brings it
        if (t.mesh) await settle(t, 'rl', d(key));
      }
      // theirs admits a look at exactly the limit (2 of 2 counted) and refuses past it: OK, OK, OK, OVER;
      // here a look with nothing left is over (a node never counts past L: docs/envoy.md)
      expect(codes).toEqual(['OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);
    });
  });

  describe('RESPONSE_DYNAMIC_METADATA (grpc.dynamicMetadata) on example.yaml', () => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, ['example.yaml'], '  dynamicMetadata: true\n');
    });
    afterAll(() => t.stop());

    it("TestMetadataReturnedForPassedDescriptors: the domain, the descriptors, the hits and the passed descriptors' metadata (the first wins)", async () => {
      const r = await t.call(
        'rl',
        [
          { ...d(['service', 'service_1']), hits: 0 },
          { ...d(['service', 'service_2']), hits: 0 },
        ],
        0,
        0,
      );
      expect(fromStruct(r.dynamic_metadata)).toEqual({
        domain: 'rl',
        descriptors: [
          { entries: ['service=service_1'], hitsAddend: 0 },
          { entries: ['service=service_2'], hitsAddend: 0 },
        ],
        metadata: { service_with_quota: { name: 'service_1' } },
      });
      const plain = await t.call('rl', [d(['qux', 'x'])], 3, 0);
      expect(fromStruct(plain.dynamic_metadata)).toEqual({
        domain: 'rl',
        descriptors: [{ entries: ['qux=x'] }],
        hitsAddend: 3,
      });
    });

    it('multiservice-tokenquota.sh: the service with quota left is named until both are spent; deliberate difference, the 4th request is refused (theirs: the 6th)', async () => {
      const served: string[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await t.call('rl', [
          { ...d(['service', 'service_1']), hits: 0 },
          { ...d(['service', 'service_2']), hits: 0 },
        ]);
        if (r.overall_code === 'OVER_LIMIT') {
          served.push('refused');
          continue;
        }
        const meta = fromStruct(r.dynamic_metadata) as {
          metadata?: { service_with_quota: { name: string } };
        };
        const name = meta.metadata!.service_with_quota.name;
        served.push(name);
        // Envoy routes by that name and debits the service that served the request once it is done
        await t.call('rl', [{ ...d(['service', name]), hits: 1 }]);
        if (t.mesh) await settle(t, 'rl', d(['service', name]));
      }
      // theirs (a look at exactly the limit passes): service_1, service_1, service_2 x 3, refused
      expect(served).toEqual(['service_1', 'service_2', 'service_2', 'refused']);
    });
  });

  describe('their config tests through the service (basic_config.yaml)', () => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, ['basic_config.yaml']);
    });
    afterAll(() => t.stop());

    it('TestBasicConfig: which limit each descriptor gets', async () => {
      const limitOf = async (...entries: [string, string][]) => {
        const s = (await t.call('test-domain', [d(...entries)], 0, 0)).statuses[0]!;
        return s.current_limit === null ? null : [s.current_limit.requests_per_unit, s.current_limit.unit];
      };
      expect(await limitOf(['key1', 'something'])).toBeNull();
      expect(await limitOf(['key1', 'value1'])).toBeNull();
      expect(await limitOf(['key2', 'value2'], ['subkey', 'subvalue'])).toBeNull();
      expect(await limitOf(['key5', 'value5'], ['subkey5', 'subvalue'])).toBeNull();
      expect(await limitOf(['key1', 'value1'], ['subkey1', 'something'])).toEqual([5, 'SECOND']);
      expect(await limitOf(['key1', 'value1'], ['subkey1', 'subvalue1'])).toEqual([10, 'SECOND']);
      expect(await limitOf(['key2', 'something'])).toEqual([20, 'MINUTE']);
      expect(await limitOf(['key2', 'value2'])).toEqual([30, 'MINUTE']);
      expect(await limitOf(['key2', 'value3'])).toBeNull();
      expect(await limitOf(['key3', 'foo'])).toEqual([1, 'HOUR']);
      expect(await limitOf(['key4', 'foo'])).toEqual([1, 'DAY']);
      expect(await limitOf(['key7', 'unspecified_value'])).toEqual([70, 'MINUTE']);
      const named = await t.call('test-domain', [d(['key4', 'foo'])], 0, 0);
      expect(named.statuses[0]!.current_limit!.name).toBe('key4_rate_limit');
      const unlimited = await t.call('test-domain', [d(['key6', 'foo'])], 0, 0);
      expect(unlimited.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 4294967295 });
    });

    it('TestConfigLimitOverride: a limit in the request applies (10/DAY), whatever the config says', async () => {
      const value = fresh();
      const entries: [string, string][] = [
        ['key1', 'value1'],
        ['subkey1', value],
      ];
      const r = await t.call(
        'test-domain',
        [{ entries, limit: { requests_per_unit: 10, unit: 'DAY' } }],
        1,
        0,
      );
      expect(r.statuses[0]).toMatchObject({
        code: 'OK',
        current_limit: { requests_per_unit: 10, unit: 'DAY', name: '' },
        limit_remaining: 9,
      });
      // a descriptor no config names takes its override too
      const other = await t.call(
        'test-domain',
        [{ ...d(['nothing', value]), limit: { requests_per_unit: 2, unit: 'MINUTE' } }],
        1,
        0,
      );
      expect(other.statuses[0]).toMatchObject({
        current_limit: { requests_per_unit: 2, unit: 'MINUTE' },
        limit_remaining: 1,
      });
      // an unknown domain: no limit, as theirs
      const unknown = await t.call(
        'foo_domain',
        [{ ...d(['a', 'b']), limit: { requests_per_unit: 10, unit: 'DAY' } }],
        1,
        0,
      );
      expect(unknown.statuses[0]).toMatchObject({ code: 'OK', current_limit: null });
    });

    it('deliberate difference: another override value on the same descriptor is its own count (theirs continues the same counter)', async () => {
      const entries: [string, string][] = [
        ['key1', 'value1'],
        ['subkey1', fresh()],
      ];
      await t.call('test-domain', [{ entries, limit: { requests_per_unit: 10, unit: 'DAY' } }], 1, 0);
      const r = await t.call(
        'test-domain',
        [{ entries, limit: { requests_per_unit: 42, unit: 'HOUR' } }],
        1,
        0,
      );
      // theirs: 42 - 2 = 40
      expect(r.statuses[0]).toMatchObject({
        current_limit: { requests_per_unit: 42, unit: 'HOUR' },
        limit_remaining: 41,
      });
    });
  });

  describe('deliberate differences (docs/envoy.md)', () => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, [], '', {
        'sibling.yaml': `domain: sibling
descriptors:
  - key: a
    value: b*
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: a_bx
    rate_limit: { unit: minute, requests_per_unit: 7 }
`,
      });
    });
    afterAll(() => t.stop());

    it('keys match exactly: a key-only entry a_bx wins over the wildcard a=b* (theirs matches the joined "a_bx_y" against "a_b*")', async () => {
      const r = await t.call('sibling', [d(['a_bx', 'y'])], 1, 0);
      expect(r.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 7 });
    });
  });
});

describe('deliberate difference: a sliding window (their basic.yaml, one engine on a manual clock)', () => {
  it('key1 (50/SECOND) spent late in one second is still refused early in the next; theirs opens a fresh window', () => {
    const cfg = parseEnvoyConfig([
      { file: 'basic.yaml', text: readFileSync(join(ANCHOR_DIR, 'basic.yaml'), 'utf8') },
    ]);
    const limiter = new EngineLimiter(cfg.policies);
    void limiter.start();
    const service = new RlsService({ config: cfg, limiter, clock: limiter.clock });
    const call = (hits: number) => {
      const r = service.shouldRateLimit({
        domain: 'basic',
        hits_addend: hits,
        descriptors: [{ entries: [{ key: 'key1', value: 'k' }], limit: null, hits_addend: null }],
      });
      if (!r.ok) throw new Error(r.message);
      return r.response;
    };
    limiter.clock.set(Math.ceil(limiter.clock.now() / 1000) * 1000 + 700);
    expect(call(50).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
    limiter.clock.advance(400);
    // a new fixed window of theirs would answer OK with 49 left; the 50 are still in the sliding window
    expect(call(1).overall_code).toBe('OVER_LIMIT');
    // room comes back as the burst leaves the window (a window and a bucket after it)
    limiter.clock.advance(800);
    expect(call(1).statuses[0]).toMatchObject({ code: 'OK' });
  });
});

/**
 * Waits until both nodes of a mesh report the same `limit_remaining` for a look at `desc`
 * (their views have merged; the codes may differ: a node's hits beyond the limit stay its own); bounded.
 */
async function settle(t: Target, domain: string, desc: Desc): Promise<void> {
  const look = async (node: number) => {
    const s = (await t.call(domain, [{ ...desc, hits: 0 }], 0, node)).statuses[0]!;
    return s.limit_remaining;
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    if ((await look(0)) === (await look(1))) return;
    if (Date.now() > deadline) throw new Error('the two nodes did not agree within 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}
