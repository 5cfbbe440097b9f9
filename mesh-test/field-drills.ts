/**
 * Field drills (issue 11): what real deployments and attackers do, on real processes.
 *
 *   churn  4 node processes; pods replaced with fresh peer ids (in-process mesh nodes, a few
 *          alive at a time, each spending on the drill's key) until `churnIds` ids have come
 *          and gone; then the seed trace on the 4: worst 1 s <= L + 2 %, no gossip dropped as
 *          `too-many-peers`, the peer table bounded by live members
 *   flood  one daemon process (`ratemesh node`); 1,000,000 distinct keys through
 *          POST /v1/check/batch as fast as it takes them, while a hot key (2 x L per s on
 *          L = 1,000/s) and a 5-per-minute key (2 per s) take steady traffic: each stays within
 *          its limit + 2 % (worst rolling window by the daemon's decision time), the daemon's
 *          peak RSS under the bound the README states
 *
 * Both are in `npm run mesh:drills` (`--only churn,flood`). Every loop is bounded in count and
 * time; traffic goes to 127.0.0.1 only.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMeshLimiter } from '../src/mesh/index.js';
import type { Logger, MeshLimiter } from '../src/mesh/types.js';
import { worstRolling } from '../src/sim/metrics.js';
import type { Trace } from '../src/sim/trace.js';
import { check, type DrillResult } from './drills.js';
import { freePorts, Mesh, ROOT, SEED_POLICY, sleep, within } from './harness.js';
import { figures, replayLive, sum } from './replay.js';

const L = SEED_POLICY.limit;
const BOUND = Math.round(L * 1.02);

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Peer ids replaced one after another (a rolling deploy that never ends), then the seed trace. */
export async function churnDrill(
  trace: Trace,
  g: number,
  d: number,
  opts: { churnIds?: number; concurrent?: number; lifeMs?: number; settleMs?: number } = {},
): Promise<DrillResult> {
  const churnIds = opts.churnIds ?? 300;
  const concurrent = opts.concurrent ?? 8;
  const lifeMs = opts.lifeMs ?? 1500;
  const mesh = await Mesh.start({
    nodes: trace.nodes,
    policies: [SEED_POLICY],
    gossipIntervalMs: g,
    injectDelayMs: d,
  });
  try {
    await mesh.waitForPeers(30_000);
    const addrs = mesh.procs.map((p) => `/ip4/127.0.0.1/tcp/${p.cfg.port}/p2p/${p.peerId}`);
    const t0 = Date.now();
    let started = 0;
    let spent = 0;
    let failed = 0;
    const oneLife = async (): Promise<void> => {
      const node: MeshLimiter = createMeshLimiter({
        policies: [SEED_POLICY],
        listen: ['/ip4/127.0.0.1/tcp/0'],
        bootstrap: addrs,
        gossipIntervalMs: g,
        expectedDelayMs: d,
        logger: silent,
      });
      try {
        await within('churn node start', 20_000, node.start());
        const until = Date.now() + lifeMs;
        while (Date.now() < until) {
          if (node.check(SEED_POLICY.name, 'global').allowed) spent++;
          await sleep(100);
        }
      } catch {
        failed++;
      } finally {
        await within('churn node stop', 20_000, node.stop()).catch(() => {});
      }
    };
    // `concurrent` lanes, each a sequence of fresh ids: bounded by churnIds and by 10 minutes.
    const deadline = Date.now() + 600_000;
    await Promise.all(
      Array.from({ length: concurrent }, async () => {
        while (started < churnIds && Date.now() < deadline) {
          started++;
          await oneLife();
        }
      }),
    );
    const churnMs = Date.now() - t0;
    // A member silent for departAfterMs (5 s by default) departs; until then it is a stale member
    // the others reserve L/N for (the safe side). The trace starts once the last ids have departed.
    const settleMs = opts.settleMs ?? 6000;
    await sleep(settleMs);
    const out = await replayLive(mesh, trace, { policy: SEED_POLICY.name });
    const f = figures(trace, out.admitted, L, SEED_POLICY.windowMs);
    const r = out.reports;
    const tooMany = sum(r.map((x) => x.engine.dropped['too-many-peers'] ?? 0));
    const members = r.map((x) => x.engine.members);
    const fallbackDecisions = sum(r.map((x) => x.engine.byMode.fallback ?? 0));
    const checks = [
      check('peer ids that came and went', started, `>= ${churnIds}`, started >= churnIds),
      check('gossip dropped as too-many-peers (4 nodes, during the trace)', tooMany, '0', tooMany === 0),
      // every churned id left at least the trace's length ago: only the live members remain (N, itself included)
      check(
        'members (N) in each table after the trace',
        members.join('/'),
        `<= ${trace.nodes} (the live ones)`,
        members.every((m) => m <= trace.nodes),
      ),
      check(
        'decisions in the L/N fallback during the trace',
        fallbackDecisions,
        '0',
        fallbackDecisions === 0,
      ),
      check('worst 1 s over the seed trace', f.worst_1s, `<= ${BOUND}`, f.worst_1s <= BOUND),
      check('admitted / exact sliding-window bound', f.vs_window_bound, '>= 0.95', f.vs_window_bound >= 0.95),
    ];
    return {
      drill: `churn (${started} fresh peer ids through a ${trace.nodes}-node mesh, ${concurrent} at a time, ${lifeMs} ms each; then the seed trace)`,
      g_ms: g,
      d_ms: d,
      admitted: f.admitted,
      worst_1s: f.worst_1s,
      worst_100ms: f.worst_100ms,
      checks,
      details: {
        churn_ms: churnMs,
        settle_ms: settleMs,
        churn_nodes_failed: failed,
        churn_admitted: spent,
        members,
        fallback_decisions: fallbackDecisions,
        dropped: r.map((x) => x.engine.dropped),
        vs_window_bound: f.vs_window_bound,
      },
    };
  } finally {
    await mesh.close();
  }
}

interface Reply {
  status: number;
  body: string;
}

function post(agent: Agent, port: number, path: string, body: string, timeoutMs = 30_000): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const q = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        agent,
        timeout: timeoutMs,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    q.on('timeout', () => q.destroy(new Error('timeout')));
    q.on('error', reject);
    q.end(body);
  });
}

function rssKb(pid: number): { rss: number; hwm: number } {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const n = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? Number.NaN);
    return { rss: n('VmRSS'), hwm: n('VmHWM') };
  } catch {
    return { rss: Number.NaN, hwm: Number.NaN };
  }
}

/**
 * The RSS bound the flood drill holds the daemon to: its RSS at start plus 8 KiB for each of the
 * engine's `maxKeys` (100,000 by default; README, "Memory is bounded"): a key's window at k = 50-60
 * is about 3 KB, and V8 keeps the heap it grew to between collections.
 */
export const FLOOD_RSS_PER_KEY_KB = 8;
const MAX_KEYS = 100_000;

/** 1,000,000 distinct keys at one daemon while a hot key and a 5-per-minute key take steady traffic. */
export async function keyFloodDrill(opts: { keys?: number; steadyS?: number } = {}): Promise<DrillResult> {
  const floodKeys = opts.keys ?? 1_000_000;
  const dir = mkdtempSync(join(tmpdir(), 'ratemesh-flood-'));
  const port = (await freePorts(1))[0]!;
  const cfgFile = join(dir, 'node.yaml');
  writeFileSync(
    cfgFile,
    [
      `http: { host: 127.0.0.1, port: ${port} }`,
      'log: { level: warn }',
      'policies:',
      `  - { name: hot, limit: ${L}, windowMs: 1000, buckets: 50 }`,
      '  - { name: login, limit: 5, windowMs: 60000, buckets: 60 }',
      '',
    ].join('\n'),
  );
  const proc: ChildProcess = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'ratemesh.js'), 'node', '--config', cfgFile],
    {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, RATEMESH_FROM_SOURCE: '1', NODE_OPTIONS: '' },
    },
  );
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  const stopAll = async () => {
    agent.destroy();
    if (proc.exitCode === null) {
      proc.kill('SIGTERM');
      await within('daemon exit', 10_000, new Promise((r) => proc.once('exit', r))).catch(() =>
        proc.kill('SIGKILL'),
      );
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Up: /healthz answers (bounded).
    const upBy = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > upBy || proc.exitCode !== null) throw new Error('daemon did not come up');
      await sleep(200);
    }
    const pid = proc.pid ?? 0;
    const rss0 = rssKb(pid);
    const hot: number[] = [];
    const login: number[] = [];
    const t0 = Date.now();
    let floodSent = 0;
    let floodAnswered = 0;
    let errors = 0;
    let peakRss = rss0.rss;
    let floodDone = false;
    // The flood: 1,000 distinct keys per batch, two batches in flight, keys spread over both
    // policies (the attacked ones), each key used once.
    const flood = async (lane: number) => {
      for (let b = lane; b * 1000 < floodKeys; b += 2) {
        const items: string[] = [];
        for (let j = 0; j < 1000 && b * 1000 + j < floodKeys; j++) {
          const k = b * 1000 + j;
          items.push(`{"policy":"${k % 2 === 0 ? 'hot' : 'login'}","key":"flood:${k}"}`);
        }
        floodSent += items.length;
        const r = await post(agent, port, '/v1/check/batch', `{"requests":[${items.join(',')}]}`).catch(
          () => undefined,
        );
        if (r?.status === 200) floodAnswered += items.length;
        else errors++;
      }
    };
    // Steady: the hot key at 2,000 checks/s and the login key at 2/s, sent every 10 ms as what is
    // due by then (so a daemon slowed by the flood still gets the whole offered rate).
    let hotSent = 0;
    let loginSent = 0;
    const steady = async () => {
      const endBy = Date.now() + 600_000;
      let floodEnd = Number.POSITIVE_INFINITY;
      while (Date.now() < endBy) {
        if (floodDone && floodEnd === Number.POSITIVE_INFINITY) floodEnd = Date.now();
        if (Date.now() > floodEnd + (opts.steadyS ?? 5) * 1000) break;
        const el = Date.now() - t0;
        const hotDue = Math.min(990, Math.floor(el * 2) - hotSent);
        const loginDue = Math.floor(el / 500) + 1 - loginSent;
        hotSent += hotDue;
        loginSent += loginDue;
        const items: string[] = [
          ...new Array(Math.max(0, hotDue)).fill('{"policy":"hot","key":"ip:hot"}'),
          ...new Array(Math.max(0, loginDue)).fill('{"policy":"login","key":"acct:victim"}'),
        ];
        if (items.length === 0) {
          await sleep(10);
          continue;
        }
        const r = await post(agent, port, '/v1/check/batch', `{"requests":[${items.join(',')}]}`).catch(
          () => undefined,
        );
        if (r?.status === 200) {
          const ds = (
            JSON.parse(r.body) as { decisions: { allowed: boolean; policy: string; decidedAt: number }[] }
          ).decisions;
          for (const x of ds) if (x.allowed) (x.policy === 'hot' ? hot : login).push(x.decidedAt - t0);
        } else errors++;
        const rss = rssKb(pid).rss;
        if (rss > peakRss) peakRss = rss;
        await sleep(10);
      }
    };
    const steadyRun = steady();
    await Promise.all([flood(0), flood(1)]);
    const floodMs = Date.now() - t0;
    floodDone = true;
    await steadyRun;
    const end = rssKb(pid);
    const stats = (await fetch(`http://127.0.0.1:${port}/v1/stats`).then((r) => r.json())) as {
      mesh: { engine: { keys: number } };
    };
    hot.sort((a, b) => a - b);
    login.sort((a, b) => a - b);
    const worstHot = worstRolling(hot, 1000);
    const worstLogin = worstRolling(login, 60_000);
    const peakMb = Math.round(Math.max(peakRss, end.hwm) / 1024);
    const boundMb = Math.round((rss0.rss + MAX_KEYS * FLOOD_RSS_PER_KEY_KB) / 1024);
    const checks = [
      check('distinct keys answered', floodAnswered, `= ${floodKeys}`, floodAnswered === floodKeys),
      check('hot key (L = 1,000/s): worst rolling 1 s', worstHot, `<= ${BOUND}`, worstHot <= BOUND),
      check('5-per-minute key: worst rolling 60 s', worstLogin, '<= 5', worstLogin <= 5),
      check(
        'daemon peak RSS, MB',
        peakMb,
        `<= ${boundMb} (start ${Math.round(rss0.rss / 1024)} + maxKeys x ${FLOOD_RSS_PER_KEY_KB} KiB)`,
        peakMb <= boundMb,
      ),
      check('requests that got no answer', errors, '0', errors === 0),
    ];
    return {
      drill: `key flood (${floodKeys.toLocaleString('en')} distinct keys at one daemon, hot + 5-per-minute keys steady)`,
      g_ms: 0,
      d_ms: 0,
      admitted: hot.length + login.length,
      worst_1s: worstHot,
      worst_100ms: Number.NaN,
      checks,
      details: {
        flood_ms: floodMs,
        flood_keys_per_s: Math.round(floodKeys / (floodMs / 1000)),
        flood_sent: floodSent,
        hot_offered: hotSent,
        hot_admitted: hot.length,
        login_offered: loginSent,
        login_admitted: login.length,
        login_admitted_at_s: login.map((t) => Math.round(t / 100) / 10),
        keys_tracked_after: stats.mesh.engine.keys,
        rss_mb: { start: Math.round(rss0.rss / 1024), peak: peakMb, end: Math.round(end.rss / 1024) },
      },
    };
  } finally {
    await stopAll();
  }
}
