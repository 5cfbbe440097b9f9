import { beforeEach, describe, expect, it } from 'vitest';
import type { EnvoyConfig } from '../../src/envoy/config.js';
import {
  type RlsResponse,
  type RlsResult,
  RlsService,
  UNLIMITED_REMAINING,
} from '../../src/envoy/service.js';
import { config, EngineLimiter, entries } from './helpers.js';

const YAML = `
domain: web
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 3 }
  - key: path
    value: /login
    rate_limit: { unit: second, requests_per_unit: 5 }
  - key: path
    value: /blocked
    rate_limit: { unit: second, requests_per_unit: 0 }
  - key: path
    value: /free
    rate_limit: { unlimited: true }
  - key: path
    value: /soft
    shadow_mode: true
    rate_limit: { unit: second, requests_per_unit: 1 }
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
          replaces: [ { name: specific_limit } ]
          requests_per_unit: 10
          unit: second
`;

/** A RateLimitRequest as @grpc/proto-loader decodes it (defaults filled). */
function req(domain: string, descriptors: (string[] | { entries: string[]; hits: number })[], hits = 0) {
  return {
    domain,
    hits_addend: hits,
    descriptors: descriptors.map((d) =>
      Array.isArray(d)
        ? { entries: entries(...d), limit: null, hits_addend: null }
        : { entries: entries(...d.entries), limit: null, hits_addend: { value: d.hits } },
    ),
  };
}

let cfg: EnvoyConfig;
let limiter: EngineLimiter;
let service: RlsService;

function start(opts: Partial<ConstructorParameters<typeof RlsService>[0]> = {}, algorithm?: 'fixed-window') {
  cfg = config(YAML, algorithm === undefined ? {} : { algorithm });
  limiter = new EngineLimiter(cfg.policies);
  void limiter.start();
  service = new RlsService({ config: cfg, limiter, clock: limiter.clock, ...opts });
}

function ok(r: RlsResult): RlsResponse {
  if (!r.ok) throw new Error(`expected a response, got ${r.code}: ${r.message}`);
  return r.response;
}

function call(...args: Parameters<typeof req>): RlsResponse {
  return ok(service.shouldRateLimit(req(...args)));
}

beforeEach(() => start());

describe('ShouldRateLimit decisions', () => {
  it('answers OK with the limit, remaining and reset, then OVER_LIMIT at the limit', () => {
    for (let i = 0; i < 3; i++) {
      const r = call('web', [['user=alice']]);
      expect(r.overall_code).toBe('OK');
      expect(r.statuses).toEqual([
        {
          code: 'OK',
          current_limit: { name: '', requests_per_unit: 3, unit: 'MINUTE' },
          limit_remaining: 2 - i,
          duration_until_reset: expect.objectContaining({ seconds: expect.any(Number) }),
        },
      ]);
      expect(r.statuses[0]!.duration_until_reset!.seconds).toBeGreaterThan(0);
      expect(r.statuses[0]!.duration_until_reset!.seconds).toBeLessThanOrEqual(66);
    }
    const over = call('web', [['user=alice']]);
    expect(over.overall_code).toBe('OVER_LIMIT');
    expect(over.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 });
    // a key-only descriptor counts each value separately
    expect(call('web', [['user=bob']]).overall_code).toBe('OK');
  });

  it('counts on a sliding window: no reset at a minute boundary, room again once the window has passed', () => {
    for (let i = 0; i < 3; i++) call('web', [['user=alice']]);
    limiter.clock.advance(30_000);
    expect(call('web', [['user=alice']]).overall_code).toBe('OVER_LIMIT');
    limiter.clock.advance(29_000);
    expect(call('web', [['user=alice']]).overall_code).toBe('OVER_LIMIT');
    limiter.clock.advance(60_000 + 6_000);
    expect(call('web', [['user=alice']]).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 2 });
  });

  it('the fixed-window algorithm resets when its window ends', () => {
    start({}, 'fixed-window');
    expect(cfg.policies[0]).toMatchObject({ scope: 'local', algorithm: 'fixed-window' });
    expect(call('web', [{ entries: ['user=alice'], hits: 0 }]).statuses[0]!.limit_remaining).toBe(3);
    for (let i = 0; i < 3; i++) expect(call('web', [['user=alice']]).overall_code).toBe('OK');
    // hits_addend 0 spends nothing, and is over once nothing is left
    expect(call('web', [{ entries: ['user=alice'], hits: 0 }]).statuses[0]).toMatchObject({
      code: 'OVER_LIMIT',
      limit_remaining: 0,
    });
    expect(call('web', [['user=alice']]).overall_code).toBe('OVER_LIMIT');
    limiter.clock.advance(60_000);
    expect(call('web', [['user=alice']]).overall_code).toBe('OK');
  });

  it('at a window boundary: fixed windows admit twice the limit in two seconds, the sliding window does not', () => {
    const admitted = (algorithm?: 'fixed-window') => {
      start({}, algorithm);
      // one second before a minute boundary (the fixed window is aligned to the epoch)
      limiter.clock.set(Math.ceil(limiter.clock.now() / 60_000) * 60_000 + 59_000);
      let n = 0;
      for (let i = 0; i < 5; i++) if (call('web', [['user=alice']]).overall_code === 'OK') n++;
      limiter.clock.advance(2_000);
      for (let i = 0; i < 5; i++) if (call('web', [['user=alice']]).overall_code === 'OK') n++;
      return n;
    };
    expect(admitted('fixed-window')).toBe(6);
    expect(admitted()).toBe(3);
  });

  it('every hit counts, over the limit too (theirs); countHits when-allowed spends all or nothing', () => {
    // path=/login 5/s and user=alice 3/min in one request
    for (let i = 0; i < 3; i++) call('web', [['path=/login'], ['user=alice']]);
    const r = call('web', [['path=/login'], ['user=alice']]);
    expect(r.overall_code).toBe('OVER_LIMIT');
    expect(r.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT']);
    expect(r.statuses[0]!.limit_remaining).toBe(1);
    // /login was spent by the refused request too: 5 - 4 = 1 left, 0 after this one
    expect(call('web', [['path=/login']]).statuses[0]!.limit_remaining).toBe(0);

    start({ countHits: 'when-allowed' });
    for (let i = 0; i < 3; i++) call('web', [['path=/login'], ['user=alice']]);
    expect(call('web', [['path=/login'], ['user=alice']]).statuses.map((s) => s.code)).toEqual([
      'OK',
      'OVER_LIMIT',
    ]);
    // /login was not spent by the refused request: 5 - 3 = 2 left, 1 after this one
    expect(call('web', [['path=/login']]).statuses[0]!.limit_remaining).toBe(1);
  });

  it('countHits stop-when-over: only the descriptors over the limit count (their STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT)', () => {
    start({ countHits: 'stop-when-over' });
    for (let i = 0; i < 3; i++) call('web', [['path=/login'], ['user=alice']]);
    const r = call('web', [['path=/login'], ['user=alice']]);
    expect(r.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 2],
      ['OVER_LIMIT', 0],
    ]);
    expect(call('web', [['path=/login']]).statuses[0]!.limit_remaining).toBe(1);
  });

  it('hits_addend: request-wide, per descriptor, and 0 to look without spending', () => {
    expect(call('web', [['path=/login']], 2).statuses[0]!.limit_remaining).toBe(3);
    // the descriptor's own hits_addend wins over the request's
    expect(call('web', [{ entries: ['path=/login'], hits: 1 }], 2).statuses[0]!.limit_remaining).toBe(2);
    const peek = call('web', [{ entries: ['path=/login'], hits: 0 }]);
    expect(peek.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 2 });
    expect(call('web', [{ entries: ['path=/login'], hits: 0 }]).statuses[0]!.limit_remaining).toBe(2);
    // more hits than are left: over, with nothing left, and counted
    expect(call('web', [['path=/login']], 6).statuses[0]).toMatchObject({
      code: 'OVER_LIMIT',
      limit_remaining: 0,
    });
    expect(call('web', [['path=/login']]).overall_code).toBe('OVER_LIMIT');
    // a look at a key counted past its limit is over, as theirs
    expect(call('web', [{ entries: ['path=/login'], hits: 0 }]).overall_code).toBe('OVER_LIMIT');
  });

  it('a descriptor twice in one request: each copy sees the hits of those before it', () => {
    const r = call('web', [['path=/login'], ['path=/login']], 2);
    expect(r.statuses.map((s) => s.limit_remaining)).toEqual([3, 1]);
    const again = call('web', [['path=/login'], ['path=/login']]);
    expect(again.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 0],
      ['OVER_LIMIT', 0],
    ]);
    expect(again.overall_code).toBe('OVER_LIMIT');
  });

  it('unlimited: OK with MaxUint32 remaining; no match: OK with no limit', () => {
    const r = call('web', [['path=/free'], ['path=/other'], ['nothing=here']]);
    expect(r.overall_code).toBe('OK');
    expect(r.statuses).toEqual([
      { code: 'OK', limit_remaining: UNLIMITED_REMAINING },
      { code: 'OK', limit_remaining: 0 },
      { code: 'OK', limit_remaining: 0 },
    ]);
  });

  it('requests_per_unit 0 is always over; the other descriptors still count (theirs)', () => {
    const r = call('web', [['path=/blocked'], ['path=/login']]);
    expect(r.overall_code).toBe('OVER_LIMIT');
    expect(r.statuses[0]).toMatchObject({
      code: 'OVER_LIMIT',
      current_limit: { requests_per_unit: 0, unit: 'SECOND' },
      limit_remaining: 0,
    });
    expect(r.statuses[1]).toMatchObject({ code: 'OK', limit_remaining: 4 });
    expect(call('web', [['path=/login']]).statuses[0]!.limit_remaining).toBe(3);
  });

  it('shadow_mode: counted, but never over', () => {
    expect(call('web', [['path=/soft']]).statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
    const r = call('web', [['path=/soft']]);
    expect(r.overall_code).toBe('OK');
    expect(r.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
  });

  it('replaces: the replaced limit drops out of the request and is not spent', () => {
    const both = [
      ['key_1=value_1', 'user=bkthomps'],
      ['key_2=value_2', 'user=bkthomps'],
    ];
    const r = call('web', both);
    expect(r.statuses[0]).toEqual({ code: 'OK', limit_remaining: 0 });
    expect(r.statuses[1]).toMatchObject({ code: 'OK', limit_remaining: 9 });
    // the original limit, asked alone, is untouched: 5 - 1
    expect(call('web', [both[0]!]).statuses[0]!.limit_remaining).toBe(4);
  });

  it('response headers of the descriptor closest to its limit, when enabled', () => {
    expect(call('web', [['user=alice']]).response_headers_to_add).toEqual([]);
    start({
      responseHeaders: {
        limit: 'RateLimit-Limit',
        remaining: 'RateLimit-Remaining',
        reset: 'RateLimit-Reset',
      },
    });
    const r = call('web', [['path=/login'], ['user=alice']]);
    const h = Object.fromEntries(r.response_headers_to_add.map((x) => [x.key, x.value]));
    expect(h['RateLimit-Limit']).toBe('3');
    expect(h['RateLimit-Remaining']).toBe('2');
    expect(Number(h['RateLimit-Reset'])).toBeGreaterThan(0);
    call('web', [['user=alice']]);
    call('web', [['user=alice']]);
    const over = call('web', [['path=/login'], ['user=alice']]);
    const ho = Object.fromEntries(over.response_headers_to_add.map((x) => [x.key, x.value]));
    expect(ho['RateLimit-Remaining']).toBe('0');
    expect(Number(ho['RateLimit-Reset'])).toBe(
      Math.ceil(
        over.statuses[1]!.duration_until_reset!.seconds + over.statuses[1]!.duration_until_reset!.nanos / 1e9,
      ),
    );
  });
});

describe('ShouldRateLimit refuses bad requests with a status, never a throw', () => {
  const refused = (request: unknown) => {
    const r = service.shouldRateLimit(request);
    if (r.ok) throw new Error('expected a refusal');
    return r;
  };

  it.each([
    ['no request', null, 'INVALID_ARGUMENT', /request/],
    [
      'no domain',
      { descriptors: req('web', [['user=a']]).descriptors },
      'INVALID_ARGUMENT',
      /^domain: .*must not be empty/,
    ],
    ['an empty domain', req('', [['user=a']]), 'INVALID_ARGUMENT', /^domain:/],
    ['no descriptors', req('web', []), 'INVALID_ARGUMENT', /descriptor list must not be empty/],
    [
      'too many descriptors',
      req(
        'web',
        Array.from({ length: 65 }, () => ['user=a']),
      ),
      'INVALID_ARGUMENT',
      /at most 64/,
    ],
    ['a descriptor without entries', req('web', [[]]), 'INVALID_ARGUMENT', /descriptors\[0\]\.entries/],
    ['an entry without a key', req('web', [['=v']]), 'INVALID_ARGUMENT', /entries\[0\]\.key/],
    [
      'an entry value that is not a string',
      { domain: 'web', descriptors: [{ entries: [{ key: 'k', value: 5 }] }] },
      'INVALID_ARGUMENT',
      /entries\[0\]\.value/,
    ],
    [
      'a huge hits_addend',
      req('web', [['user=a']], 4_294_967_295),
      'INVALID_ARGUMENT',
      /^hits_addend: .*1000000000/,
    ],
    ['a negative hits_addend', req('web', [['user=a']], -1), 'INVALID_ARGUMENT', /^hits_addend/],
    [
      'a huge per-descriptor hits_addend',
      req('web', [{ entries: ['user=a'], hits: 2 ** 64 }]),
      'INVALID_ARGUMENT',
      /descriptors\[0\]\.hits_addend/,
    ],
    [
      'a limit override',
      {
        domain: 'web',
        descriptors: [{ entries: entries('user=a'), limit: { requests_per_unit: 1, unit: 'SECOND' } }],
      },
      'INVALID_ARGUMENT',
      /limit overrides are not enabled/,
    ],
  ])('%s', (_name, request, code, message) => {
    const r = refused(request);
    expect(r.code).toBe(code);
    expect(r.message).toMatch(message);
  });

  it('nothing is spent by a refused request', () => {
    refused({ ...req('web', [['user=alice'], ['user=alice']]), hits_addend: -5 });
    refused(req('web', [['user=alice'], { entries: ['user=alice'], hits: 2 ** 40 }]));
    expect(call('web', [['user=alice']]).statuses[0]!.limit_remaining).toBe(2);
  });

  it('unknownDomain error: NOT_FOUND naming the domains configured', () => {
    start({ unknownDomain: 'error' });
    const r = refused(req('nope', [['user=a']]));
    expect(r.code).toBe('NOT_FOUND');
    expect(r.message).toMatch(/unknown rate limit domain "nope"; configured: web/);
  });

  it('an unknown domain answers OK with no limits by default, as envoyproxy/ratelimit does', () => {
    expect(call('nope', [['user=a'], ['b=c']])).toEqual({
      overall_code: 'OK',
      statuses: [
        { code: 'OK', limit_remaining: 0 },
        { code: 'OK', limit_remaining: 0 },
      ],
      response_headers_to_add: [],
    });
    // the request is still validated
    expect(service.shouldRateLimit(req('nope', [[]])).ok).toBe(false);
  });

  it('a limiter that is not running: UNAVAILABLE', async () => {
    await limiter.stop();
    const r = service.shouldRateLimit(req('web', [['user=a']]));
    expect(r).toEqual({ ok: false, code: 'UNAVAILABLE', message: 'the rate limiter is not running' });
  });
});
