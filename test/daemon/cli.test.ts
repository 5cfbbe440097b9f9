import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

const BIN = new URL('../../bin/ratemesh.js', import.meta.url).pathname;
const ROOT = new URL('../..', import.meta.url).pathname;
const ENV = { ...process.env, RATEMESH_FROM_SOURCE: '1' };
const dir = mkdtempSync(join(tmpdir(), 'ratemesh-daemon-'));
const running = new Set<ChildProcess>();

afterEach(() => {
  for (const p of running) p.kill('SIGKILL');
  running.clear();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

/** Runs the CLI to completion; bounded. */
function run(
  args: string[],
  timeoutMs = 20_000,
  cmd: string[] = [process.execPath, BIN],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const [exe = '', ...pre] = cmd;
    const p = spawn(exe, [...pre, ...args], { env: ENV, stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT });
    running.add(p);
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => {
      stdout += d;
    });
    p.stderr.on('data', (d) => {
      stderr += d;
    });
    const t = setTimeout(() => reject(new Error(`timed out: ${args.join(' ')}\n${stderr}`)), timeoutMs);
    p.on('exit', (code) => {
      clearTimeout(t);
      running.delete(p);
      resolve({ code, stdout, stderr });
    });
  });
}

interface Node {
  proc: ChildProcess;
  url: string;
  peerId: string;
  multiaddrs: string[];
  logs: Record<string, unknown>[];
  exited: Promise<number | null>;
}

/** Starts `ratemesh node` and waits for its "started" log line; bounded. */
function startNode(args: string[], timeoutMs = 30_000): Promise<Node> {
  const proc = spawn(process.execPath, [BIN, 'node', ...args], {
    env: ENV,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  proc.stderr?.on('data', (d) => {
    stderr += d;
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`node did not start in time\n${stderr}`)), timeoutMs);
    void exited.then((code) => reject(new Error(`node exited with ${code}\n${stderr}`)));
    createInterface({ input: proc.stdout! }).on('line', (line) => {
      let obj: Record<string, unknown>;
      try {
        obj = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(obj);
      if (obj.msg === 'ratemesh node started') {
        clearTimeout(t);
        resolve({
          proc,
          url: String(obj.http),
          peerId: String(obj.peerId),
          multiaddrs: obj.multiaddrs as string[],
          logs,
          exited,
        });
      }
    });
  });
}

async function check(url: string, body: object): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const CONFIG = `
http: { host: 127.0.0.1, port: 0 }
mesh: { listen: [/ip4/127.0.0.1/tcp/0], gossipIntervalMs: 20, expectedDelayMs: 1000 }
log: { level: info }
policies:
  - { name: api, limit: 3, windowMs: 60000 }
  - { name: shared, limit: 10, windowMs: 60000 }
`;

describe('ratemesh CLI', () => {
  it('prints help', async () => {
    const [r, top, unknown, npx] = await Promise.all([
      run(['node', '--help']),
      run(['--help']),
      run(['frob']),
      run(['ratemesh', 'node', '--help'], 30_000, ['npx', '--no-install']),
    ]);
    expect(npx.code).toBe(0);
    expect(npx.stdout).toMatch(/Usage: ratemesh node --config/);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Usage: ratemesh node --config/);
    expect(r.stdout).toMatch(/RATEMESH_HTTP/);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/ratemesh keygen/);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "frob"/);
  });

  it('a bad config exits 2 with a message naming the field', async () => {
    const cfg = file('bad.yaml', 'http: { port: "x" }\npolicies: [{ name: a, limit: 1, windowMs: 10 }]\n');
    const [r, r2, r3] = await Promise.all([
      run(['node', '--config', cfg]),
      run(['node', '--config', file('bad2.yaml', 'policies: [{ name: a, limit: 0, windowMs: 10 }]\n')]),
      run(['node', '--config', file('ok.yaml', CONFIG), '--listen', 'not-a-multiaddr']),
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('config.http.port: must be an integer 0..65535 (got "x")');
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/config\.policies\[0\]\.limit/);
    expect(r3.code).toBe(2);
    expect(r3.stderr).toMatch(/mesh\.listen\[0\]/);
  });

  it('keygen writes a key the node then runs with (stable peer id)', async () => {
    const keyFile = join(dir, 'node.key');
    const psk = join(dir, 'swarm.key');
    const [k, p] = await Promise.all([run(['keygen', '--out', keyFile]), run(['psk', '--out', psk])]);
    expect(k.code).toBe(0);
    expect(p.code).toBe(0);
    const { peerId } = JSON.parse(k.stdout) as { peerId: string };
    const [again, node] = await Promise.all([
      run(['keygen', '--out', keyFile]),
      startNode(['--config', file('k.yaml', CONFIG), '--key-file', keyFile, '--psk-file', psk]),
    ]);
    expect(again.code).toBe(1); // no overwrite without --force
    expect(again.stderr).toMatch(/EEXIST/);
    expect(node.peerId).toBe(peerId);
    node.proc.kill('SIGTERM');
    expect(await node.exited).toBe(0);
  });

  it('runs the real daemon: checks, 429 after the limit, metrics, SIGTERM exits 0', async () => {
    const node = await startNode(['--config', file('d.yaml', CONFIG)]);
    expect(node.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(node.url).not.toMatch(/:0$/);
    expect(node.peerId).toMatch(/^12D3Koo/);

    const health = await fetch(`${node.url}/healthz`);
    expect(health.status).toBe(200);

    for (let i = 0; i < 3; i++) {
      const r = await check(node.url, { policy: 'api', key: 'acct:42' });
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ allowed: true, policy: 'api', key: 'acct:42' });
    }
    const denied = await check(node.url, { policy: 'api', key: 'acct:42' });
    expect(denied.status).toBe(429);
    expect(denied.body).toMatchObject({ allowed: false, limited: true, limit: 3, remaining: 0 });

    const bad = await check(node.url, { policy: 'nope', key: 'acct:42' });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: 'ERR_POLICY_UNKNOWN' } });
    const badKey = await check(node.url, { policy: 'api', key: 'a\u0001b' });
    expect(badKey.status).toBe(400);
    expect(badKey.body).toMatchObject({ error: { code: 'ERR_KEY_INVALID' } });
    const badCost = await check(node.url, { policy: 'api', key: 'k', cost: 0 });
    expect(badCost.status).toBe(400);
    expect(badCost.body).toMatchObject({ error: { code: 'ERR_COST_INVALID' } });

    const metrics = await (await fetch(`${node.url}/metrics`)).text();
    expect(metrics).toContain('ratemesh_decisions_total{policy="api",result="allowed",mode="global"} 3');
    expect(metrics).toContain('ratemesh_decisions_total{policy="api",result="limited",mode="global"} 1');
    expect(metrics).toMatch(/ratemesh_gossip_messages_total\{direction="out"\} \d+/);

    const stats = (await (await fetch(`${node.url}/v1/stats`)).json()) as { hotKeys: { key: string }[] };
    expect(stats.hotKeys[0]?.key).toBe('acct:42');

    node.proc.kill('SIGTERM');
    expect(await node.exited).toBe(0);
    expect(node.logs.some((l) => l.msg === 'ratemesh node stopped')).toBe(true);
  });

  it('SIGHUP reloads the config in place: counts of unchanged policies kept, an invalid file refused with file and field', async () => {
    const cfg = file('hup.yaml', CONFIG);
    const node = await startNode(['--config', cfg]);
    for (let i = 0; i < 2; i++) expect((await check(node.url, { policy: 'api', key: 'k' })).status).toBe(200);
    // shared: 10 -> 20; api unchanged
    writeFileSync(cfg, CONFIG.replace('limit: 10,', 'limit: 20,'));
    node.proc.kill('SIGHUP');
    const ok = await until('the reload', async () => node.logs.find((l) => l.msg === 'config reloaded'));
    expect(ok).toMatchObject({ kept: ['api'], changed: ['shared'] });
    expect((await check(node.url, { policy: 'shared', key: 'k' })).body).toMatchObject({ limit: 20 });
    // api kept its count: 2 of 3 spent
    expect((await check(node.url, { policy: 'api', key: 'k' })).body).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect((await check(node.url, { policy: 'api', key: 'k' })).status).toBe(429);

    writeFileSync(
      cfg,
      CONFIG.replace('limit: 20,', 'limit: twenty,').replace('limit: 10,', 'limit: twenty,'),
    );
    node.proc.kill('SIGHUP');
    const refused = await until('the refusal', async () =>
      node.logs.find((l) => l.msg === 'config reload refused: the old config keeps serving'),
    );
    expect(refused).toMatchObject({ file: cfg, field: 'config.policies[1].limit' });
    expect((await check(node.url, { policy: 'shared', key: 'k' })).body).toMatchObject({ limit: 20 });
    const metrics = await (await fetch(`${node.url}/metrics`)).text();
    // (the file is watched as well: a poll that saw the edit before the signal may have reloaded it first)
    expect(metrics).toMatch(/ratemesh_config_reloads_total\{result="ok"\} [12]\n/);
    expect(metrics).toMatch(/ratemesh_config_reloads_total\{result="failed"\} [12]\n/);
    node.proc.kill('SIGTERM');
    expect(await node.exited).toBe(0);
  });

  it('two daemons form a mesh: one spends the shared limit, the other denies', async () => {
    const a = await startNode(['--config', file('a.yaml', CONFIG)]);
    const b = await startNode(['--config', file('b.yaml', CONFIG), '--bootstrap', a.multiaddrs[0] ?? '']);
    await until('b to see a as a live peer and decide (past its start gate: ready)', async () => {
      const r = (await (await fetch(`${b.url}/v1/peers`)).json()) as { live: number };
      return r.live >= 1 && (await fetch(`${b.url}/readyz`)).status === 200 ? true : undefined;
    });
    expect((await fetch(`${b.url}/healthz`)).status).toBe(200);

    // a fresh key: a holds its half of the room at once, the rest once b can have heard its
    // demand (a refusal says when to come back); bounded in attempts
    let admitted = 0;
    for (let i = 0; i < 1_200 && admitted < 10; i++) {
      const r = await check(a.url, { policy: 'shared', key: 'k' });
      if (r.status === 200) admitted++;
      else {
        expect(r.body).toMatchObject({ rule: 'headroom-share' });
        await new Promise((done) => setTimeout(done, 25));
      }
    }
    // on a starved CI machine this once stopped at 9 of 10 after 400 attempts (not reproduced since,
    // under three CPU burners): a failure now says why the last refusal was made
    if (admitted !== 10) {
      const why = await (await fetch(`${a.url}/v1/explain?policy=shared&key=k`)).json();
      expect.fail(`a admitted ${admitted} of 10; its explanation of the next check: ${JSON.stringify(why)}`);
    }
    // a's counts reach b by gossip: once b has merged a few of a's messages sent after the spend
    // (each carries the keys a touched lately), b's very first check on the key is refused.
    // Waiting on merges, not on a fixed time, holds on a busy machine; expectedDelayMs 1000 keeps
    // b's view of a fresh (not stale for 3g + 2d = 2.06 s) while the CPU is starved.
    const merged = async () =>
      ((await (await fetch(`${b.url}/v1/stats`)).json()) as { mesh: { engine: { gossipIn: number } } }).mesh
        .engine.gossipIn;
    const m0 = await merged();
    await until("b to merge 3 of a's messages sent after the spend", async () =>
      (await merged()) >= m0 + 3 ? true : undefined,
    );
    const first = await check(b.url, { policy: 'shared', key: 'k' });
    expect(first.status).toBe(429);
    expect(first.body).toMatchObject({ allowed: false, policy: 'shared', mode: 'global' });
    expect((await check(b.url, { policy: 'shared', key: 'other' })).status).toBe(200);
    const metrics = await (await fetch(`${b.url}/metrics`)).text();
    expect(metrics).toMatch(/ratemesh_gossip_messages_total\{direction="in"\} [1-9]/);
    expect(metrics).toContain('ratemesh_peers_live 1');

    a.proc.kill('SIGTERM');
    b.proc.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    expect(await b.exited).toBe(0);
  });
});
