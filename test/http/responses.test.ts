/** Denial bodies, header drafts, routes, skip and shaping, on node:http (the core is shared). */
import { parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { PolicySpec } from '../../src/types.js';
import { makeLimiter, rawOf, upEach } from './harness.js';

const PER_IP: PolicySpec = { name: 'per-ip', limit: 2, windowMs: 10_000 };

const up = upEach();
async function exhaust(url: string, n = 2): Promise<Response> {
  for (let i = 0; i < n; i++) await fetch(url);
  return fetch(url);
}

describe('denial responses', () => {
  it('application/problem+json (RFC 9457) with violated-policies', async () => {
    const srv = await up('node', {
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      problemJson: true,
      logger: false,
    });
    const res = await exhaust(srv.url);
    expect(res.status).toBe(429);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    const body = await res.json();
    expect(body).toMatchObject({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      status: 429,
      detail: 'Too many requests, please try again later.',
      'violated-policies': ['per-ip'],
      'retry-after': Number(res.headers.get('retry-after')),
    });
  });

  it('message (string, object, function) and statusCode', async () => {
    const limiter = makeLimiter([PER_IP]);
    const s1 = await up('express', { limiter, policies: ['per-ip'], message: 'slow down', logger: false });
    expect(await (await exhaust(s1.url)).json()).toMatchObject({ message: 'slow down' });
    const s2 = await up('fastify', {
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      message: { code: 'RATE' },
      statusCode: 503,
      logger: false,
    });
    const r2 = await exhaust(s2.url);
    expect(r2.status).toBe(503);
    expect(await r2.json()).toEqual({ code: 'RATE' });
    const s3 = await up('node', {
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      message: (_req, info) => ({ wait: info.retryAfter, policies: info.violatedPolicies }),
      logger: false,
    });
    const r3 = await exhaust(s3.url);
    expect(await r3.json()).toEqual({ wait: Number(r3.headers.get('retry-after')), policies: ['per-ip'] });
  });

  it('a custom handler sends the denial; one that throws falls back to the default', async () => {
    const srv = await up('node', {
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      handler: (req, res, info) => {
        if (rawOf(req).headers['x-break'] === '1') throw new Error('handler broke');
        res.statusCode = info.statusCode;
        res.end(`custom ${info.policy}`);
      },
      logger: false,
    });
    const res = await exhaust(srv.url);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).not.toBeNull();
    expect(await res.text()).toBe('custom per-ip');
    const broken = await fetch(srv.url, { headers: { 'x-break': '1' } });
    expect(broken.status).toBe(429);
    expect(await broken.json()).toMatchObject({ error: 'too_many_requests' });
    expect(srv.stats().handlerErrors).toBe(1);
  });
});

describe('header drafts', () => {
  it.each([
    ['draft-6', ['ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']],
    ['draft-7', ['ratelimit-policy', 'ratelimit']],
    ['draft-8', ['ratelimit-policy', 'ratelimit']],
    ['draft-11', ['ratelimit-policy', 'ratelimit']],
  ] as const)('%s sends %j', async (draft, names) => {
    const srv = await up('node', {
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      standardHeaders: draft,
      logger: false,
    });
    const res = await fetch(srv.url);
    const got = [...res.headers.keys()].filter(
      (k) => k.startsWith('ratelimit') || k.startsWith('x-ratelimit'),
    );
    expect(got.sort()).toEqual([...names].sort());
  });

  it('standardHeaders false sends none; legacyHeaders adds X-RateLimit-*', async () => {
    const clock = new ManualClock(1_700_000_000_000);
    const srv = await up('node', {
      limiter: makeLimiter([PER_IP], clock),
      policies: ['per-ip'],
      standardHeaders: false,
      legacyHeaders: true,
      clock,
      logger: false,
    });
    const res = await fetch(srv.url);
    expect(res.headers.get('ratelimit')).toBeNull();
    expect(res.headers.get('x-ratelimit-limit')).toBe('2');
    expect(res.headers.get('x-ratelimit-remaining')).toBe('1');
    expect(Number(res.headers.get('x-ratelimit-reset'))).toBeGreaterThanOrEqual(1_700_000_000);
  });

  it('partitionKey adds pk (a hash, not the address) to both draft-11 fields', async () => {
    const srv = await up('node', {
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      partitionKey: true,
      logger: false,
    });
    const res = await fetch(srv.url);
    for (const h of ['ratelimit', 'ratelimit-policy']) {
      const [[, p]] = parseList(res.headers.get(h)!) as [[unknown, Map<string, unknown>]];
      const pk = Buffer.from(p.get('pk') as ArrayBuffer);
      expect(pk.length).toBe(12);
      expect(pk.toString('latin1')).not.toContain('127.0.0.1');
    }
  });
});

describe('routes and skip', () => {
  it('first matching rule wins; method, exact, prefix and RegExp; unmatched requests pass', async () => {
    const limiter = makeLimiter([PER_IP, { name: 'api', limit: 1, windowMs: 10_000 }]);
    const srv = await up('node', {
      limiter,
      routes: [
        { method: 'GET', path: '/', policies: ['per-ip'] },
        { path: '/api/*', policies: ['api'] },
        { path: /^\/re\/\d+$/, policies: ['api'] },
      ],
      logger: false,
    });
    expect((await exhaust(`${srv.url}/`)).status).toBe(429);
    expect((await fetch(`${srv.url}/`, { method: 'POST' })).status).toBe(200); // no rule: passes
    expect((await fetch(`${srv.url}/other`)).status).toBe(200);
    expect((await fetch(`${srv.url}/api/x?y=1`)).status).toBe(200);
    expect((await fetch(`${srv.url}/api/z`)).status).toBe(429);
    expect((await fetch(`${srv.url}/re/12`)).status).toBe(429); // same api key (ip), spent above
    expect(srv.stats().skipped).toBe(2);
  });

  it('skip (sync and async) bypasses the limiter; a throwing skip follows the failure policy', async () => {
    const limiter = makeLimiter([PER_IP]);
    const srv = await up('node', {
      limiter,
      policies: ['per-ip'],
      failureMode: 'closed',
      skip: (req) => {
        const h = rawOf(req).headers['x-skip'];
        if (h === 'sync') return true;
        if (h === 'async') return Promise.resolve(true);
        if (h === 'throw') throw new Error('skip broke');
        return false;
      },
      logger: false,
    });
    for (let i = 0; i < 5; i++) {
      expect((await fetch(srv.url, { headers: { 'x-skip': i % 2 ? 'sync' : 'async' } })).status).toBe(200);
    }
    expect(limiter.calls).toBe(0);
    expect((await fetch(srv.url, { headers: { 'x-skip': 'throw' } })).status).toBe(503);
    expect(srv.stats()).toMatchObject({ skipped: 5, failClosed: 1, failures: { 'skip-error': 1 } });
  });

  it('leaky-bucket delayMs holds the request before it proceeds', async () => {
    const clock = new ManualClock(1_000_000);
    const limiter = makeLimiter(
      [{ name: 'shape', scope: 'local', algorithm: 'leaky-bucket', limit: 10, windowMs: 1000, queue: 5 }],
      clock,
    );
    const srv = await up('node', { limiter, policies: ['shape'], logger: false });
    const t0 = Date.now();
    const results = await Promise.all([0, 1, 2].map(() => fetch(srv.url)));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    // 10 per second: the third request waits about 200 ms of shaping.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
  });
});

describe('a rule cannot be dodged by respelling the URL', () => {
  it.each(['/LOGIN', '/login/', '//login', '/%6Cogin', '/login?x=1', '/Login//'])(
    '%s meets the /login rule',
    async (path) => {
      const limiter = makeLimiter([{ name: 'login', limit: 1, windowMs: 60_000 }]);
      const srv = await up('node', {
        limiter,
        routes: [{ method: 'POST', path: '/login', policies: ['login'] }],
        logger: false,
      });
      expect((await fetch(`${srv.url}/login`, { method: 'POST' })).status).toBe(200);
      expect((await fetch(`${srv.url}${path}`, { method: 'POST' })).status).toBe(429);
    },
  );

  it('HEAD meets a GET rule', async () => {
    const limiter = makeLimiter([{ name: 'get', limit: 1, windowMs: 60_000 }]);
    const srv = await up('express', {
      limiter,
      routes: [{ method: 'GET', path: '/', policies: ['get'] }],
      logger: false,
    });
    expect((await fetch(srv.url)).status).toBe(200);
    expect((await fetch(srv.url, { method: 'HEAD' })).status).toBe(429);
  });
});

describe('failure-mode precedence and exemptions', () => {
  it('route word > fail-closed policy > top-level default; an empty policy list exempts', async () => {
    const limiter = makeLimiter([PER_IP, { name: 'pay', limit: 5, windowMs: 10_000, failureMode: 'closed' }]);
    limiter.ready = false;
    const srv = await up('node', {
      limiter,
      failureMode: 'open',
      routes: [
        { path: '/health', policies: [] },
        { path: '/pay', policies: ['pay'] },
        { path: '/pay-open', policies: ['pay'], failureMode: 'open' },
        { path: '/strict', policies: ['per-ip'], failureMode: 'closed' },
      ],
      policies: ['per-ip'],
      logger: false,
    });
    const st = async (p: string) => (await fetch(`${srv.url}${p}`)).status;
    expect(await st('/health')).toBe(200);
    expect(await st('/pay')).toBe(503);
    expect(await st('/pay-open')).toBe(200);
    expect(await st('/strict')).toBe(503);
    expect(await st('/')).toBe(200);
    expect(srv.stats()).toMatchObject({ skipped: 1, failClosed: 2, failOpen: 2 });
  });
});

describe('a lone shadow policy', () => {
  it('never denies, sends no RateLimit fields, and counts would-be denials', async () => {
    const srv = await up('fastify', {
      limiter: makeLimiter([{ name: 'dark', limit: 1, windowMs: 10_000, shadow: true }]),
      policies: ['dark'],
      logger: false,
    });
    for (let i = 0; i < 3; i++) {
      const res = await fetch(srv.url);
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit')).toBeNull();
      expect(res.headers.get('retry-after')).toBeNull();
    }
    expect(srv.stats()).toMatchObject({ allowed: 3, shadowLimited: 2, limited: 0 });
  });
});
