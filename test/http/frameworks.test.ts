/**
 * The same behaviour through node:http, Express 5 and Fastify 5: real servers
 * on 127.0.0.1, driven by fetch, deciding with the real Engine on a ManualClock.
 */
import { parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { PolicySpec } from '../../src/types.js';
import { FRAMEWORKS, makeLimiter, memoryLogger, rawOf, upEach } from './harness.js';

const PER_IP: PolicySpec = { name: 'per-ip', limit: 5, windowMs: 10_000 };

const up = upEach();

function params(value: string | null): Record<string, unknown>[] {
  expect(value).not.toBeNull();
  return parseList(value!).map(([name, p]) => ({ name, ...Object.fromEntries(p) }));
}

describe.each(FRAMEWORKS)('%s', (fw) => {
  it('answers 200 five times, then 429 with Retry-After, RateLimit fields and a JSON body', async () => {
    const clock = new ManualClock(1_000_000);
    const limiter = makeLimiter([PER_IP], clock);
    const srv = await up(fw, { limiter, policies: ['per-ip'], logger: false });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${srv.url}/`);
      statuses.push(res.status);
      expect(await res.text()).toBe('ok');
      expect(params(res.headers.get('ratelimit-policy'))).toEqual([{ name: 'per-ip', q: 5, w: 10 }]);
      const [rl] = params(res.headers.get('ratelimit'));
      expect(rl).toMatchObject({ name: 'per-ip', r: 4 - i });
      expect(res.headers.get('retry-after')).toBeNull();
    }
    const res = await fetch(`${srv.url}/`);
    statuses.push(res.status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as { retryAfter: number };
    expect(body).toMatchObject({ error: 'too_many_requests', policy: 'per-ip' });
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter) && retryAfter >= 1).toBe(true);
    expect(body.retryAfter).toBe(retryAfter);
    const [rl] = params(res.headers.get('ratelimit'));
    // On a denial, t is the Retry-After point (draft-11 §6: Retry-After never earlier than t).
    expect(rl).toEqual({ name: 'per-ip', r: 0, t: retryAfter });
    expect(srv.stats()).toMatchObject({ requests: 6, allowed: 5, limited: 1 });
  });

  it.each([
    ['global sliding window', PER_IP],
    ['local gcra', { ...PER_IP, scope: 'local', algorithm: 'gcra' } as PolicySpec],
  ])('Retry-After says when the next request is admitted (%s)', async (_, policy) => {
    const clock = new ManualClock(1_000_000);
    const limiter = makeLimiter([policy], clock);
    const srv = await up(fw, { limiter, policies: ['per-ip'], logger: false });
    for (let i = 0; i < 5; i++) expect((await fetch(srv.url)).status).toBe(200);
    const denied = await fetch(srv.url);
    expect(denied.status).toBe(429);
    const n = Number(denied.headers.get('retry-after'));
    // One second before the advertised point the request is still refused...
    clock.advance((n - 1) * 1000);
    const early = await fetch(srv.url);
    expect(early.status).toBe(429);
    // ...and at the advertised point it is admitted.
    clock.set(1_000_000 + n * 1000);
    expect((await fetch(srv.url)).status).toBe(200);
  });

  it('honours X-Forwarded-For from a trusted proxy and keys by the client it names', async () => {
    const limiter = makeLimiter([PER_IP]);
    const srv = await up(fw, {
      limiter,
      policies: ['per-ip'],
      trustProxy: ['127.0.0.0/8', '::1'],
      logger: false,
    });
    const as = (ip: string) => fetch(srv.url, { headers: { 'x-forwarded-for': ip } });
    for (let i = 0; i < 5; i++) expect((await as('203.0.113.7')).status).toBe(200);
    expect((await as('203.0.113.7')).status).toBe(429);
    expect((await as('203.0.113.8')).status).toBe(200);
    // A client-supplied entry to the left of the real one changes nothing.
    expect((await as('198.51.100.1, 203.0.113.7')).status).toBe(429);
    // IPv6 clients in one /64 share a key.
    for (let i = 0; i < 5; i++) expect((await as(`2001:db8:1:2::${i + 1}`)).status).toBe(200);
    expect((await as('2001:db8:1:2:ffff::1')).status).toBe(429);
  });

  it('honours Forwarded when configured, and then ignores X-Forwarded-For', async () => {
    const limiter = makeLimiter([PER_IP]);
    const srv = await up(fw, {
      limiter,
      policies: ['per-ip'],
      trustProxy: ['127.0.0.1'],
      proxyHeader: 'forwarded',
      logger: false,
    });
    for (let i = 0; i < 5; i++) {
      const res = await fetch(srv.url, {
        headers: { forwarded: 'for=203.0.113.7;proto=https', 'x-forwarded-for': `198.51.100.${i}` },
      });
      expect(res.status).toBe(200);
    }
    expect((await fetch(srv.url, { headers: { forwarded: 'for="203.0.113.7:1234"' } })).status).toBe(429);
  });

  it('ignores a spoofed X-Forwarded-For from an untrusted peer', async () => {
    const limiter = makeLimiter([PER_IP]);
    const srv = await up(fw, { limiter, policies: ['per-ip'], trustProxy: ['10.0.0.0/8'], logger: false });
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      statuses.push((await fetch(srv.url, { headers: { 'x-forwarded-for': `203.0.113.${i}` } })).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it('shadow mode forwards, logs and counts would-be denials, and shows the client nothing of it', async () => {
    const limiter = makeLimiter([PER_IP, { name: 'dark', limit: 2, windowMs: 10_000, shadow: true }]);
    const logger = memoryLogger();
    const srv = await up(fw, { limiter, policies: ['per-ip', 'dark'], logger });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await fetch(srv.url);
      statuses.push(res.status);
      expect(params(res.headers.get('ratelimit-policy')).map((m) => m.name)).toEqual(['per-ip']);
    }
    expect(statuses).toEqual([200, 200, 200, 200]);
    expect(srv.stats()).toMatchObject({ allowed: 4, limited: 0, shadowLimited: 2 });
    expect(logger.lines.filter((l) => l.level === 'info' && /shadow/.test(l.msg))).toHaveLength(2);
    expect(srv.served()).toBe(4);
  });

  it('fails open when the limiter is not ready, and closed where the route says so', async () => {
    const limiter = makeLimiter([PER_IP]);
    limiter.ready = false;
    const logger = memoryLogger();
    const srv = await up(fw, {
      limiter,
      routes: [{ path: '/login', policies: ['per-ip'], failureMode: 'closed' }],
      policies: ['per-ip'],
      logger,
    });
    const open = await fetch(`${srv.url}/read`);
    expect(open.status).toBe(200);
    const closed = await fetch(`${srv.url}/login?next=/`);
    expect(closed.status).toBe(503);
    expect(closed.headers.get('retry-after')).toBe('1');
    expect(await closed.json()).toMatchObject({ error: 'rate_limiter_unavailable' });
    expect(srv.stats()).toMatchObject({ failOpen: 1, failClosed: 1, failures: { 'not-ready': 2 } });
    expect(logger.lines.map((l) => l.obj.reason)).toEqual(['not-ready', 'not-ready']);
    expect(limiter.calls).toBe(0);
  });

  it('applies the failure policy when the limiter throws', async () => {
    const limiter = makeLimiter([PER_IP, { ...PER_IP, name: 'login', failureMode: 'closed' }]);
    limiter.throwOnCheck = true;
    const logger = memoryLogger();
    const srv = await up(fw, {
      limiter,
      // No explicit failureMode: the login policy's own 'closed' decides for its route.
      routes: [{ path: '/login', policies: ['login'] }],
      policies: ['per-ip'],
      logger,
    });
    expect((await fetch(`${srv.url}/`)).status).toBe(200);
    expect((await fetch(`${srv.url}/login`)).status).toBe(503);
    expect(srv.stats().failures).toEqual({ 'limiter-error': 2 });
    expect(logger.lines[0]!.obj.err).toMatchObject({ message: 'limiter exploded' });
  });

  it('holds the concurrency ceiling, even with the limiter failing, and releases slots on finish', async () => {
    const limiter = makeLimiter([{ ...PER_IP, limit: 100 }]);
    limiter.throwOnCheck = true;
    const srv = await up(fw, {
      limiter,
      policies: ['per-ip'],
      maxInFlight: 2,
      overloadRetryAfter: 2,
      logger: false,
    });
    const a = fetch(`${srv.url}/slow`);
    const b = fetch(`${srv.url}/slow`);
    await waitFor(() => srv.stats().inFlight === 2);
    const c = await fetch(`${srv.url}/slow`);
    expect(c.status).toBe(503);
    expect(c.headers.get('retry-after')).toBe('2');
    srv.release();
    expect((await a).status).toBe(200);
    expect((await b).status).toBe(200);
    await waitFor(() => srv.stats().inFlight === 0);
    expect((await fetch(`${srv.url}/`)).status).toBe(200);
    expect(srv.stats()).toMatchObject({ overloaded: 1, inFlight: 0 });
  });

  it('releases a concurrency slot when the client aborts mid-request', async () => {
    const limiter = makeLimiter([{ ...PER_IP, limit: 100 }]);
    const srv = await up(fw, { limiter, policies: ['per-ip'], maxInFlight: 1, logger: false });
    const ac = new AbortController();
    const pending = fetch(`${srv.url}/slow`, { signal: ac.signal }).catch(() => 'aborted');
    await waitFor(() => srv.stats().inFlight === 1);
    expect((await fetch(srv.url)).status).toBe(503);
    ac.abort();
    expect(await pending).toBe('aborted');
    await waitFor(() => srv.stats().inFlight === 0);
    expect((await fetch(srv.url)).status).toBe(200);
    srv.release();
  });

  it('applies the failure policy to a keyGenerator that throws or rejects, with no unhandled rejection', async () => {
    const limiter = makeLimiter([PER_IP]);
    const logger = memoryLogger();
    const srv = await up(fw, {
      limiter,
      routes: [{ path: '/closed', policies: ['per-ip'], failureMode: 'closed' }],
      policies: ['per-ip'],
      keyGenerator: (req: unknown) => {
        const h = rawOf(req).headers['x-mode'];
        if (h === 'throw') throw new Error('boom');
        if (h === 'reject') return Promise.reject(new Error('async boom'));
        if (h === 'bad') return 'bad\u0000key';
        if (h === 'none') return undefined as unknown as string;
        return Promise.resolve(`user:${String(h)}`);
      },
      logger,
    });
    const get = (path: string, mode: string) => fetch(`${srv.url}${path}`, { headers: { 'x-mode': mode } });
    expect((await get('/', 'throw')).status).toBe(200);
    expect((await get('/', 'reject')).status).toBe(200);
    expect((await get('/', 'bad')).status).toBe(200);
    expect((await get('/', 'none')).status).toBe(200);
    expect((await get('/closed', 'throw')).status).toBe(503);
    expect((await get('/closed', 'reject')).status).toBe(503);
    expect((await get('/closed', 'ok')).status).toBe(200);
    expect(srv.stats().failures).toEqual({ 'key-error': 6 });
    expect(logger.lines.map((l) => l.obj.err)).toContainEqual({ name: 'Error', message: 'async boom' });
  });

  it('spends ip, account and account:endpoint keys together, and only if all allow', async () => {
    const limiter = makeLimiter([
      { name: 'ip', limit: 10, windowMs: 10_000 },
      { name: 'acct', limit: 3, windowMs: 10_000 },
      { name: 'acct-ep', limit: 2, windowMs: 10_000 },
    ]);
    const srv = await up(fw, {
      limiter,
      policies: [
        { policy: 'ip', by: 'ip' },
        { policy: 'acct', by: 'account' },
        { policy: 'acct-ep', by: 'endpoint' },
      ],
      account: (req: unknown) => rawOf(req).headers['x-user'] as string | undefined,
      endpoint: (req: unknown) => rawOf(req).url?.split('?')[0],
      logger: false,
    });
    const as = (user: string | undefined, path: string) =>
      fetch(`${srv.url}${path}`, { headers: user === undefined ? {} : { 'x-user': user } });
    expect((await as('alice', '/a')).status).toBe(200);
    const second = await as('alice', '/a');
    expect(params(second.headers.get('ratelimit'))).toEqual([
      { name: 'ip', r: 8, t: expect.any(Number) },
      { name: 'acct', r: 1, t: expect.any(Number) },
      { name: 'acct-ep', r: 0, t: expect.any(Number) },
    ]);
    const third = await as('alice', '/a');
    expect(third.status).toBe(429);
    expect(await third.json()).toMatchObject({ policy: 'acct-ep' });
    expect((await as('alice', '/b')).status).toBe(200);
    expect((await as('alice', '/c')).status).toBe(429); // acct: 3 spent
    // Anonymous requests only meet the ip policy; the two denials above spent nothing on it.
    const anon = await as(undefined, '/a');
    expect(anon.status).toBe(200);
    expect(params(anon.headers.get('ratelimit'))).toEqual([{ name: 'ip', r: 6, t: expect.any(Number) }]);
  });
});

async function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
