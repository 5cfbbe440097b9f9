import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { HTTP_FIELDS, loadConfig, MESH_FIELDS } from '../../src/daemon/config.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { restartOnlyChange } from '../../src/daemon/reload.js';
import type { MeshLimiterOptions } from '../../src/mesh/types.js';
import { EngineLimiter } from '../envoy/helpers.js';
import { memoryLogger } from './fake-limiter.js';

const dir = mkdtempSync(join(tmpdir(), 'ratemesh-reload-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

const BASE = `
http: { host: 127.0.0.1, port: 0 }
log: { level: info }
`;

let daemon: Daemon | undefined;
let limiter: EngineLimiter | undefined;
afterEach(async () => {
  await daemon?.stop();
  daemon = undefined;
});

/** A daemon over the real decision engine (on a manual clock: nothing moves unless the test says). */
async function start(configFile: string, watch = false) {
  const log = memoryLogger();
  const load = () => loadConfig({ argv: ['--config', configFile], env: {}, cwd: dir });
  daemon = await startDaemon({
    config: load(),
    logger: log,
    load,
    watch,
    createLimiter: (o: MeshLimiterOptions) => {
      limiter = new EngineLimiter(o.policies);
      return limiter;
    },
  });
  return { d: daemon, log };
}

async function check(d: Daemon, policy: string, key = 'k') {
  const res = await fetch(`${d.http.url}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ policy, key }),
  });
  return {
    status: res.status,
    body: (await res.json()) as { allowed: boolean; limit: number; remaining: number },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read loosely in tests
async function limits(d: Daemon): Promise<any> {
  return (await fetch(`${d.http.url}/v1/limits`)).json();
}

async function metricLines(d: Daemon, prefix: string): Promise<string[]> {
  const text = await (await fetch(`${d.http.url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(prefix));
}

describe('daemon config reload', () => {
  it('a valid config takes effect: a changed policy gets its new limit, unchanged ones keep their counts', async () => {
    const cfg = file(
      'valid.yaml',
      `${BASE}policies:\n  - { name: api, limit: 5, windowMs: 60000 }\n  - { name: other, limit: 3, windowMs: 60000 }\n`,
    );
    const { d, log } = await start(cfg);
    const before = await limits(d);
    for (let i = 0; i < 2; i++) expect((await check(d, 'api')).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await check(d, 'other')).status).toBe(200);
    expect((await check(d, 'other')).status).toBe(429);

    writeFileSync(
      cfg,
      `${BASE}policies:\n  - { name: api, limit: 5, windowMs: 60000 }\n  - { name: other, limit: 10, windowMs: 60000 }\n  - { name: added, limit: 1, windowMs: 1000 }\n`,
    );
    const r = d.reload('test');
    expect(r.ok).toBe(true);
    expect(r.policies).toEqual({ kept: ['api'], changed: ['other'], added: ['added'], removed: [] });
    // api kept its window: 2 of 5 spent
    const api = await check(d, 'api');
    expect(api.body).toMatchObject({ allowed: true, limit: 5, remaining: 2 });
    // other has its new limit (its 3 admitted requests are still in the window: same window, same buckets)
    const other = await check(d, 'other');
    expect(other.body).toMatchObject({ allowed: true, limit: 10, remaining: 6 });
    expect((await check(d, 'added')).status).toBe(200);

    const after = await limits(d);
    expect(after.version).not.toBe(before.version);
    const byName = Object.fromEntries(after.policies.map((p: { name: string }) => [p.name, p]));
    expect(byName.api.version).toBe(before.policies[0].version);
    expect(byName.other.version).not.toBe(before.policies[1].version);
    expect(byName.other.policy.limit).toBe(10);
    expect(after.reloads).toMatchObject({ ok: 1, failed: 0, last: { ok: true, trigger: 'test' } });
    expect(after.envoy).toBeNull();
    expect(after.configFile).toBe(cfg);

    expect(await metricLines(d, 'ratemesh_config_reloads_total')).toEqual([
      'ratemesh_config_reloads_total{result="ok"} 1',
      'ratemesh_config_reloads_total{result="failed"} 0',
    ]);
    expect(await metricLines(d, 'ratemesh_config_info')).toEqual([
      `ratemesh_config_info{version="${after.version}",file="${cfg}"} 1`,
    ]);
    expect(await metricLines(d, 'ratemesh_policy_info{policy="other"')).toEqual([
      `ratemesh_policy_info{policy="other",version="${byName.other.version}"} 1`,
    ]);
    const line = log.lines.find((l) => l.msg === 'config reloaded');
    expect(line?.obj).toMatchObject({ trigger: 'test', version: after.version, changed: ['other'] });
  });

  it('a removed policy is dropped', async () => {
    const cfg = file(
      'removed.yaml',
      `${BASE}policies:\n  - { name: api, limit: 5, windowMs: 60000 }\n  - { name: gone, limit: 3, windowMs: 60000 }\n`,
    );
    const { d } = await start(cfg);
    writeFileSync(cfg, `${BASE}policies:\n  - { name: api, limit: 5, windowMs: 60000 }\n`);
    expect(d.reload().policies?.removed).toEqual(['gone']);
    const r = await fetch(`${d.http.url}/v1/check`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ policy: 'gone', key: 'k' }),
    });
    expect(r.status).toBe(400);
    expect((await limits(d)).policies.map((p: { name: string }) => p.name)).toEqual(['api']);
  });

  it('an invalid config is refused naming the file and field; the old config keeps serving', async () => {
    const cfg = file('invalid.yaml', `${BASE}policies:\n  - { name: api, limit: 2, windowMs: 60000 }\n`);
    const { d, log } = await start(cfg);
    expect((await check(d, 'api')).status).toBe(200);
    const version = (await limits(d)).version;
    writeFileSync(cfg, `${BASE}policies:\n  - { name: api, limit: -4, windowMs: 60000 }\n`);
    const r = d.reload('test');
    expect(r.ok).toBe(false);
    expect(r.error).toMatchObject({ file: cfg, field: 'config.policies[0].limit' });
    expect(r.error?.message).toMatch(/must be a positive integer/);
    const line = log.lines.find((l) => l.msg === 'config reload refused: the old config keeps serving');
    expect(line?.obj).toMatchObject({ file: cfg, field: 'config.policies[0].limit', version });
    // still the old limit of 2, with its count
    expect((await check(d, 'api')).body).toMatchObject({ allowed: true, limit: 2, remaining: 0 });
    expect((await check(d, 'api')).status).toBe(429);
    expect((await limits(d)).version).toBe(version);
    expect(await metricLines(d, 'ratemesh_config_reloads_total')).toEqual([
      'ratemesh_config_reloads_total{result="ok"} 0',
      'ratemesh_config_reloads_total{result="failed"} 1',
    ]);
    // not YAML at all
    writeFileSync(cfg, 'policies: [ {');
    expect(d.reload().error).toMatchObject({ file: cfg, field: '--config' });
  });

  it('an invalid policy file is refused naming that file and the field in it', async () => {
    const pf = file('policies.yaml', '- { name: api, limit: 2, windowMs: 60000 }\n');
    const cfg = file('with-policy-file.yaml', `${BASE}policyFile: policies.yaml\n`);
    const { d } = await start(cfg);
    writeFileSync(pf, '- { name: api, limit: 2, windowMs: soon }\n');
    const r = d.reload();
    expect(r.ok).toBe(false);
    expect(r.error).toMatchObject({ file: pf, field: 'policies[0].windowMs' });
    writeFileSync(pf, '- { name: api, limit: 7, windowMs: 60000 }\n');
    expect(d.reload().ok).toBe(true);
    expect((await check(d, 'api')).body.limit).toBe(7);
  });

  it('a setting that needs a restart refuses the reload whole, naming it', async () => {
    const cfg = file('fixed.yaml', `${BASE}policies:\n  - { name: api, limit: 2, windowMs: 60000 }\n`);
    const { d } = await start(cfg);
    writeFileSync(
      cfg,
      `http: { host: 127.0.0.1, port: 1 }\nlog: { level: info }\npolicies:\n  - { name: api, limit: 9, windowMs: 60000 }\n`,
    );
    const r = d.reload();
    expect(r.ok).toBe(false);
    expect(r.error?.field).toBe('config.http.port');
    expect(r.error?.message).toMatch(/restart/);
    expect((await check(d, 'api')).body.limit).toBe(2);
  });

  it('a change under load: the connection stays, the unchanged policy never passes its limit across reloads', async () => {
    const cfg = file(
      'load.yaml',
      `${BASE}policies:\n  - { name: api, limit: 20, windowMs: 60000 }\n  - { name: other, limit: 1, windowMs: 60000 }\n`,
    );
    const { d } = await start(cfg);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let sockets = 0;
    const post = (policy: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          `${d.http.url}/v1/check`,
          { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('socket', (s) => {
          if (!(s as { seen?: boolean }).seen) {
            (s as { seen?: boolean }).seen = true;
            sockets++;
          }
        });
        req.on('error', reject);
        req.end(JSON.stringify({ policy, key: 'k' }));
      });
    let allowed = 0;
    for (let round = 0; round < 10; round++) {
      for (let i = 0; i < 4; i++) if ((await post('api')) === 200) allowed++;
      // other's limit changes every round; api stays as it is
      writeFileSync(
        cfg,
        `${BASE}policies:\n  - { name: api, limit: 20, windowMs: 60000 }\n  - { name: other, limit: ${2 + round}, windowMs: 60000 }\n`,
      );
      const r = d.reload('test');
      expect(r.ok).toBe(true);
      expect(r.policies?.kept).toEqual(['api']);
      expect(await post('other')).toBe(200);
    }
    agent.destroy();
    // 40 offered over 10 reloads: exactly the limit admitted (a reset would have let more through)
    expect(allowed).toBe(20);
    expect(sockets).toBe(1);
    expect(limiter!.engine.stats().policyReplacements).toBe(10);
  });

  it('watches its files: an edit is reloaded without a signal (bounded wait)', async () => {
    const cfg = file('watched.yaml', `${BASE}policies:\n  - { name: api, limit: 2, windowMs: 60000 }\n`);
    const { d } = await start(cfg, true);
    writeFileSync(cfg, `${BASE}policies:\n  - { name: api, limit: 3, windowMs: 60000 }\n`);
    const end = Date.now() + 10_000;
    while (d.lastReload === undefined && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(d.lastReload).toMatchObject({ ok: true, trigger: 'file-changed' });
    expect((await check(d, 'api')).body.limit).toBe(3);
  });
});

describe('restart-only settings', () => {
  it('every http.* and mesh.* field a config file takes is refused on reload, naming it (none ignored until a restart)', () => {
    const text = `${BASE}policies: [{ name: api, limit: 2, windowMs: 60000 }]\n`;
    const base = loadConfig({ argv: ['--config', file('fields.yaml', text)], env: {}, cwd: dir });
    const fields = [
      ...HTTP_FIELDS.map((f) => ['http', f] as const),
      ...MESH_FIELDS.map((f) => ['mesh', f] as const),
    ];
    for (const [section, f] of fields) {
      const next = structuredClone(base);
      (next[section] as Record<string, unknown>)[f] = `changed-${f}`;
      expect(restartOnlyChange(base, next), `${section}.${f}`).toBe(`config.${section}.${f}`);
    }
  });
});
