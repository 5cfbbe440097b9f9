/**
 * The probes (issue 28): `/livez` (the process decides) and `/readyz` (it can decide now,
 * in the L/N fallback too, once it has joined the mesh it was pointed at), in each situation of the README's table, and the SIGTERM
 * drain's order: readiness fails first, requests are still served for shutdownDelayMs,
 * then the listener closes, in-flight requests finish, and the limiter stops last.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { type DaemonConfig, loadConfig } from '../../src/daemon/config.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { FakeLimiter, fakePeer, memoryLogger } from './fake-limiter.js';

function config(bootstrap: string[], http: Partial<DaemonConfig['http']> = {}): DaemonConfig {
  return {
    configFile: undefined,
    http: { host: '127.0.0.1', port: 0, maxBodyBytes: 16384, drainTimeoutMs: 2000, ...http },
    mesh: {
      listen: undefined,
      bootstrap,
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
    policies: [{ name: 'api', limit: 3, windowMs: 10_000 }],
  };
}

let daemon: Daemon | undefined;
afterEach(async () => {
  await daemon?.stop();
  daemon = undefined;
});

async function start(fake: FakeLimiter, cfg: DaemonConfig, joinTimeoutMs?: number): Promise<Daemon> {
  daemon = await startDaemon({
    config: cfg,
    logger: memoryLogger(),
    createLimiter: () => fake,
    ...(joinTimeoutMs === undefined ? {} : { joinTimeoutMs }),
  });
  return daemon;
}

/** What discovery found in its rounds so far: `others` addresses not the node's own. */
function discovered(fake: FakeLimiter, rounds: number, others: number): void {
  fake.statsValue.discovery = { ...fake.statsValue.discovery, rounds, lastOthers: others };
}

function syncAnswers(fake: FakeLimiter, ok: number): void {
  fake.statsValue.sync = { ...fake.statsValue.sync, pulls: ok, pullsOk: ok };
}

async function probe(d: Daemon): Promise<{ livez: number; readyz: number; healthz: number }> {
  const get = async (p: string) => (await fetch(`${d.http.url}${p}`)).status;
  return { livez: await get('/livez'), readyz: await get('/readyz'), healthz: await get('/healthz') };
}

const live = (id: string) => fakePeer({ id, ageMs: 5, stale: false, clockOffsetMs: 0, addrs: [] });
const stale = (id: string) => fakePeer({ id, ageMs: 900, stale: true, clockOffsetMs: 0, addrs: [] });

describe('the probes in each situation', () => {
  it('a single replica (no bootstrap): live and ready', async () => {
    const d = await start(new FakeLimiter(), config([]));
    expect(await probe(d)).toEqual({ livez: 200, readyz: 200, healthz: 200 });
  });

  it('a single replica whose bootstrap names only itself, and the first pod of a Service: ready, in fallback', async () => {
    const fake = new FakeLimiter();
    fake.fallback = true;
    // the headless Service resolves to this pod alone (or to nothing yet): no member to join
    discovered(fake, 1, 0);
    const d = await start(fake, config(['dns:ratemesh-headless:4001']));
    expect(await probe(d)).toEqual({ livez: 200, readyz: 200, healthz: 503 });
    const body = (await (await fetch(`${d.http.url}/readyz`)).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 'ok', fallback: true, peers: { live: 0, stale: 0 } });
  });

  it('a partition (every peer stale): still live and ready (the L/N fallback decides)', async () => {
    const fake = new FakeLimiter();
    discovered(fake, 3, 2);
    syncAnswers(fake, 2);
    fake.peerList = [live('p1'), live('p2')];
    const d = await start(fake, config(['dns:ratemesh-headless:4001']));
    expect(await probe(d)).toEqual({ livez: 200, readyz: 200, healthz: 200 });
    fake.peerList = [stale('p1'), stale('p2')];
    fake.fallback = true;
    expect(await probe(d)).toEqual({ livez: 200, readyz: 200, healthz: 503 });
  });

  it('a pod joining others (a rolling update): live, not ready until its first sync answer, then ready for good', async () => {
    const fake = new FakeLimiter();
    fake.fallback = true;
    // the Service names three other pods; none has answered a sync yet
    discovered(fake, 1, 3);
    const d = await start(fake, config(['dns:ratemesh-headless:4001']), 600_000);
    expect(await probe(d)).toEqual({ livez: 200, readyz: 503, healthz: 503 });
    const body = (await (await fetch(`${d.http.url}/readyz`)).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 'unavailable', draining: false, fallback: true });
    expect(String(body.reason)).toMatch(/^joining/);
    // the first sync answer merged: it holds the mesh's windows and the live members' names
    syncAnswers(fake, 1);
    fake.fallback = false;
    fake.peerList = [live('p1')];
    expect(await probe(d)).toEqual({ livez: 200, readyz: 200, healthz: 200 });
    // and stays ready through a partition afterwards (the L/N fallback decides)
    fake.peerList = [stale('p1')];
    fake.fallback = true;
    expect(await probe(d)).toEqual({ livez: 200, readyz: 200, healthz: 503 });
  });

  it('a pod that finds members and hears none within joinTimeoutMs: ready in the L/N fallback', async () => {
    const fake = new FakeLimiter();
    fake.fallback = true;
    discovered(fake, 5, 3);
    const d = await start(fake, config(['dns:ratemesh-headless:4001']), 0);
    expect(await probe(d)).toEqual({ livez: 200, readyz: 200, healthz: 503 });
  });

  it('before the first discovery round: not ready (it does not know yet whether it is alone)', async () => {
    const fake = new FakeLimiter();
    fake.fallback = true;
    const d = await start(fake, config(['dns:ratemesh-headless:4001']), 600_000);
    expect((await probe(d)).readyz).toBe(503);
    discovered(fake, 1, 0);
    expect((await probe(d)).readyz).toBe(200);
  });

  it('a limiter that stopped outside a drain: not live (a restart helps), not ready', async () => {
    const fake = new FakeLimiter();
    const d = await start(fake, config([]));
    fake.ready = false;
    expect(await probe(d)).toEqual({ livez: 503, readyz: 503, healthz: 503 });
  });
});

describe('SIGTERM drain (Daemon.stop)', () => {
  it('readiness fails first, requests are served for shutdownDelayMs, in-flight ones finish, the limiter stops last', async () => {
    const fake = new FakeLimiter();
    const d = await start(fake, config([], { shutdownDelayMs: 400, drainTimeoutMs: 5_000 }));
    // an in-flight request whose body arrives only after the drain began
    const pending = new Promise<number>((resolve, reject) => {
      const req = request(
        `${d.http.url}/v1/check`,
        { method: 'POST', headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.write('{"policy":"api",');
      setTimeout(() => req.end('"key":"late"}'), 600);
    });
    await new Promise((r) => setTimeout(r, 50));
    const stopped = d.stop();
    // during the delay: live, not ready, still deciding for new connections
    expect(await probe(d)).toEqual({ livez: 200, readyz: 503, healthz: 503 });
    const body = (await (await fetch(`${d.http.url}/readyz`)).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 'unavailable', reason: 'draining: shutting down', draining: true });
    const check = await fetch(`${d.http.url}/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"policy":"api","key":"during-delay"}',
    });
    expect(check.status).toBe(200);
    expect(fake.stopped).toBe(0);
    expect(await pending).toBe(200);
    await stopped;
    expect(fake.stopped).toBe(1);
    await expect(fetch(`${d.http.url}/livez`)).rejects.toThrow();
  });

  it('shutdownDelayMs and drainTimeoutMs come from the config file, the environment and the flags', () => {
    const files: Record<string, string> = {
      '/c/node.yaml':
        'http: { shutdownDelayMs: 5000, drainTimeoutMs: 20000 }\npolicies: [{ name: api, limit: 5, windowMs: 1000 }]\n',
    };
    const readFile = (p: string) => {
      const f = files[p];
      if (f === undefined) throw Object.assign(new Error(`ENOENT ${p}`), { code: 'ENOENT' });
      return Buffer.from(f);
    };
    const fromFile = loadConfig({ argv: ['--config', '/c/node.yaml'], env: {}, cwd: '/c', readFile });
    expect(fromFile.http).toMatchObject({ shutdownDelayMs: 5000, drainTimeoutMs: 20000 });
    const fromEnv = loadConfig({
      argv: ['--config', '/c/node.yaml'],
      env: { RATEMESH_SHUTDOWN_DELAY_MS: '100', RATEMESH_DRAIN_TIMEOUT_MS: '300' },
      cwd: '/c',
      readFile,
    });
    expect(fromEnv.http).toMatchObject({ shutdownDelayMs: 100, drainTimeoutMs: 300 });
    const fromFlag = loadConfig({
      argv: ['--config', '/c/node.yaml', '--shutdown-delay-ms', '7'],
      env: { RATEMESH_SHUTDOWN_DELAY_MS: '100' },
      cwd: '/c',
      readFile,
    });
    expect(fromFlag.http.shutdownDelayMs).toBe(7);
    expect(() =>
      loadConfig({
        argv: ['--config', '/c/node.yaml', '--shutdown-delay-ms', '-1'],
        env: {},
        cwd: '/c',
        readFile,
      }),
    ).toThrow(/shutdown-delay-ms/);
  });
});
