import { request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import type { DaemonConfig } from '../../src/daemon/config.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { ErrorCodes, RateMeshError } from '../../src/errors.js';
import { FakeLimiter, fakePeer, memoryLogger } from './fake-limiter.js';

function config(over: Partial<DaemonConfig['mesh']> = {}): DaemonConfig {
  return {
    configFile: undefined,
    http: { host: '127.0.0.1', port: 0, maxBodyBytes: 16384, drainTimeoutMs: 2000 },
    mesh: {
      listen: undefined,
      bootstrap: [],
      gossipIntervalMs: undefined,
      expectedDelayMs: undefined,
      keyFile: undefined,
      pskFile: undefined,
      injectDelayMs: undefined,
      injectLoss: undefined,
      privateKey: undefined,
      psk: undefined,
      ...over,
    },
    log: { level: 'silent' },
    stats: { hotKeys: 16 },
    policies: [{ name: 'api', limit: 3, windowMs: 10_000 }],
  };
}

let fake: FakeLimiter;
let daemon: Daemon;
let log: ReturnType<typeof memoryLogger>;

async function start(cfg = config()) {
  log = memoryLogger();
  daemon = await startDaemon({ config: cfg, logger: log, createLimiter: () => fake });
}

beforeEach(async () => {
  fake = new FakeLimiter([
    { name: 'api', limit: 3 },
    { name: 'shadowed', limit: 1, shadow: true },
  ]);
  await start();
});

afterEach(async () => {
  await daemon.stop();
});

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read loosely in tests
type Loose = any;

const JSON_TYPE = { 'content-type': 'application/json' };

async function post(body: unknown, headers: Record<string, string> = JSON_TYPE) {
  const res = await fetch(`${daemon.http.url}/v1/check`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Loose };
}

describe('POST /v1/check', () => {
  it('answers the decision: 200 while allowed, 429 with Retry-After once limited', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await post({ policy: 'api', key: 'ip:1.2.3.4' });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        allowed: true,
        limited: false,
        policy: 'api',
        key: 'ip:1.2.3.4',
        remaining: 2 - i,
      });
      expect(Object.keys(r.body).sort()).toEqual(
        [
          'allowed',
          'limited',
          'policy',
          'key',
          'rule',
          'mode',
          'limit',
          'remaining',
          'retryAfterMs',
          'resetMs',
          'delayMs',
          'shadow',
          'decidedAt',
        ].sort(),
      );
    }
    // decidedAt is on the engine's clock (systemClock: monotonic from a wall-clock origin), which
    // can run a fraction of a ms apart from Date.now(): compare on the same clock.
    const before = systemClock.now();
    const r = await post({ policy: 'api', key: 'ip:1.2.3.4' });
    expect(r.status).toBe(429);
    expect(r.body.decidedAt).toBeGreaterThanOrEqual(Math.floor(before * 1000) / 1000);
    expect(r.body.decidedAt).toBeLessThanOrEqual(Math.ceil(systemClock.now() * 1000) / 1000);
    expect(r.body).toMatchObject({ allowed: false, limited: true, rule: 'global-limit', retryAfterMs: 1500 });
    expect(r.headers.get('retry-after')).toBe('2');
    // another key is unaffected
    expect((await post({ policy: 'api', key: 'ip:5.6.7.8' })).status).toBe(200);
  });

  it('accepts keys[] and cost, and checks[] pairs', async () => {
    expect((await post({ policy: 'api', keys: ['a', 'b'], cost: 2 })).body.remaining).toBe(1);
    expect((await post({ policy: 'api', keys: ['b'], cost: 2 })).status).toBe(429);
    const r = await post({
      checks: [
        { policy: 'api', key: 'c' },
        { policy: 'shadowed', key: 'c' },
      ],
    });
    expect(r.status).toBe(200);
    expect(r.body.outcomes).toHaveLength(2);
  });

  it('shadow mode: limited but allowed is 200', async () => {
    await post({ policy: 'shadowed', key: 'k' });
    const r = await post({ policy: 'shadowed', key: 'k' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ allowed: true, limited: true, shadow: true });
  });

  const bad: [string, unknown, string, string][] = [
    ['malformed JSON', '{"policy": "api", ', 'ERR_REQUEST_INVALID', 'body'],
    ['not an object', '[1,2]', 'ERR_REQUEST_INVALID', 'body'],
    ['JSON null', 'null', 'ERR_REQUEST_INVALID', 'body'],
    ['empty body', '', 'ERR_REQUEST_INVALID', 'body'],
    ['unknown field', { policy: 'api', key: 'k', kye: 1 }, 'ERR_REQUEST_INVALID', 'body.kye'],
    [
      '__proto__ field',
      '{"policy":"api","key":"k","__proto__":{"x":1}}',
      'ERR_REQUEST_INVALID',
      'body.__proto__',
    ],
    ['policy missing', { key: 'k' }, 'ERR_REQUEST_INVALID', 'body.policy'],
    ['policy a number', { policy: 7, key: 'k' }, 'ERR_REQUEST_INVALID', 'body.policy'],
    ['key missing', { policy: 'api' }, 'ERR_REQUEST_INVALID', 'body.key'],
    ['key and keys', { policy: 'api', key: 'a', keys: ['b'] }, 'ERR_REQUEST_INVALID', 'body.keys'],
    ['keys empty', { policy: 'api', keys: [] }, 'ERR_REQUEST_INVALID', 'body.keys'],
    [
      'keys too many',
      { policy: 'api', keys: Array.from({ length: 33 }, (_, i) => `k${i}`) },
      'ERR_REQUEST_INVALID',
      'body.keys',
    ],
    ['keys not strings', { policy: 'api', keys: ['a', 1] }, 'ERR_REQUEST_INVALID', 'body.keys[1]'],
    ['cost a string', { policy: 'api', key: 'k', cost: '1' }, 'ERR_REQUEST_INVALID', 'body.cost'],
    [
      'checks and policy',
      { policy: 'api', checks: [{ policy: 'api', key: 'k' }] },
      'ERR_REQUEST_INVALID',
      'body.policy',
    ],
    ['checks entry bad', { checks: [{ policy: 'api' }] }, 'ERR_REQUEST_INVALID', 'body.checks[0].key'],
    ['unknown policy', { policy: 'nope', key: 'k' }, 'ERR_POLICY_UNKNOWN', 'body.policy'],
    ['bad key', { policy: 'api', key: '' }, 'ERR_KEY_INVALID', 'body.key'],
    ['bad key in keys[1]', { policy: 'api', keys: ['ok', ''] }, 'ERR_KEY_INVALID', 'body.keys[1]'],
    [
      'unknown policy in checks[1]',
      {
        checks: [
          { policy: 'api', key: 'k' },
          { policy: 'nope', key: 'k' },
        ],
      },
      'ERR_POLICY_UNKNOWN',
      'body.checks[1].policy',
    ],
    [
      'bad key in checks[1]',
      {
        checks: [
          { policy: 'api', key: 'k' },
          { policy: 'api', key: '' },
        ],
      },
      'ERR_KEY_INVALID',
      'body.checks[1].key',
    ],
    ['bad cost', { policy: 'api', key: 'k', cost: 0.5 }, 'ERR_COST_INVALID', 'body.cost'],
    // issue 11: the error formatter overflowed the stack on deep JSON (500 ERR_INTERNAL)
    ['JSON nested 5,000 deep', `${'['.repeat(5000)}${']'.repeat(5000)}`, 'ERR_REQUEST_INVALID', 'body'],
    [
      'JSON nested 5,000 deep in a field',
      `{"policy":"api","key":${'['.repeat(5000)}${']'.repeat(5000)}}`,
      'ERR_REQUEST_INVALID',
      'body',
    ],
    [
      'a field name with control characters',
      { policy: 'api', key: 'k', 'a\u0000\u001b[31mb': 1 },
      'ERR_REQUEST_INVALID',
      'body["a\\u0000\\u001b[31mb"]',
    ],
  ];
  it.each(bad)('%s → 400 %s naming %s', async (_name, body, code, field) => {
    const r = await post(body);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code, field });
    expect(typeof r.body.error.message).toBe('string');
    expect(r.body.error.message.startsWith(field)).toBe(false);
  });

  it('bad requests change nothing', async () => {
    await post({ policy: 'api', key: 'k', cost: 'x' });
    await post({ policy: 'api', key: 'k', cost: 0 });
    expect((await post({ policy: 'api', key: 'k', cost: 3 })).status).toBe(200);
  });

  it('refuses other content types with 415', async () => {
    const r = await post({ policy: 'api', key: 'k' }, { 'content-type': 'text/plain' });
    expect(r.status).toBe(415);
    expect(r.body.error.code).toBe('ERR_UNSUPPORTED_MEDIA_TYPE');
    expect(
      (await post({ policy: 'api', key: 'k' }, { 'content-type': 'application/json; charset=latin1' }))
        .status,
    ).toBe(415);
    expect(
      (await post({ policy: 'api', key: 'k' }, { 'content-type': 'application/json; charset=UTF-8' })).status,
    ).toBe(200);
  });

  it('refuses a body over the cap with 413, by content-length and when streamed', async () => {
    const big = JSON.stringify({ policy: 'api', key: 'x'.repeat(20_000) });
    const r = await post(big);
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe('ERR_BODY_TOO_LARGE');
    // chunked: no content-length up front
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${daemon.http.url}/v1/check`, { method: 'POST', headers: JSON_TYPE }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      for (let i = 0; i < 20; i++) req.write('x'.repeat(1000));
      req.end();
    });
    expect(status).toBe(413);
    // the server is still fine
    expect((await post({ policy: 'api', key: 'after' })).status).toBe(200);
  });

  it('503 when the limiter is not running; 500 (logged) when it fails unexpectedly', async () => {
    fake.ready = false;
    const r = await post({ policy: 'api', key: 'k' });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe(ErrorCodes.NOT_STARTED);
    fake.ready = true;
    fake.explode = new TypeError('boom');
    const r2 = await post({ policy: 'api', key: 'k' });
    expect(r2.status).toBe(500);
    expect(r2.body.error.code).toBe('ERR_INTERNAL');
    expect(log.lines.some((l) => l.level === 'error')).toBe(true);
    fake.explode = new RateMeshError(ErrorCodes.CODEC_INVALID, 'odd');
    expect((await post({ policy: 'api', key: 'k' })).status).toBe(500);
    fake.explode = undefined;
    expect((await post({ policy: 'api', key: 'k' })).status).toBe(200);
  });
});

async function batch(body: unknown) {
  const res = await fetch(`${daemon.http.url}/v1/check/batch`, {
    method: 'POST',
    headers: JSON_TYPE,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Loose };
}

describe('POST /v1/check/batch', () => {
  it('decides each request in order, as one by one would: a status per decision, 200 overall', async () => {
    const one = { policy: 'api', key: 'ip:1.2.3.4' };
    const r = await batch({ requests: [one, one, { ...one, key: 'other' }, one, one] });
    expect(r.status).toBe(200);
    const d = r.body.decisions;
    expect(d.map((x: Loose) => x.status)).toEqual([200, 200, 200, 200, 429]);
    expect(d.map((x: Loose) => x.remaining)).toEqual([2, 1, 2, 0, 0]);
    expect(d[4]).toMatchObject({ allowed: false, limited: true, policy: 'api', key: 'ip:1.2.3.4' });
    expect(d[4].retryAfter).toBeGreaterThan(0);
    expect(typeof d[0].decidedAt).toBe('number');
    // the same counts a single check sees afterwards
    expect((await post(one)).status).toBe(429);
    expect((await post({ ...one, key: 'other' })).status).toBe(200);
  });

  it('answers a bad request in place, naming its field, and decides the others; a bad one spends nothing', async () => {
    const r = await batch({
      requests: [
        { policy: 'api', key: 'k' },
        { policy: 'api', key: 'k', cost: 0.5 },
        { policy: 'nope', key: 'k' },
        { policy: 'api', key: 'k', extra: 1 },
        'not an object',
        { policy: 'api', keys: ['k', 'j'] },
      ],
    });
    expect(r.status).toBe(200);
    const d = r.body.decisions;
    expect(d[0]).toMatchObject({ status: 200, allowed: true, remaining: 2 });
    expect(d[1]).toMatchObject({
      status: 400,
      error: { code: 'ERR_COST_INVALID', field: 'body.requests[1].cost' },
    });
    expect(d[2]).toMatchObject({
      status: 400,
      error: { code: 'ERR_POLICY_UNKNOWN', field: 'body.requests[2].policy' },
    });
    expect(d[3]).toMatchObject({
      status: 400,
      error: { code: 'ERR_REQUEST_INVALID', field: 'body.requests[3].extra' },
    });
    expect(d[4]).toMatchObject({
      status: 400,
      error: { code: 'ERR_REQUEST_INVALID', field: 'body.requests[4]' },
    });
    expect(d[5]).toMatchObject({ status: 200, allowed: true, remaining: 1 });
    expect(d.length).toBe(6);
  });

  it('refuses a batch that is not {requests: [1..1000]} with 400, and deciding nothing', async () => {
    const cases: [unknown, string][] = [
      [[{ policy: 'api', key: 'k' }], 'body'],
      [{}, 'body.requests'],
      [{ requests: [] }, 'body.requests'],
      [{ requests: 'x' }, 'body.requests'],
      // over the count cap (small items, so the body stays under the byte cap; they are never read)
      [{ requests: new Array(1001).fill(0) }, 'body.requests'],
      [{ requests: [{ policy: 'api', key: 'k' }], more: 1 }, 'body.more'],
      ['{not json', 'body'],
    ];
    for (const [body, field] of cases) {
      const r = await batch(body);
      expect(r.status, JSON.stringify(body).slice(0, 40)).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'ERR_REQUEST_INVALID', field });
    }
    expect((await post({ policy: 'api', key: 'k', cost: 3 })).status).toBe(200);
  });

  it('503 per request when the limiter is not running', async () => {
    fake.ready = false;
    const r = await batch({ requests: [{ policy: 'api', key: 'k' }] });
    expect(r.status).toBe(200);
    expect(r.body.decisions[0]).toMatchObject({ status: 503, error: { code: ErrorCodes.NOT_STARTED } });
  });
});

describe('the HTTP edge (issue 11)', () => {
  it('never echoes control characters raw in an error', async () => {
    const bodies: unknown[] = [
      { policy: 'api', key: 'k', 'x\u0007\u001b[2J': 1 },
      { policy: 'a\u0000\u001b[31m', key: 'k' },
      { policy: 'api', key: 'k', cost: '\u0000\u001b' },
      { checks: [{ policy: 'api', key: 'k', '\u001b': 1 }] },
      `{"policy":"api","key":"k","${'\\u001b'.repeat(500)}":1}`,
    ];
    for (const body of bodies) {
      const r = await post(body);
      expect(r.status).toBe(400);
      const { message, field } = r.body.error as { message: string; field?: string };
      expect(message, JSON.stringify(message)).not.toMatch(/[\u0000-\u001f\u007f]/);
      if (field !== undefined) {
        expect(field, JSON.stringify(field)).not.toMatch(/[\u0000-\u001f\u007f]/);
        expect(field.length).toBeLessThan(120);
      }
    }
  });

  it('a batch of 1,000 checks fits the batch body cap; 1,001 is refused by count, not by size', async () => {
    const one = { policy: 'api', key: `acct:${'x'.repeat(120)}` };
    const ok = await batch({ requests: new Array(1000).fill(one) });
    expect(ok.status).toBe(200);
    expect(ok.body.decisions).toHaveLength(1000);
    const over = await batch({ requests: new Array(1001).fill(one) });
    expect(over.status).toBe(400);
    expect(over.body.error).toMatchObject({ code: 'ERR_REQUEST_INVALID', field: 'body.requests' });
    expect(over.body.error.message).toMatch(/1\.\.1000/);
    // one check keeps the small cap
    const big = await post({ policy: 'api', key: 'k', pad: 'x'.repeat(20_000) });
    expect(big.status).toBe(413);
  });

  it('cuts a client that is too slow with its headers, with 408, at the configured timeout', async () => {
    await daemon.stop();
    const cfg = config();
    cfg.http.headersTimeoutMs = 300;
    cfg.http.requestTimeoutMs = 600;
    await start(cfg);
    const reply = await new Promise<{ data: string; closed: boolean }>((resolve, reject) => {
      const s = connect(daemon.http.port, '127.0.0.1', () =>
        s.write('POST /v1/check HTTP/1.1\r\nHost: x\r\n'),
      );
      let data = '';
      s.on('data', (d) => {
        data += d.toString();
      });
      s.on('close', () => resolve({ data, closed: true }));
      s.on('error', reject);
      // bounded: a server that never cuts it fails here, however slow the machine
      setTimeout(() => {
        s.destroy();
        resolve({ data, closed: false });
      }, 20_000);
    });
    expect(reply.data).toMatch(/^HTTP\/1\.1 408/);
    expect(reply.closed).toBe(true);
    expect((await fetch(`${daemon.http.url}/healthz`)).status).toBe(200);
  });

  it('refuses config timeouts that cannot work', async () => {
    const { loadConfig } = await import('../../src/daemon/config.js');
    const yaml =
      'http: { headersTimeoutMs: 5000, requestTimeoutMs: 1000 }\npolicies: [{ name: a, limit: 1, windowMs: 1000 }]\n';
    expect(() =>
      loadConfig({ argv: ['--config', '/c.yaml'], env: {}, cwd: '/', readFile: () => Buffer.from(yaml) }),
    ).toThrow(/config\.http\.requestTimeoutMs/);
  });
});

describe('routing', () => {
  it('404 for unknown paths, 405 with Allow for wrong methods', async () => {
    const r = await fetch(`${daemon.http.url}/v2/nope`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as Loose).error.code).toBe('ERR_NOT_FOUND');
    const r2 = await fetch(`${daemon.http.url}/v1/check`);
    expect(r2.status).toBe(405);
    expect(r2.headers.get('allow')).toBe('POST');
    const r3 = await fetch(`${daemon.http.url}/metrics`, { method: 'DELETE' });
    expect(r3.status).toBe(405);
    expect(r3.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers a malformed HTTP request with 400 and keeps serving', async () => {
    const reply = await new Promise<string>((resolve, reject) => {
      const s = connect(daemon.http.port, '127.0.0.1', () => s.write('GARBAGE\r\n\r\n'));
      let data = '';
      s.on('data', (d) => {
        data += d.toString();
      });
      s.on('end', () => resolve(data));
      s.on('error', reject);
    });
    expect(reply).toMatch(/^HTTP\/1\.1 400/);
    expect((await fetch(`${daemon.http.url}/healthz`)).status).toBe(200);
  });
});

describe('GET /healthz', () => {
  it('200 when started standalone; 503 when not ready', async () => {
    const r = await fetch(`${daemon.http.url}/healthz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ status: 'ok', ready: true, standalone: true });
    fake.ready = false;
    const r2 = await fetch(`${daemon.http.url}/healthz`);
    expect(r2.status).toBe(503);
    expect(await r2.json()).toMatchObject({ status: 'unavailable', reason: 'limiter not started' });
  });

  it('with bootstrap peers: 503 until a peer is live, 503 again when all are stale', async () => {
    await daemon.stop();
    fake = new FakeLimiter();
    await start(config({ bootstrap: ['/ip4/127.0.0.1/tcp/1'] }));
    let r = await fetch(`${daemon.http.url}/healthz`);
    expect(r.status).toBe(503);
    expect(((await r.json()) as Loose).reason).toMatch(/no peers yet/);
    fake.peerList = [fakePeer({ id: 'p1', ageMs: 5, stale: false, clockOffsetMs: 1, addrs: [] })];
    r = await fetch(`${daemon.http.url}/healthz`);
    expect(r.status).toBe(200);
    fake.peerList = [fakePeer({ id: 'p1', ageMs: 500, stale: true, clockOffsetMs: 1, addrs: [] })];
    r = await fetch(`${daemon.http.url}/healthz`);
    expect(r.status).toBe(503);
    expect(await r.json()).toMatchObject({ fallback: true, reason: expect.stringMatching(/stale/) });
  });
});

describe('GET /v1/peers and /v1/stats', () => {
  it('lists peers', async () => {
    fake.peerList = [
      fakePeer({ id: 'p1', ageMs: 5, stale: false, clockOffsetMs: 1, addrs: ['/ip4/127.0.0.1/tcp/2'] }),
      fakePeer({ id: 'p2', ageMs: 900, stale: true, clockOffsetMs: -3, addrs: [] }),
    ];
    const body = (await (await fetch(`${daemon.http.url}/v1/peers`)).json()) as Loose;
    expect(body).toMatchObject({ peerId: fake.peerId, live: 1, stale: 1, fallback: false });
    expect(body.peers).toHaveLength(2);
    expect(body.multiaddrs[0]).toMatch(/\/p2p\//);
  });

  it('ranks the hottest keys by admitted rate', async () => {
    for (let i = 0; i < 3; i++) await post({ policy: 'api', key: 'hot' });
    await post({ policy: 'api', key: 'hot' }); // denied: not counted
    await post({ policy: 'api', key: 'cold' });
    const body = (await (await fetch(`${daemon.http.url}/v1/stats?top=5`)).json()) as Loose;
    expect(body.hotKeys.map((h: Loose) => h.key)).toEqual(['hot', 'cold']);
    expect(body.hotKeys[0].rate).toBeGreaterThan(body.hotKeys[1].rate);
    expect(body.mesh.topic).toBe(fake.topic);
    const bad = await fetch(`${daemon.http.url}/v1/stats?top=0`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Loose).error.field).toBe('query.top');
  });
});

describe('one definition of "fallback active" (issue 10)', () => {
  it('/healthz, /v1/peers and the gauge agree, also while a node still waits for its expected peers', async () => {
    // a live peer is heard, but the engine still waits for the others it expects: it decides in fallback
    fake.peerList = [fakePeer({ id: 'peerA', ageMs: 10, stale: false, clockOffsetMs: 0, addrs: [] })];
    fake.fallback = true;
    const health = (await (await fetch(`${daemon.http.url}/healthz`)).json()) as Loose;
    const peers = (await (await fetch(`${daemon.http.url}/v1/peers`)).json()) as Loose;
    const metrics = await (await fetch(`${daemon.http.url}/metrics`)).text();
    expect(health.fallback).toBe(true);
    expect(peers.fallback).toBe(true);
    expect(metrics).toContain('ratemesh_fallback_active 1');
    fake.fallback = false;
    expect(((await (await fetch(`${daemon.http.url}/v1/peers`)).json()) as Loose).fallback).toBe(false);
    expect(await (await fetch(`${daemon.http.url}/metrics`)).text()).toContain('ratemesh_fallback_active 0');
  });
});

describe('GET /metrics', () => {
  it('exposes the named series', async () => {
    fake.peerList = [fakePeer({ id: 'peerA', ageMs: 1500, stale: true, clockOffsetMs: -2, addrs: [] })];
    fake.statsValue.gossip.msgsIn = 42;
    fake.statsValue.gossip.bytesOut = 4096;
    fake.statsValue.gossip.ticks = 30;
    fake.statsValue.gossip.fastTicks = 12;
    fake.statsValue.dropped = { oversize: 2 };
    fake.statsValue.gossip.dropped = { 'version-mismatch': 1, oversize: 1 };
    await post({ policy: 'api', key: 'm' });
    for (let i = 0; i < 3; i++) await post({ policy: 'api', key: 'm', cost: 1 });
    await post({ policy: 'nope', key: 'm' });
    const res = await fetch(`${daemon.http.url}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    for (const line of [
      'ratemesh_decisions_total{policy="api",result="allowed",mode="global"} 3',
      'ratemesh_decisions_total{policy="api",result="limited",mode="global"} 1',
      'ratemesh_denials_total{policy="api",rule="global-limit"} 1',
      'ratemesh_decision_duration_seconds_count 4',
      'ratemesh_check_errors_total{code="ERR_POLICY_UNKNOWN"} 1',
      'ratemesh_http_requests_total{route="/v1/check",status="429"} 1',
      'ratemesh_gossip_messages_total{direction="in"} 42',
      'ratemesh_gossip_bytes_total{direction="out"} 4096',
      'ratemesh_gossip_ticks_total{interval="configured"} 18',
      'ratemesh_gossip_ticks_total{interval="fast"} 12',
      'ratemesh_gossip_dropped_total{reason="oversize"} 3',
      'ratemesh_gossip_dropped_total{reason="version-mismatch"} 1',
      'ratemesh_peers_live 0',
      'ratemesh_peers_stale 1',
      'ratemesh_fallback_active 1',
      'ratemesh_view_age_seconds 1.5',
      'ratemesh_clock_offset_seconds{peer="peerA"} -0.002',
      `ratemesh_info{peer_id="${fake.peerId}",topic="${fake.topic}"} 1`,
    ]) {
      expect(text).toContain(line);
    }
    expect(text).toMatch(/^# TYPE ratemesh_decision_duration_seconds histogram$/m);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    // the engine's figures, read by name from its typed stats
    fake.fallback = false;
    Object.assign(fake.statsValue.engine, {
      capped: 4,
      keys: 7,
      evictions: 2,
      peersIgnored: 1,
      clockSkewed: 9,
      skewedPeers: 1,
      peerTable: 5,
      peersForgotten: 300,
      evictedLive: 6,
      sketchBytes: 1310720,
      slowGossip: ['api'],
    });
    const text2 = await (await fetch(`${daemon.http.url}/metrics`)).text();
    for (const line of [
      'ratemesh_fallback_active 0',
      'ratemesh_gossip_capped_total 4',
      'ratemesh_tracked_keys 7',
      'ratemesh_key_evictions_total 2',
      'ratemesh_peers_ignored_total 1',
      'ratemesh_clock_skewed_messages_total 9',
      'ratemesh_peers_clock_skewed 1',
      'ratemesh_peer_table_size 5',
      'ratemesh_peers_forgotten_total 300',
      'ratemesh_key_evictions_live_total 6',
      'ratemesh_eviction_sketch_bytes 1310720',
      'ratemesh_policy_slow_gossip{policy="api"} 1',
    ]) {
      expect(text2).toContain(line);
    }
    // counters follow the limiter's totals, not accumulate them per scrape
    fake.statsValue.gossip.msgsIn = 50;
    expect(await (await fetch(`${daemon.http.url}/metrics`)).text()).toContain(
      'ratemesh_gossip_messages_total{direction="in"} 50',
    );
  });
});

describe('lifecycle', () => {
  it('starts the limiter, logs the address and peer id, and stop() drains then stops it once', async () => {
    expect(fake.started).toBe(1);
    const started = log.lines.find((l) => l.msg === 'ratemesh node started');
    expect(started?.obj).toMatchObject({ http: daemon.http.url, peerId: fake.peerId });
    expect(daemon.http.port).toBeGreaterThan(0);
    await Promise.all([daemon.stop(), daemon.stop()]);
    expect(fake.stopped).toBe(1);
    await expect(fetch(`${daemon.http.url}/healthz`)).rejects.toThrow();
  });

  it('finishes an in-flight request while draining', async () => {
    const url = new URL(`${daemon.http.url}/v1/check`);
    const pending = new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
      const req = request(url, { method: 'POST', headers: JSON_TYPE }, (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, connection: res.headers.connection });
      });
      req.on('error', reject);
      req.write('{"policy":"api",');
      // finish the body only after the daemon started draining
      setTimeout(() => req.end('"key":"late"}'), 150);
    });
    await new Promise((r) => setTimeout(r, 50));
    const stopping = daemon.stop();
    const res = await pending;
    await stopping;
    expect(res).toEqual({ status: 200, connection: 'close' });
    expect(fake.stopped).toBe(1);
  });

  it('a listen failure stops the limiter and says why', async () => {
    const other = new FakeLimiter();
    const cfg = config();
    cfg.http.port = daemon.http.port;
    await expect(
      startDaemon({ config: cfg, logger: memoryLogger(), createLimiter: () => other }),
    ).rejects.toThrow(/cannot listen on 127\.0\.0\.1:\d+: EADDRINUSE/);
    expect(other.stopped).toBe(1);
  });

  it('mesh option errors are renamed under mesh.', async () => {
    const cfg = config();
    await expect(
      startDaemon({
        config: cfg,
        logger: memoryLogger(),
        createLimiter: () => {
          throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'not a multiaddr', 'listen[0]');
        },
      }),
    ).rejects.toThrow('mesh.listen[0]: not a multiaddr');
  });
});
