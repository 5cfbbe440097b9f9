import { afterEach, describe, expect, it } from 'vitest';
import type { DaemonConfig } from '../../src/daemon/config.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { EngineLimiter } from '../envoy/helpers.js';
import { memoryLogger } from './fake-limiter.js';

const policies = [{ name: 'api', limit: 3, windowMs: 10_000 }];

function config(): DaemonConfig {
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
    },
    log: { level: 'silent' },
    stats: { hotKeys: 16 },
    policies,
  };
}

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read loosely in tests
type Loose = any;

let daemon: Daemon | undefined;
afterEach(async () => {
  await daemon?.stop();
  daemon = undefined;
});

describe('GET /v1/explain', () => {
  it('explains a decision as numbers without spending, and refuses bad queries with a clear error', async () => {
    const limiter = new EngineLimiter(policies);
    daemon = await startDaemon({ config: config(), logger: memoryLogger(), createLimiter: () => limiter });
    const url = daemon.http.url;
    for (let i = 0; i < 3; i++) limiter.check('api', 'user:1');
    const res = await fetch(`${url}/v1/explain?policy=api&key=user:1`);
    expect(res.status).toBe(200);
    const x: Loose = await res.json();
    expect(x).toMatchObject({ policy: 'api', key: 'user:1', allowed: false, rule: 'global-limit', limit: 3 });
    expect(x.seen).toMatchObject({ total: 3, own: 3 });
    expect(x.retryAfterMs).toBeGreaterThan(0);
    // nothing was spent: a fresh key is still fully available after an explain
    const fresh: Loose = await (await fetch(`${url}/v1/explain?policy=api&key=user:2&cost=2`)).json();
    expect(fresh).toMatchObject({ allowed: true, remaining: 1, cost: 2 });
    expect(limiter.check('api', 'user:2', 3).allowed).toBe(true);
    for (const [q, field] of [
      ['key=user:1', 'query.policy'],
      ['policy=api', 'query.key'],
      ['policy=api&key=k&cost=-1', 'query.cost'],
      ['policy=nope&key=k', 'policy'],
    ] as const) {
      const bad = await fetch(`${url}/v1/explain?${q}`);
      expect(bad.status, q).toBe(400);
      const body: Loose = await bad.json();
      expect(body.error.field, q).toBe(field);
    }
    expect((await fetch(`${url}/v1/explain?policy=api&key=k`, { method: 'POST' })).status).toBe(405);
  });
});
