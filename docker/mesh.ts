/**
 * The Docker mesh, end to end, from the host:
 *
 *   npm run docker:mesh -- [--nodes 8] [--delay-ms D] [--gossip-ms G] [--seconds 10]
 *                          [--drills kill,partition|none] [--skip-build] [--out file.json]
 *
 * 1. prepare  docker/prepare.sh (engine, compose, local base image when no registry)
 * 2. build    npm run build + docker/stage-app.mjs on the host, then `compose build` from a
 *             slim staged context (docker/tmp/ctx: Dockerfile, config, the staged app)
 * 3. up       `compose up -d --scale node=N` (project ratemesh-mesh), waits until every
 *             replica's GET /v1/peers shows N-1 live peers (bootstrap: dns:node:4001)
 * 4. replay   the seed trace (request i at i × 0.5 ms to its trace node's replica,
 *             node mod N) against the replicas' POST /v1/check over keep-alive agents;
 *             prints the simulator's row figures for the live run beside the simulator's
 *             prediction (bench/accuracy.ts gossipRow), per-replica figures and send lag
 * 5. drills   kill:      `docker kill` replica 1 (the 40 % node) at 20 % of the trace,
 *                        `docker start` it 1 s later; it rejoins through sync and serves
 *                        again once its /healthz passes (requests due while down are skipped)
 *             partition: `docker network disconnect` replica 1 for 3 s, then
 *                        `docker network connect --alias node`; its traffic reaches it
 *                        through a relay in its network namespace (nsenter), so its
 *                        decisions show the L/N fallback and the return to global
 *             each asserts worst rolling 1 s <= 1,020 (L + 2 %) and reports the times to
 *             fall back and to recover
 * 6. results  docker/results/docker-accuracy.json: rows of bench/accuracy.ts's shape
 *             (AccuracyRow) plus extras; total time and image size
 *
 * Everything started is removed at the end, on failure and on Ctrl-C (compose down).
 * Traffic goes only to this project's containers (and a unix socket on the host).
 * Every wait and loop is bounded. Exit code 0 only when every assertion held.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, type IncomingMessage, request } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type AccuracyRow, gossipRow } from '../bench/accuracy.js';
import { printTable } from '../bench/table.js';
import { gcraBound } from '../src/sim/baselines.js';
import { round, rowFigures, slidingLogAdmits, worstRolling } from '../src/sim/metrics.js';
import { type Cut, replayTrace } from '../src/sim/simulator.js';
import { seedTrace, type Trace } from '../src/sim/trace.js';
import type { PolicySpec } from '../src/types.js';
import { cpuBreakdown, describeCpu, sampleCpu } from './lib/cpu.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const TMP = join(HERE, 'tmp');
const PROJECT = 'ratemesh-mesh';
const IMAGE = process.env.RATEMESH_IMAGE ?? 'ratemesh:local';
const HTTP_PORT = 8080;
const T0 = performance.now();

// ---------------------------------------------------------------- arguments

const { values: argv } = parseArgs({
  options: {
    nodes: { type: 'string', default: '8' },
    'delay-ms': { type: 'string', default: '0' },
    'gossip-ms': { type: 'string', default: '100' },
    seconds: { type: 'string', default: '10' },
    'batch-ms': { type: 'string', default: '10' },
    'warmup-s': { type: 'string', default: '3' },
    drills: { type: 'string', default: 'kill,partition' },
    'skip-build': { type: 'boolean', default: false },
    'skip-prepare': { type: 'boolean', default: false },
    scale: { type: 'string', default: '1' },
    ci: { type: 'boolean', default: false },
    out: { type: 'string', default: join(HERE, 'results', 'docker-accuracy.json') },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (argv.help) {
  console.log(
    'npm run docker:mesh -- [--nodes 8] [--delay-ms 0] [--gossip-ms 100] [--seconds 10] [--batch-ms 10]\n' +
      '                       [--drills kill,partition|none] [--skip-build] [--skip-prepare] [--out file]\n' +
      '--batch-ms B: every B ms the requests due for a replica go as one POST /v1/check/batch (0: one\n' +
      '              POST /v1/check each); each is still decided, and timed, on its own\n' +
      '--warmup-s S: first S s of the same traffic on another key, not measured (0: none)\n' +
      '--scale S:    the trace at S x 2,000 req/s against L = S x 1,000 (0 < S <= 1; default 1)\n' +
      '--ci:         behaviour profile for CI: bounds with a wide margin (worst 1 s <= L + 10 %),\n' +
      '              15 s reply timeout, every request decided, mesh formed within 120 s',
  );
  process.exit(0);
}
function intArg(name: string, text: string, lo: number, hi: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < lo || n > hi) {
    console.error(`--${name} must be an integer in [${lo}, ${hi}] (got ${text})`);
    process.exit(2);
  }
  return n;
}
const N = intArg('nodes', argv.nodes, 2, 16);
const D = intArg('delay-ms', argv['delay-ms'], 0, 1000);
const G = intArg('gossip-ms', argv['gossip-ms'], 1, 1000);
const SECONDS = intArg('seconds', argv.seconds, 2, 60);
const BATCH_MS = intArg('batch-ms', argv['batch-ms'], 0, 50);
const WARMUP_S = intArg('warmup-s', argv['warmup-s'], 0, 30);
const DRILLS = new Set(argv.drills === 'none' ? [] : argv.drills.split(',').map((s) => s.trim()));
for (const d of DRILLS) {
  if (d !== 'kill' && d !== 'partition') {
    console.error(`--drills: unknown drill ${d} (kill, partition or none)`);
    process.exit(2);
  }
}
const OUT = resolve(argv.out);
const SCALE = Number(argv.scale);
if (!(SCALE > 0 && SCALE <= 1)) {
  console.error(`--scale must be a number in (0, 1] (got ${argv.scale})`);
  process.exit(2);
}
/** --ci: the behaviour profile CI runs (wide bounds, generous timeouts); see the file comment. */
const CI = argv.ci;
const W = 1000;
/** The limit scales with the trace's rate, so the trace is always twice the limit. */
const L = Math.round(1000 * SCALE);
const SEED: PolicySpec = { name: 'seed', limit: L, windowMs: W, buckets: 50 };
/** Worst-1 s bound: L + 2 % for the benchmark; L + 10 % in CI (its shape meets L + 1 %). */
const BOUND = Math.round(L * (CI ? 1.1 : 1.02));
/** A check's reply timeout: 2 s in the benchmark; in CI a slow machine still gets its decision. */
const CHECK_TIMEOUT_MS = CI ? 15_000 : 2000;
/** Batches in flight per replica: more requests due wait for the next batch (backpressure). */
const MAX_BATCHES_IN_FLIGHT = 2;
/** The daemon's batch limit (POST /v1/check/batch takes up to 1,000 checks). */
const MAX_BATCH = 1000;

// ---------------------------------------------------------------- small helpers

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const secs = (ms: number) => round(ms / 1000, 2);
const elapsed = () => performance.now() - T0;
const log = (m: string) => console.log(`[docker:mesh ${secs(elapsed()).toFixed(1).padStart(6)} s] ${m}`);

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

/** Children this script started and has not seen exit (killed by pid on the way out). */
const children = new Set<ChildProcess>();

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command, bounded by `timeoutMs` (then SIGKILL); `inherit` streams its output. */
function run(
  cmd: string,
  args: string[],
  opts: { timeoutMs: number; cwd?: string; env?: NodeJS.ProcessEnv; inherit?: boolean; check?: boolean },
): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? ROOT,
      env: opts.env ?? process.env,
      stdio: opts.inherit ? ['ignore', 'inherit', 'inherit'] : ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      if (stdout.length < 1e6) stdout += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      if (stderr.length < 1e6) stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      children.delete(child);
      reject(new Error(`${cmd}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      const r = { code: code ?? (signal ? 128 : 1), stdout, stderr };
      if (opts.check !== false && r.code !== 0) {
        const tail = `${stdout}\n${stderr}`.trim().split('\n').slice(-15).join('\n');
        reject(
          new Error(
            `${cmd} ${args.join(' ')} exited ${signal ?? r.code}${signal === 'SIGKILL' ? ` (timeout ${opts.timeoutMs} ms?)` : ''}\n${tail}`,
          ),
        );
      } else resolvePromise(r);
    });
  });
}

const docker = (args: string[], timeoutMs = 30_000, check = true) =>
  run('docker', args, { timeoutMs, check });

let composeCmd: string[] = [];
async function detectCompose(): Promise<void> {
  const v2 = await run('docker', ['compose', 'version'], { timeoutMs: 10_000, check: false }).catch(
    () => undefined,
  );
  composeCmd = v2?.code === 0 ? ['docker', 'compose'] : ['docker-compose'];
}

const composeEnv: NodeJS.ProcessEnv = {
  ...process.env,
  RATEMESH_IMAGE: IMAGE,
  RATEMESH_GOSSIP_MS: String(G),
  RATEMESH_INJECT_DELAY_MS: String(D),
  RATEMESH_NODE_CONFIG: './tmp/mesh-node.yaml',
  RATEMESH_BUILD_CONTEXT: './tmp/ctx',
  RATEMESH_LOG_LEVEL: 'warn',
};

function compose(args: string[], timeoutMs: number, inherit = false, check = true): Promise<RunResult> {
  const [cmd, ...pre] = composeCmd;
  return run(cmd!, [...pre, '-p', PROJECT, '-f', 'compose.yml', ...args], {
    cwd: HERE,
    env: composeEnv,
    timeoutMs,
    inherit,
    check,
  });
}

// ---------------------------------------------------------------- HTTP to the replicas

/** Where a replica's HTTP API is reached: its address on the compose network, or a relay socket. */
type Target = { host: string; port: number } | { socketPath: string };

interface HttpReply {
  status: number;
  body: string;
}

function httpCall(
  target: Target,
  method: 'GET' | 'POST',
  path: string,
  agent: Agent,
  timeoutMs: number,
  body?: Buffer,
  onSocket?: () => void,
): Promise<HttpReply> {
  return new Promise((resolvePromise, reject) => {
    const headers: Record<string, string | number> = {};
    if (body) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = body.length;
    }
    const q = request(
      { ...target, method, path, agent, timeout: timeoutMs, headers },
      (res: IncomingMessage) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          if (text.length < 1 << 20) text += c;
        });
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    q.on('timeout', () => q.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    q.on('error', reject);
    // The request leaves when the agent hands it a socket (it may queue for one first).
    if (onSocket) q.once('socket', onSocket);
    q.end(body);
  });
}

const ctlAgent = new Agent({ keepAlive: true, maxSockets: 4 });

async function getJson<T>(target: Target, path: string, timeoutMs = 2000): Promise<T | undefined> {
  try {
    const r = await httpCall(target, 'GET', path, ctlAgent, timeoutMs);
    if (r.status !== 200 && r.status !== 503) return undefined;
    return JSON.parse(r.body) as T;
  } catch {
    return undefined;
  }
}

interface PeersBody {
  peerId: string;
  live: number;
  stale: number;
  fallback: boolean;
  peers: { id: string; stale: boolean; ageMs: number }[];
}

interface StatsBody {
  mesh: {
    gossip: { ticks: number; msgsOut: number; bytesOut: number; msgsIn: number };
    sync: { pulls: number; pullsOk: number; pullsFailed: number; bytesIn: number };
    peers: { connected: number; members: number; departed: number };
  };
}

/**
 * The series of /metrics this script reads (Prometheus text format): gossip counters, and the
 * process figures that tell why a reply waited (CPU seconds, event-loop delay since the last
 * scrape from perf_hooks.monitorEventLoopDelay via prom-client, GC time).
 */
async function scrape(target: Target): Promise<Record<string, number> | undefined> {
  try {
    const r = await httpCall(target, 'GET', '/metrics', ctlAgent, 3000);
    if (r.status !== 200) return undefined;
    const out: Record<string, number> = {};
    for (const line of r.body.split('\n')) {
      const m =
        /^(ratemesh_gossip_messages_total|ratemesh_gossip_bytes_total)\{direction="(in|out)"\} ([0-9.e+-]+)$/.exec(
          line,
        );
      if (m) {
        out[`${m[1]}:${m[2]}`] = Number(m[3]);
        continue;
      }
      const p =
        /^(process_cpu_seconds_total|nodejs_eventloop_lag_max_seconds|nodejs_eventloop_lag_p99_seconds|nodejs_gc_duration_seconds_sum|nodejs_gc_duration_seconds_count)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(
          line,
        );
      if (p) out[p[1]!] = (out[p[1]!] ?? 0) + Number(p[3]);
    }
    return out;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- replicas

interface Replica {
  /** 0-based trace node index (compose container number - 1). */
  index: number;
  id: string;
  /** Full container id (its cgroup's name). */
  fullId: string;
  name: string;
  network: string;
  ip: string;
  pid: number;
  target: Target;
}

async function inspectReplica(id: string): Promise<Replica> {
  const r = await docker([
    'inspect',
    '-f',
    '{{index .Config.Labels "com.docker.compose.container-number"}} {{.Id}} {{.Name}} {{.State.Pid}} {{range $k, $v := .NetworkSettings.Networks}}{{$k}}={{$v.IPAddress}} {{end}}',
    id,
  ]);
  const [num, fullId, name, pid, ...nets] = r.stdout.trim().split(/\s+/);
  const [network = '', ip = ''] = (nets[0] ?? '').split('=');
  return {
    index: Number(num) - 1,
    id,
    fullId: fullId ?? '',
    name: (name ?? '').replace(/^\//, ''),
    network,
    ip,
    pid: Number(pid),
    target: { host: ip, port: HTTP_PORT },
  };
}

async function listReplicas(): Promise<Replica[]> {
  const r = await docker([
    'ps',
    '-q',
    '--filter',
    `label=com.docker.compose.project=${PROJECT}`,
    '--filter',
    'label=com.docker.compose.service=node',
  ]);
  const ids = r.stdout.split('\n').filter(Boolean);
  const reps = await Promise.all(ids.map(inspectReplica));
  return reps.sort((a, b) => a.index - b.index);
}

/**
 * Polls every replica's /v1/peers until each has reported N-1 live peers at least once and
 * one round shows all of them at N-1 live together; bounded by `timeoutMs`.
 */
async function waitForMesh(
  reps: Replica[],
  timeoutMs: number,
  since: number,
): Promise<{
  ok: boolean;
  firstFullMs: number[];
  allTogetherMs: number;
  lastLive: number[];
  answered: boolean[];
}> {
  const want = reps.length - 1;
  const firstFull = reps.map(() => Number.NaN);
  const lastLive = reps.map(() => -1);
  const answered = reps.map(() => false);
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const bodies = await Promise.all(reps.map((r) => getJson<PeersBody>(r.target, '/v1/peers', 1500)));
    const now = performance.now() - since;
    let together = true;
    bodies.forEach((b, i) => {
      lastLive[i] = b?.live ?? -1;
      if (b) answered[i] = true;
      if (b?.live === want) {
        if (Number.isNaN(firstFull[i]!)) firstFull[i] = now;
      } else together = false;
    });
    if (together && firstFull.every((x) => !Number.isNaN(x))) {
      return { ok: true, firstFullMs: firstFull, allTogetherMs: now, lastLive, answered };
    }
    await sleep(200);
  }
  return { ok: false, firstFullMs: firstFull, allTogetherMs: Number.NaN, lastLive, answered };
}

// ---------------------------------------------------------------- relay (partition drill)

interface Relay {
  socketPath: string;
  child: ChildProcess;
}

/**
 * A TCP relay from a unix socket on the host to 127.0.0.1:8080 inside the replica's network
 * namespace (nsenter -n; the mount namespace stays the host's, so the socket is a host file).
 * It keeps working while the replica is disconnected from the compose network.
 */
async function startRelay(rep: Replica): Promise<Relay> {
  const socketPath = join(tmpdir(), `ratemesh-relay-${process.pid}-${rep.index}.sock`);
  rmSync(socketPath, { force: true });
  const script = `
    const net = require('node:net');
    const srv = net.createServer((c) => {
      const u = net.connect(${HTTP_PORT}, '127.0.0.1');
      c.on('error', () => u.destroy()); u.on('error', () => c.destroy());
      c.pipe(u).pipe(c);
    });
    srv.listen(process.argv[1], () => console.log('relay ready'));
    process.stdin.on('end', () => process.exit(0)); process.stdin.resume();`;
  const child = spawn('nsenter', ['-t', String(rep.pid), '-n', process.execPath, '-e', script, socketPath], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let err = '';
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const ready = await new Promise<boolean>((res) => {
    const t = setTimeout(() => res(false), 10_000);
    child.stdout?.on('data', (c: Buffer) => {
      if (c.toString().includes('relay ready')) {
        clearTimeout(t);
        res(true);
      }
    });
    child.on('exit', () => {
      clearTimeout(t);
      res(false);
    });
  });
  if (!ready) {
    child.kill('SIGKILL');
    throw new Error(`relay into ${rep.name} did not start: ${err.trim().slice(0, 300)}`);
  }
  return { socketPath, child };
}

function stopRelay(r: Relay | undefined): void {
  if (!r) return;
  r.child.stdin?.end();
  r.child.kill('SIGTERM');
  rmSync(r.socketPath, { force: true });
}

// ---------------------------------------------------------------- the live replay

const CODE_ADMITTED = 1;
const CODE_DENIED = 2;
const CODE_ERROR = 3;
const CODE_SKIPPED = 4;
const MODES = ['global', 'fallback', 'local'] as const;

interface Replay {
  /**
   * Per request, ms since the replay start: scheduled time, send time (the agent gave it a
   * socket), reply time, and the replica's decision time when its reply carries `decidedAt`.
   */
  sched: Float64Array;
  sent: Float64Array;
  replied: Float64Array;
  decided: Float64Array;
  node: Uint8Array;
  code: Uint8Array;
  /** 0 global, 1 fallback, 2 local, 255 unknown. */
  mode: Uint8Array;
  startedAt: number;
  durationMs: number;
  maxQueued: number;
}

interface ReplayHooks {
  /** Where request i of trace node `node` goes now; undefined = skipped (replica down). */
  route: (node: number) => Target | undefined;
  /** Events at trace times (ms), run without blocking the sender; given the replay's start (performance.now()). */
  events?: { atMs: number; run: (replayStart: number) => Promise<void> }[];
  /** Set by replay: fails every request in flight to `t` at once (its replica was killed). */
  abort?: (t: Target) => void;
}

/** The fields of a check decision (POST /v1/check, or one entry of a batch) the replay reads. */
interface DecisionReply {
  allowed?: boolean;
  mode?: string;
  decidedAt?: number;
  status?: number;
}

function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

function targetKey(t: Target): string {
  return 'socketPath' in t ? t.socketPath : `${t.host}:${t.port}`;
}

/**
 * Sends request i at its trace time to its node's replica; records decisions. With
 * --batch-ms B > 0 the requests due for a replica go together every B ms as one
 * POST /v1/check/batch (each still decided on its own, its decidedAt its own time).
 */
async function replay(trace: Trace, key: string, hooks: ReplayHooks): Promise<Replay> {
  const n = trace.t.length;
  const out: Replay = {
    sched: trace.t,
    sent: new Float64Array(n).fill(Number.NaN),
    replied: new Float64Array(n).fill(Number.NaN),
    decided: new Float64Array(n).fill(Number.NaN),
    node: trace.node,
    code: new Uint8Array(n),
    mode: new Uint8Array(n).fill(255),
    startedAt: 0,
    durationMs: 0,
    maxQueued: 0,
  };
  const item = JSON.stringify({ policy: SEED.name, key, cost: 1 });
  const body = Buffer.from(item);
  const agents = new Map<string, Agent>();
  const agentFor = (t: Target) => {
    const k = targetKey(t);
    let a = agents.get(k);
    if (!a) {
      a = new Agent({ keepAlive: true, maxSockets: 256, keepAliveMsecs: 1000 });
      agents.set(k, a);
    }
    return a;
  };
  hooks.abort = (t) => {
    const k = targetKey(t);
    agents.get(k)?.destroy();
    agents.delete(k);
  };
  // Warm the connections so the first requests do not pay for TCP set-up.
  await Promise.all(
    Array.from({ length: trace.nodes }, (_, node) => {
      const t = hooks.route(node);
      return t ? httpCall(t, 'GET', '/healthz', agentFor(t), 2000).catch(() => undefined) : undefined;
    }),
  );
  let pending = 0;
  let done = 0;
  let i = 0;
  const start = performance.now();
  const epochStart = Date.now() - (performance.now() - start);
  /** Request idx's outcome from its decision as the replica answered it (undefined: no decision). */
  const record = (idx: number, d: DecisionReply | null | undefined) => {
    if (typeof d !== 'object' || d === null) {
      out.code[idx] = CODE_ERROR;
      return;
    }
    out.code[idx] = d.allowed === true ? CODE_ADMITTED : CODE_DENIED;
    if (typeof d.decidedAt === 'number') out.decided[idx] = d.decidedAt - epochStart;
    const m = MODES.indexOf(d.mode as (typeof MODES)[number]);
    if (m >= 0) out.mode[idx] = m;
  };
  out.startedAt = start;
  const events = [...(hooks.events ?? [])].sort((a, b) => a.atMs - b.atMs);
  const eventRuns: Promise<void>[] = [];
  const lastT = n > 0 ? trace.t[n - 1]! : 0;
  const hardStop = lastT + 30_000;
  /**
   * Requests due per replica, sent as one batch every BATCH_MS, at most MAX_BATCHES_IN_FLIGHT
   * batches in flight per replica: a replica that falls behind gets larger batches, not more
   * connections (opening ever more sockets to a starved replica made it slower still).
   */
  const queued = new Map<string, { target: Target; idxs: number[]; inFlight: number }>();
  await new Promise<void>((finish) => {
    const maybeFinish = () => {
      if (i >= n && done >= n) finish();
    };
    const flush = (q: { target: Target; idxs: number[]; inFlight: number }) => {
      while (q.idxs.length > 0 && q.inFlight < MAX_BATCHES_IN_FLIGHT) {
        const idxs = q.idxs.splice(0, MAX_BATCH);
        q.inFlight++;
        const sentAt = performance.now() - start;
        for (const idx of idxs) out.sent[idx] = sentAt;
        pending += idxs.length;
        out.maxQueued = Math.max(out.maxQueued, pending);
        const onSocket = () => {
          const t = performance.now() - start;
          for (const idx of idxs) out.sent[idx] = t;
        };
        const settle = () => {
          pending -= idxs.length;
          done += idxs.length;
          q.inFlight--;
          flush(q);
          maybeFinish();
        };
        const batchBody = Buffer.from(`{"requests":[${new Array(idxs.length).fill(item).join(',')}]}`);
        httpCall(
          q.target,
          'POST',
          '/v1/check/batch',
          agentFor(q.target),
          CHECK_TIMEOUT_MS,
          batchBody,
          onSocket,
        ).then(
          (r) => {
            const at = performance.now() - start;
            const ds =
              (r.status === 200
                ? parseJson<{ decisions?: DecisionReply[] }>(r.body)?.decisions
                : undefined) ?? [];
            idxs.forEach((idx, j) => {
              out.replied[idx] = at;
              const d = ds[j];
              record(idx, d?.status === 200 || d?.status === 429 ? d : undefined);
            });
            settle();
          },
          () => {
            const at = performance.now() - start;
            for (const idx of idxs) {
              out.replied[idx] = at;
              out.code[idx] = CODE_ERROR;
            }
            settle();
          },
        );
      }
    };
    const pump = () => {
      const now = performance.now() - start;
      while (events.length > 0 && events[0]!.atMs <= now) {
        const ev = events.shift()!;
        eventRuns.push(ev.run(start));
      }
      while (i < n && trace.t[i]! <= now) {
        const idx = i++;
        const target = hooks.route(trace.node[idx]!);
        if (!target) {
          out.code[idx] = CODE_SKIPPED;
          done++;
          continue;
        }
        if (BATCH_MS > 0) {
          const k = targetKey(target);
          let q = queued.get(k);
          if (!q) {
            q = { target, idxs: [], inFlight: 0 };
            queued.set(k, q);
          }
          q.idxs.push(idx);
          continue;
        }
        out.sent[idx] = performance.now() - start;
        pending++;
        out.maxQueued = Math.max(out.maxQueued, pending);
        const onSocket = () => {
          out.sent[idx] = performance.now() - start;
        };
        httpCall(target, 'POST', '/v1/check', agentFor(target), CHECK_TIMEOUT_MS, body, onSocket).then(
          (r) => {
            out.replied[idx] = performance.now() - start;
            record(idx, r.status === 200 || r.status === 429 ? parseJson<DecisionReply>(r.body) : undefined);
            pending--;
            done++;
            maybeFinish();
          },
          () => {
            out.replied[idx] = performance.now() - start;
            out.code[idx] = CODE_ERROR;
            pending--;
            done++;
            maybeFinish();
          },
        );
      }
      for (const q of queued.values()) flush(q);
      if (i < n || events.length > 0) {
        if (now > hardStop) {
          finish();
          return;
        }
        setTimeout(pump, BATCH_MS > 0 ? BATCH_MS : 1);
      } else if ([...queued.values()].some((q) => q.idxs.length > 0)) {
        // everything is due; what waits behind a replica's batches in flight leaves as they return
        if (now <= hardStop) setTimeout(pump, BATCH_MS);
        else finish();
      } else maybeFinish();
    };
    pump();
  });
  out.durationMs = performance.now() - start;
  await Promise.allSettled(eventRuns);
  for (const a of agents.values()) a.destroy();
  return out;
}

/**
 * When each request was decided, as well as the host can tell: the replica's own decision
 * time when its reply carries `decidedAt` (epoch ms; same kernel clock as the host), else the
 * send time (the arrival at the replica, give or take the network and its queue).
 */
function decisionTime(r: Replay, i: number): number {
  const d = r.decided[i]!;
  return Number.isNaN(d) ? r.sent[i]! : d;
}

/** True when every reply carried the replica's decision time. */
function hasDecisionTimes(r: Replay): boolean {
  for (let i = 0; i < r.code.length; i++)
    if (r.code[i] === CODE_ADMITTED && Number.isNaN(r.decided[i]!)) return false;
  return true;
}

/** Admitted times (ms since the replay start), ascending, by `at` (default: decision time). */
function admittedTimes(r: Replay, at: (i: number) => number = (i) => decisionTime(r, i)): number[] {
  const xs: number[] = [];
  for (let i = 0; i < r.code.length; i++) if (r.code[i] === CODE_ADMITTED) xs.push(at(i));
  return xs.sort((a, b) => a - b);
}

/** worst rolling 1 s by scheduled, send and reply time: how much the choice of clock matters. */
function worstBy(r: Replay) {
  return {
    scheduled: worstRolling(
      admittedTimes(r, (i) => r.sched[i]!),
      1000,
    ),
    sent: worstRolling(
      admittedTimes(r, (i) => r.sent[i]!),
      1000,
    ),
    replied: worstRolling(
      admittedTimes(r, (i) => r.replied[i]!),
      1000,
    ),
  };
}

function lagStats(r: Replay) {
  const lag: number[] = [];
  const lat: number[] = [];
  for (let i = 0; i < r.code.length; i++) {
    if (Number.isNaN(r.sent[i]!)) continue;
    lag.push(r.sent[i]! - r.sched[i]!);
    if (!Number.isNaN(r.replied[i]!)) lat.push(r.replied[i]! - r.sent[i]!);
  }
  return {
    send_lag_ms: {
      p50: round(quantile(lag, 0.5), 2),
      p99: round(quantile(lag, 0.99), 2),
      max: round(Math.max(0, ...lag), 2),
    },
    latency_ms: {
      p50: round(quantile(lat, 0.5), 2),
      p99: round(quantile(lat, 0.99), 2),
      max: round(Math.max(0, ...lat), 2),
    },
    max_in_flight: r.maxQueued,
  };
}

/**
 * Why the figures may not be what they seem: requests not sent on time, replies (so decisions)
 * far behind the sends, or replicas not ticking at their gossip interval (CPU-starved).
 */
function overloaded(
  lag: ReturnType<typeof lagStats>,
  sustainedPct?: number,
  hostBusyPct?: number,
): string | undefined {
  const why: string[] = [];
  if (hostBusyPct !== undefined && hostBusyPct > 90) why.push(`host CPU ${hostBusyPct} % busy (> 90)`);
  if (lag.send_lag_ms.p99 > 20) why.push(`send lag p99 ${lag.send_lag_ms.p99} ms (> 20)`);
  if (lag.latency_ms.p99 > 50)
    why.push(`reply latency p99 ${lag.latency_ms.p99} ms (> 50: decisions happen well after the send times)`);
  if (sustainedPct !== undefined && sustainedPct < 80)
    why.push(`gossip ticks at ${sustainedPct} % of 1000/g (CPU-starved replicas)`);
  if (why.length === 0) return undefined;
  return `${why.join('; ')}; host load ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores`;
}

function counts(r: Replay, filter?: (i: number) => boolean) {
  const c = { sent: 0, admitted: 0, denied: 0, errors: 0, skipped: 0, global: 0, fallback: 0, local: 0 };
  for (let i = 0; i < r.code.length; i++) {
    if (filter && !filter(i)) continue;
    const k = r.code[i];
    if (k === CODE_SKIPPED) c.skipped++;
    else c.sent++;
    if (k === CODE_ADMITTED) c.admitted++;
    else if (k === CODE_DENIED) c.denied++;
    else if (k === CODE_ERROR) c.errors++;
    const m = r.mode[i]!;
    if (m < MODES.length) c[MODES[m]!]++;
  }
  return c;
}

// ---------------------------------------------------------------- trace, figures, prediction

/** The seed trace, its first `seconds` × 2,000 × SCALE requests, node i mod N, at 2,000 × SCALE per s. */
function dockerTrace(nodes: number, seconds: number): Trace {
  const full = seedTrace(Math.round(seconds * 2000 * SCALE));
  const node = new Uint8Array(full.node.length);
  for (let i = 0; i < node.length; i++) node[i] = full.node[i]! % nodes;
  // --scale S: the same requests spread S times thinner (2,000 x S per s), against L = 1,000 x S
  const t = SCALE === 1 ? full.t : full.t.map((x) => x / SCALE);
  return { t, node, nodes };
}

function figures(trace: Trace, admitted: number[]) {
  return rowFigures(
    admitted,
    gcraBound(trace, 1 / SCALE, Math.round(96 * SCALE)),
    slidingLogAdmits(trace.t, L, W).length,
  );
}

/** The simulator's row for this run: gossipRow itself for the 8-node 10 s trace, else the same replay. */
function predicted(trace: Trace, cut?: Cut): AccuracyRow {
  if (trace.nodes === 8 && trace.t.length === 20_000 && SCALE === 1 && !cut)
    return gossipRow('controlled', G, D);
  const r = replayTrace(
    trace,
    {
      nodes: trace.nodes,
      policies: [{ ...SEED, overAdmission: 'controlled', fallback: true }],
      gossipIntervalMs: G,
      delayMs: D,
      loss: 0,
      cuts: cut ? [cut] : [],
      seed: 7,
    },
    'seed',
  );
  const seconds = (trace.t[trace.t.length - 1]! + 0.5) / 1000;
  return {
    design: 'controlled',
    g_ms: G,
    d_ms: D,
    loss: 0,
    cut: cut ? `node${cut.node} ${cut.fromMs / 1000}-${cut.toMs / 1000}s` : null,
    fallback: cut ? true : null,
    buckets: SEED.buckets ?? null,
    ...figures(trace, r.admitted),
    calls_per_req: 0,
    msgs_per_s_node: round(r.messages / trace.nodes / seconds, 1),
    bytes_per_s_node: Math.round(r.bytes / trace.nodes / seconds),
  };
}

// ---------------------------------------------------------------- state and teardown

let replicas: Replica[] = [];
let relay: Relay | undefined;
let upStarted = false;
let tornDown = false;

async function teardown(why: string): Promise<void> {
  if (tornDown) return;
  tornDown = true;
  stopRelay(relay);
  relay = undefined;
  ctlAgent.destroy();
  for (const c of children) c.kill('SIGKILL');
  if (!upStarted || composeCmd.length === 0) return;
  log(`teardown (${why}): ${composeCmd.join(' ')} -p ${PROJECT} down -v`);
  const r = await compose(['down', '-v', '--remove-orphans', '--timeout', '5'], 90_000, false, false).catch(
    (e: unknown) => ({ code: 1, stdout: '', stderr: String(e) }),
  );
  if (r.code !== 0) console.error(`[docker:mesh] down failed: ${r.stderr.trim().slice(-500)}`);
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n[docker:mesh] ${sig}: tearing down`);
    teardown(sig).finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  });
}

// ---------------------------------------------------------------- printing

function rowCells(label: string, r: AccuracyRow): (string | number)[] {
  return [
    label,
    r.g_ms ?? '-',
    r.d_ms ?? '-',
    r.cut ?? '-',
    r.admitted,
    r.vs_gcra_bound.toFixed(4),
    r.vs_window_bound.toFixed(4),
    r.worst_1s,
    `${(((r.worst_1s - L) / L) * 100).toFixed(1)}%`,
    r.worst_100ms,
    r.msgs_per_s_node,
    r.bytes_per_s_node,
  ];
}
const ROW_HEADER = [
  'run',
  'g ms',
  'd ms',
  'cut',
  'admitted',
  'vs GCRA',
  'vs window',
  'worst 1s',
  'over L',
  'worst 100ms',
  'msgs/s/node',
  'B/s/node',
];

// ---------------------------------------------------------------- drills

interface Check {
  what: string;
  value: number | string;
  bound: string;
  ok: boolean;
}
const check = (what: string, value: number | string, bound: string, ok: boolean): Check => ({
  what,
  value,
  bound,
  ok,
});

interface DrillOutcome {
  name: string;
  row: AccuracyRow & Record<string, unknown>;
  checks: Check[];
}

function liveRow(trace: Trace, r: Replay, msgs: number, bytes: number, cut: string | null): AccuracyRow {
  return {
    design: 'controlled',
    g_ms: G,
    d_ms: D,
    loss: 0,
    cut,
    fallback: cut ? true : null,
    buckets: SEED.buckets ?? null,
    ...figures(trace, admittedTimes(r)),
    calls_per_req: 0,
    msgs_per_s_node: round(msgs, 1),
    bytes_per_s_node: Math.round(bytes),
  };
}

/** Gossip out rates per replica between two /metrics scrapes. */
function rates(
  before: (Record<string, number> | undefined)[],
  after: (Record<string, number> | undefined)[],
  ms: number,
) {
  return before.map((b, i) => {
    const a = after[i];
    if (!a || !b)
      return {
        msgs: Number.NaN,
        bytes: Number.NaN,
        cpuPct: Number.NaN,
        loopP99Ms: Number.NaN,
        loopMaxMs: Number.NaN,
        gcMs: Number.NaN,
        gcs: Number.NaN,
      };
    const d = (k: string) => ((a[k] ?? 0) - (b[k] ?? 0)) / (ms / 1000);
    return {
      msgs: d('ratemesh_gossip_messages_total:out'),
      bytes: d('ratemesh_gossip_bytes_total:out'),
      /** % of one core over the interval. */
      cpuPct: d('process_cpu_seconds_total') * 100,
      /** Event-loop delay over the interval (the histogram is reset at every scrape), ms past due. */
      // prom-client samples with a 10 ms timer: a value is 10 ms plus the delay
      loopP99Ms: (a.nodejs_eventloop_lag_p99_seconds ?? Number.NaN) * 1000 - 10,
      loopMaxMs: (a.nodejs_eventloop_lag_max_seconds ?? Number.NaN) * 1000 - 10,
      /** GC pause time over the interval, ms, and the number of collections. */
      gcMs: ((a.nodejs_gc_duration_seconds_sum ?? 0) - (b.nodejs_gc_duration_seconds_sum ?? 0)) * 1000,
      gcs: (a.nodejs_gc_duration_seconds_count ?? 0) - (b.nodejs_gc_duration_seconds_count ?? 0),
    };
  });
}

const mean = (xs: number[]) => {
  const ok = xs.filter((x) => Number.isFinite(x));
  return ok.length ? ok.reduce((a, b) => a + b, 0) / ok.length : Number.NaN;
};

/** docker kill replica `k` at 20 % of the trace, docker start 1 s later; serve again once /healthz passes. */
async function killDrill(trace: Trace, k: number): Promise<DrillOutcome> {
  const rep = replicas[k]!;
  const others = replicas.filter((r) => r.index !== k);
  const killAt = Math.round(trace.t.length * 0.5 * 0.2);
  const startAt = killAt + 1000;
  const before = await getJson<PeersBody>(rep.target, '/v1/peers');
  const peerId = before?.peerId ?? '';
  let down = false;
  let target: Target = rep.target;
  const marks: Record<string, number> = {};
  let restartedPeerId = '';
  let sync: StatsBody['mesh']['sync'] | undefined;
  let start = 0;
  const since = () => performance.now() - start;
  const watch = async () => {
    // Others see the killed member stale (fall back: its share reserved), then everyone N-1 live.
    const deadline = performance.now() + 60_000;
    while (performance.now() < deadline) {
      const bodies = await Promise.all(others.map((o) => getJson<PeersBody>(o.target, '/v1/peers', 1000)));
      const t = since();
      if (marks.kill_cmd !== undefined && marks.others_see_stale === undefined) {
        const allSee = bodies.every((b) => {
          const p = b?.peers.find((x) => x.id === peerId);
          return b !== undefined && (p === undefined || p.stale);
        });
        if (allSee) marks.others_see_stale = t;
      }
      if (marks.serving !== undefined) {
        const mine = await getJson<PeersBody>(target, '/v1/peers', 1000);
        if (mine?.live === replicas.length - 1 && bodies.every((b) => b?.live === replicas.length - 1)) {
          marks.all_live = since();
          return;
        }
      }
      await sleep(50);
    }
  };
  let watcher: Promise<void> | undefined;
  const hooks: ReplayHooks = {
    route: (node) => (node === k ? (down ? undefined : target) : replicas[node]!.target),
    events: [
      {
        atMs: killAt,
        run: async (t0) => {
          start = t0;
          down = true;
          watcher = watch();
          marks.kill_cmd = since();
          await docker(['kill', rep.id], 30_000);
          marks.killed = since();
          // What was in flight to it is lost with it: fail it now instead of waiting for the timeout.
          hooks.abort?.(target);
          await sleep(Math.max(0, startAt - since()));
          marks.start_cmd = since();
          await docker(['start', rep.id], 60_000);
          marks.started = since();
          const fresh = await inspectReplica(rep.id);
          Object.assign(rep, fresh);
          target = rep.target;
          // Serve again once its /healthz passes (a balancer's health check), bounded.
          const deadline = performance.now() + 60_000;
          while (performance.now() < deadline) {
            const h = await httpCall(target, 'GET', '/healthz', ctlAgent, 1000).catch(() => undefined);
            if (h?.status === 200) break;
            await sleep(50);
          }
          marks.serving = since();
          down = false;
          const p = await getJson<PeersBody>(target, '/v1/peers');
          restartedPeerId = p?.peerId ?? '';
          await watcher;
          sync = (await getJson<StatsBody>(target, '/v1/stats'))?.mesh.sync;
        },
      },
    ],
  };
  const r = await replay(trace, 'drill-kill', hooks);
  await watcher;
  const row = liveRow(trace, r, Number.NaN, Number.NaN, `node${k} killed ${secs(killAt)}-${secs(startAt)}s`);
  const servingT = marks.serving ?? Number.NaN;
  const adm = admittedTimes(r);
  const firstSecond = adm.filter((t) => t >= servingT && t < servingT + 1000).length;
  const after = counts(r, (i) => trace.node[i] === k && decisionTime(r, i) >= servingT);
  const restartedAdmits = after.admitted;
  // CI: "serves again" is behaviour (it decides checks), not speed: on a starved machine the
  // restart can outlast the trace, so a replica with no trace decisions gets one check after it.
  let restartedDecisions = after.admitted + after.denied;
  let servedBy = 'trace requests decided';
  if (CI && restartedDecisions === 0) {
    const res = await httpCall(
      target,
      'POST',
      '/v1/check',
      ctlAgent,
      CHECK_TIMEOUT_MS,
      Buffer.from(JSON.stringify({ policy: SEED.name, key: 'drill-kill-after', cost: 1 })),
    ).catch(() => undefined);
    if (res?.status === 200 || res?.status === 429) restartedDecisions = 1;
    servedBy = 'a check after the trace (the restart outlasted the trace)';
  }
  const c = counts(r);
  const fallbackMs = (marks.others_see_stale ?? Number.NaN) - (marks.kill_cmd ?? Number.NaN);
  // Sent to the killed replica before docker kill returned and never answered: lost with it.
  const killedAt = marks.killed ?? Number.POSITIVE_INFINITY;
  const lostWithKill = counts(r, (i) => trace.node[i] === k && r.sent[i]! < killedAt).errors;
  const otherErrors = c.errors - lostWithKill;
  const errPct = round((c.errors / Math.max(1, c.sent)) * 100, 2);
  const checks = [
    check('worst 1 s over the drill', row.worst_1s, `<= ${BOUND}`, row.worst_1s <= BOUND),
    CI
      ? check(
          `requests that got no decision, besides the ${lostWithKill} in flight to the killed replica`,
          otherErrors,
          '0',
          otherErrors === 0,
        )
      : check(
          'requests that got no decision (errors %, incl. in flight at the kill)',
          errPct,
          '<= 2',
          errPct <= 2,
        ),
    check(
      'admitted in the first second after it serves again',
      firstSecond,
      `<= ${BOUND}`,
      firstSecond <= BOUND,
    ),
    check(
      'restarted replica pulled state through sync',
      sync?.pullsOk ?? 0,
      '>= 1',
      (sync?.pullsOk ?? 0) >= 1,
    ),
    check(
      'restarted replica kept its peer id',
      restartedPeerId === peerId ? 'yes' : 'no',
      'yes',
      restartedPeerId === peerId,
    ),
    CI
      ? check(
          `restarted replica decides again (${servedBy})`,
          restartedDecisions,
          '> 0',
          restartedDecisions > 0,
        )
      : check('restarted replica admitted again', restartedAdmits, '> 0', restartedAdmits > 0),
    check(
      'others marked it stale (ms after docker kill was issued)',
      round(fallbackMs, 0),
      'observed',
      Number.isFinite(fallbackMs),
    ),
    check(
      'mesh back to N-1 live everywhere (ms after docker start)',
      round((marks.all_live ?? Number.NaN) - (marks.start_cmd ?? 0), 0),
      'observed within 60 s',
      marks.all_live !== undefined,
    ),
  ];
  return {
    name: `kill (docker kill ${rep.name} at ${secs(killAt)} s, docker start 1 s later)`,
    row: {
      ...row,
      source: 'docker',
      drill: 'kill',
      replica: rep.name,
      kill_at_ms: killAt,
      docker_kill_returned_ms: round((marks.killed ?? Number.NaN) - (marks.kill_cmd ?? Number.NaN), 0),
      fall_back_ms: round(fallbackMs, 0),
      start_cmd_ms: round(marks.start_cmd ?? Number.NaN, 0),
      docker_start_returned_ms: round((marks.started ?? Number.NaN) - (marks.start_cmd ?? Number.NaN), 0),
      serving_again_ms: round((marks.serving ?? Number.NaN) - (marks.start_cmd ?? Number.NaN), 0),
      recover_all_live_ms: round((marks.all_live ?? Number.NaN) - (marks.start_cmd ?? Number.NaN), 0),
      first_second_admitted: firstSecond,
      restarted_sync: sync,
      requests: c,
      ...lagStats(r),
    },
    checks,
  };
}

/** docker network disconnect replica `k` for 3 s at 20 % of the trace, then reconnect with --alias node. */
async function partitionDrill(trace: Trace, k: number): Promise<DrillOutcome> {
  const rep = replicas[k]!;
  relay = await startRelay(rep);
  const via: Target = { socketPath: relay.socketPath };
  const cutAt = Math.round(trace.t.length * 0.5 * 0.2);
  const cutMs = 3000;
  const marks: Record<string, number> = {};
  const polls: { t: number; live: number; fallback: boolean }[] = [];
  let start = 0;
  const since = () => performance.now() - start;
  let stopPolling = false;
  // Its own view through the relay, every 50 ms, from the cut until it is back (bounded).
  const poll = async () => {
    const deadline = performance.now() + cutMs + 60_000;
    while (!stopPolling && performance.now() < deadline) {
      const b = await getJson<PeersBody>(via, '/v1/peers', 1000);
      if (b) {
        const t = since();
        polls.push({ t, live: b.live, fallback: b.fallback });
        if (marks.cut !== undefined && b.fallback && marks.view_fallback === undefined)
          marks.view_fallback = t;
        if (marks.healed !== undefined && !b.fallback && marks.view_global === undefined)
          marks.view_global = t;
        if (
          marks.healed !== undefined &&
          b.live === replicas.length - 1 &&
          marks.view_all_live === undefined
        ) {
          marks.view_all_live = t;
          return;
        }
      }
      await sleep(50);
    }
  };
  let poller: Promise<void> | undefined;
  const r = await replay(trace, 'drill-partition', {
    route: (node) => (node === k ? via : replicas[node]!.target),
    events: [
      {
        atMs: cutAt,
        run: async (t0) => {
          start = t0;
          poller = poll();
          await docker(['network', 'disconnect', rep.network, rep.id], 30_000);
          marks.cut = since();
          await sleep(Math.max(0, marks.cut + cutMs - since()));
          marks.heal_cmd = since();
          await docker(['network', 'connect', '--alias', 'node', rep.network, rep.id], 30_000);
          marks.healed = since();
        },
      },
    ],
  });
  await poller;
  stopPolling = true;
  stopRelay(relay);
  relay = undefined;
  Object.assign(rep, await inspectReplica(rep.id));

  // Decisions of the cut replica, by send time relative to the drill clock (the cut event).
  const rel = (i: number) => decisionTime(r, i);
  const mine: number[] = [];
  for (let i = 0; i < r.code.length; i++) if (trace.node[i] === k && !Number.isNaN(r.sent[i]!)) mine.push(i);
  const firstFallback = mine.find((i) => rel(i) >= marks.cut! && r.mode[i] === 1);
  const firstGlobalAfter = mine.find((i) => rel(i) >= marks.healed! && r.mode[i] === 0);
  const fallbackMs = firstFallback === undefined ? Number.NaN : rel(firstFallback) - marks.cut!;
  // Back to global: its first global decision after the reconnect, or (the trace over) its view.
  const recoverMs =
    firstGlobalAfter !== undefined
      ? rel(firstGlobalAfter) - marks.healed!
      : (marks.view_global ?? Number.NaN) - marks.healed!;
  const recoverBy = firstGlobalAfter !== undefined ? 'decision mode' : 'its /v1/peers (trace over)';
  const inCut = (i: number) => rel(i) >= marks.cut! + 200 && rel(i) < marks.heal_cmd!;
  const cutCounts = counts(r, (i) => trace.node[i] === k && inCut(i));
  const cutSecs = (marks.heal_cmd! - marks.cut! - 200) / 1000;
  const cut: Cut = {
    node: k,
    fromMs: Math.round(marks.cut!),
    toMs: Math.round(marks.healed!),
  };
  const pred = predicted(trace, cut);
  const row = liveRow(trace, r, Number.NaN, Number.NaN, `node${k} ${secs(cut.fromMs)}-${secs(cut.toMs)}s`);
  const share = L / replicas.length;
  const c = counts(r);
  const errPct = round((c.errors / Math.max(1, c.sent)) * 100, 2);
  const checks = [
    check('worst 1 s over the drill', row.worst_1s, `<= ${BOUND}`, row.worst_1s <= BOUND),
    CI
      ? check('requests that got no decision', c.errors, '0', c.errors === 0)
      : check('requests that got no decision (errors %)', errPct, '<= 2', errPct <= 2),
    check(
      'cut replica fell back to L/N (decision mode fallback), ms after disconnect',
      round(fallbackMs, 0),
      'observed',
      Number.isFinite(fallbackMs),
    ),
    check(
      'cut replica admitted per second while cut',
      round(cutCounts.admitted / cutSecs, 0),
      `<= L/N = ${share} (+${CI ? 10 : 2} %)`,
      cutCounts.admitted / cutSecs <= share * (CI ? 1.1 : 1.02),
    ),
    check(
      `back to global after reconnect (by ${recoverBy}), ms`,
      round(recoverMs, 0),
      'observed',
      Number.isFinite(recoverMs),
    ),
  ];
  return {
    name: `partition (docker network disconnect ${rep.name} for ${cutMs / 1000} s at ${secs(cutAt)} s)`,
    row: {
      ...row,
      source: 'docker',
      drill: 'partition',
      replica: rep.name,
      cut_at_ms: cutAt,
      disconnect_returned_ms: round(marks.cut!, 0),
      fall_back_ms: round(fallbackMs, 0),
      view_fallback_ms: round((marks.view_fallback ?? Number.NaN) - marks.cut!, 0),
      reconnect_returned_ms: round(marks.healed! - marks.heal_cmd!, 0),
      recover_global_ms: round(recoverMs, 0),
      recover_all_live_ms: round((marks.view_all_live ?? Number.NaN) - marks.healed!, 0),
      cut_replica: cutCounts,
      predicted_worst_1s: pred.worst_1s,
      predicted_admitted: pred.admitted,
      requests: c,
      ...lagStats(r),
    },
    checks,
  };
}

// ---------------------------------------------------------------- main

async function main(): Promise<number> {
  const load0 = loadavg()[0]!;
  log(
    `nodes ${N}, gossip ${G} ms, injected delay ${D} ms, seed trace ${SECONDS} s, drills ${[...DRILLS].join(',') || 'none'}; ` +
      `host ${cpus().length} cores, load ${load0.toFixed(1)}`,
  );
  mkdirSync(TMP, { recursive: true });

  // 1. prepare
  if (!argv['skip-prepare']) {
    log('prepare: docker/prepare.sh');
    await run(join(HERE, 'prepare.sh'), [], { timeoutMs: 600_000, inherit: true });
  }
  await detectCompose();
  // A previous run interrupted hard may have left the project behind.
  upStarted = true;
  await compose(['down', '-v', '--remove-orphans', '--timeout', '5'], 90_000, false, false);

  // 2. build
  const tBuild = performance.now();
  if (argv['skip-build'] && (await docker(['image', 'inspect', IMAGE], 10_000, false)).code === 0) {
    log(`build skipped (--skip-build): using ${IMAGE}`);
  } else {
    log('build: npm run build + stage-app (host), then compose build from docker/tmp/ctx');
    await run(process.execPath, [join(HERE, 'stage-app.mjs'), '--build'], {
      timeoutMs: 300_000,
      inherit: true,
    });
    const ctx = join(TMP, 'ctx');
    rmSync(ctx, { recursive: true, force: true });
    mkdirSync(join(ctx, 'docker', 'config'), { recursive: true });
    mkdirSync(join(ctx, 'docker', 'tmp'), { recursive: true });
    await run('cp', [join(HERE, 'Dockerfile'), join(ctx, 'docker', 'Dockerfile')], { timeoutMs: 10_000 });
    await run('cp', [join(HERE, 'Dockerfile.dockerignore'), join(ctx, '.dockerignore')], {
      timeoutMs: 10_000,
    });
    await run('cp', [join(HERE, 'config', 'node.yaml'), join(ctx, 'docker', 'config', 'node.yaml')], {
      timeoutMs: 10_000,
    });
    await run('cp', ['-al', join(TMP, 'app'), join(ctx, 'docker', 'tmp', 'app')], { timeoutMs: 60_000 });
    const b = await compose(['build', 'node'], 600_000);
    if (!/Successfully (built|tagged)|naming to|writing image/i.test(b.stdout + b.stderr)) {
      log('compose build finished (no "Successfully built" line seen)');
    }
  }
  const buildMs = performance.now() - tBuild;
  const sizeB = Number((await docker(['image', 'inspect', '-f', '{{.Size}}', IMAGE])).stdout.trim());
  const imageMb = round(sizeB / 1e6, 1);
  log(`image ${IMAGE}: ${imageMb} MB (build step ${secs(buildMs)} s)`);

  // 3. up and wait for the mesh
  writeFileSync(
    join(TMP, 'mesh-node.yaml'),
    [
      '# Written by docker/mesh.ts for one run (mounted at /etc/ratemesh/config.yaml).',
      'http: { host: 0.0.0.0, port: 8080 }',
      'mesh:',
      '  listen: ["/ip4/0.0.0.0/tcp/4001"]',
      '  bootstrap: ["dns:node:4001"]',
      ...(D > 0 ? [`  expectedDelayMs: ${D}`] : []),
      'log: { level: warn }',
      'policies:',
      `  - { name: ${SEED.name}, limit: ${SEED.limit}, windowMs: ${SEED.windowMs}, buckets: ${SEED.buckets} }`,
      '',
    ].join('\n'),
  );
  // The load service's input (compose.load.yml mounts docker/tmp/trace at /trace).
  const trace = dockerTrace(N, SECONDS);
  mkdirSync(join(TMP, 'trace'), { recursive: true });
  writeFileSync(
    join(TMP, 'trace', 'seed.jsonl'),
    `${Array.from(trace.t, (t, i) => JSON.stringify({ t, node: trace.node[i] })).join('\n')}\n`,
  );

  const tUp = performance.now();
  log(`up: ${composeCmd.join(' ')} -p ${PROJECT} up -d --scale node=${N}`);
  await compose(['up', '-d', '--no-build', '--scale', `node=${N}`, 'node'], 180_000);
  const upReturnedMs = performance.now() - tUp;
  replicas = await listReplicas();
  if (replicas.length !== N) throw new Error(`expected ${N} replicas, found ${replicas.length}`);
  const formLimitMs = CI ? 120_000 : 60_000;
  const formed = await waitForMesh(replicas, formLimitMs, tUp);
  const formedMs = formed.ok ? formed.allTogetherMs : Number.POSITIVE_INFINITY;
  const lastFirstFull = Math.max(...formed.firstFullMs);
  log(
    formed.ok
      ? `mesh formed: every replica at ${N - 1} live peers ${secs(formedMs)} s after 'up' started ` +
          `(up returned after ${secs(upReturnedMs)} s; last replica's first full view at ${secs(lastFirstFull)} s)`
      : `FAIL  mesh NOT formed within ${formLimitMs / 1000} s (live peers per replica ${formed.lastLive.join('/')}); measuring anyway`,
  );
  if (!formed.answered.every(Boolean)) throw new Error('a replica never answered GET /v1/peers');

  // 4. replay the seed trace, after a warm-up on another key: fresh replicas run their HTTP and
  // decision code in V8's interpreter for the first seconds (measured here: decisions up to
  // 1.4 s behind their send times for ~3 s, then p99 10-30 ms), which is start-up, not the limiter
  if (WARMUP_S > 0) {
    log(`warm-up: the first ${WARMUP_S} s of the trace on key 'warmup' (not measured)`);
    const w = await replay(dockerTrace(N, WARMUP_S), 'warmup', { route: (node) => replicas[node]!.target });
    const wl = lagStats(w);
    log(
      `warm-up done: reply latency p99 ${wl.latency_ms.p99} ms; waiting one window for its counts to leave`,
    );
    await sleep(W + 2 * G);
  }
  const before = await Promise.all(replicas.map((r) => scrape(r.target)));
  const cpu0 = sampleCpu(replicas.map((r) => r.fullId));
  const self0 = process.cpuUsage();
  const statsBefore = await Promise.all(replicas.map((r) => getJson<StatsBody>(r.target, '/v1/stats')));
  const loadBefore = loadavg()[0]!;
  log(
    `replay: ${trace.t.length} requests over ${SECONDS} s (${round(2000 * SCALE, 0)}/s) to ${N} replicas, ` +
      (BATCH_MS > 0
        ? `the ones due for a replica sent together every ${BATCH_MS} ms (POST /v1/check/batch)`
        : `one POST /v1/check each`),
  );
  const main = await replay(trace, 'main', { route: (node) => replicas[node]!.target });
  const cpuUse = cpuBreakdown(
    cpu0,
    sampleCpu(replicas.map((r) => r.fullId)),
    new Map(replicas.map((r) => [r.fullId, r.name])),
  );
  const after = await Promise.all(replicas.map((r) => scrape(r.target)));
  const statsAfter = await Promise.all(replicas.map((r) => getJson<StatsBody>(r.target, '/v1/stats')));
  const per = rates(before, after, main.durationMs);
  const row = liveRow(trace, main, mean(per.map((p) => p.msgs)), mean(per.map((p) => p.bytes)), null);
  const pred = predicted(trace);
  const lag = lagStats(main);
  const c = counts(main);
  const clocks = worstBy(main);
  const decidedAt = hasDecisionTimes(main);

  console.log('');
  console.log(
    `seed trace: ${trace.t.length} requests over ${SECONDS} s, ${N} Docker replicas, L = ${L} per ${W} ms (k = ${SEED.buckets}); ` +
      `GCRA bound ${gcraBound(trace, 1 / SCALE, Math.round(96 * SCALE))}, exact sliding-window-log bound ${slidingLogAdmits(trace.t, L, W).length}`,
  );
  printTable(ROW_HEADER, [rowCells('docker (live)', row), rowCells('simulator (predicted)', pred)]);
  console.log(
    `requests: ${c.sent} sent, ${c.admitted} admitted, ${c.denied} denied, ${c.errors} errors; modes global ${c.global} / fallback ${c.fallback} / local ${c.local}; ` +
      `worst 1s by ${decidedAt ? 'replica decision time' : 'send time'} ${row.worst_1s}, by scheduled ${clocks.scheduled}, sent ${clocks.sent}, replied ${clocks.replied}`,
  );
  console.log(
    `send lag ms p50 ${lag.send_lag_ms.p50} p99 ${lag.send_lag_ms.p99} max ${lag.send_lag_ms.max}; ` +
      `reply latency ms p50 ${lag.latency_ms.p50} p99 ${lag.latency_ms.p99} max ${lag.latency_ms.max}; ` +
      `max in flight ${lag.max_in_flight}; host load ${loadBefore.toFixed(1)} -> ${loadavg()[0]!.toFixed(1)}`,
  );
  const selfCpu = process.cpuUsage(self0);
  const driverPct = round(
    ((selfCpu.user + selfCpu.system) / 1000 / main.durationMs / cpus().length) * 100,
    1,
  );
  console.log(`${describeCpu(cpuUse)}; of these this load driver: ${driverPct} %`);
  if (process.env.DEBUG_LAT) {
    for (let s = 0; s < SECONDS; s++) {
      const xs: number[] = [];
      for (let j = 0; j < main.code.length; j++)
        if (main.sched[j]! >= s * 1000 && main.sched[j]! < s * 1000 + 1000 && !Number.isNaN(main.decided[j]!))
          xs.push(main.decided[j]! - main.sent[j]!);
      console.log(
        `second ${s}: decide lag p50 ${round(quantile(xs, 0.5), 1)} p99 ${round(quantile(xs, 0.99), 1)} max ${round(Math.max(...xs), 1)}`,
      );
    }
  }
  const perRows = replicas.map((rep, i) => {
    const cc = counts(main, (j) => trace.node[j] === i);
    const s0 = statsBefore[i]?.mesh.gossip;
    const s1 = statsAfter[i]?.mesh.gossip;
    const ticks = s0 && s1 ? (s1.ticks - s0.ticks) / (main.durationMs / 1000) : Number.NaN;
    const replyMs: number[] = [];
    const decideMs: number[] = [];
    for (let j = 0; j < main.code.length; j++) {
      if (trace.node[j] !== i || Number.isNaN(main.sent[j]!)) continue;
      if (!Number.isNaN(main.replied[j]!)) replyMs.push(main.replied[j]! - main.sent[j]!);
      if (!Number.isNaN(main.decided[j]!)) decideMs.push(main.decided[j]! - main.sent[j]!);
    }
    return {
      replica: rep.name,
      ip: rep.ip,
      sent: cc.sent,
      admitted: cc.admitted,
      denied: cc.denied,
      errors: cc.errors,
      fallback: cc.fallback,
      msgs_out_s: round(per[i]!.msgs, 1),
      bytes_out_s: Math.round(per[i]!.bytes),
      ticks_s: round(ticks, 1),
      // reply: send to reply; decide: send to the replica's decidedAt (same kernel clock)
      reply_p99_ms: round(quantile(replyMs, 0.99), 1),
      decide_p99_ms: round(quantile(decideMs, 0.99), 1),
      cpu_pct: round(per[i]!.cpuPct, 1),
      cgroup_cpu_pct: cpuUse.per_container_pct_core[rep.name] ?? Number.NaN,
      loop_delay_p99_ms: round(per[i]!.loopP99Ms, 1),
      loop_delay_max_ms: round(per[i]!.loopMaxMs, 1),
      gc_ms: round(per[i]!.gcMs, 1),
    };
  });
  printTable(
    Object.keys(perRows[0]!),
    perRows.map((r) => Object.values(r)),
  );
  const tickRate = mean(perRows.map((r) => r.ticks_s));
  const sustainedPct = round((tickRate / (1000 / G)) * 100, 0);
  const overload = overloaded(lag, sustainedPct, cpuUse.host_busy_pct);
  console.log(
    `gossip ticks: ${round(tickRate, 1)}/s per replica of ${round(1000 / G, 1)}/s (${sustainedPct} % sustained)`,
  );
  console.log(
    overload
      ? `OVERLOADED  ${overload}: decisions and gossip ran late on a starved host; timing figures above measure the host, the checks below still hold the behaviour`
      : `not overloaded: host CPU ${cpuUse.host_busy_pct} % busy, reply latency p99 ${lag.latency_ms.p99} ms, send lag p99 ${lag.send_lag_ms.p99} ms, gossip ticks ${sustainedPct} %`,
  );
  const ok1 = row.worst_1s <= BOUND;
  // The benchmark holds formation to 15 s; CI checks that it forms (start-up speed is not behaviour).
  const formedOk = CI ? formed.ok : formedMs < 15_000;
  const formedBound = CI ? `< ${formLimitMs / 1000}` : '< 15';
  console.log(
    `${ok1 ? 'PASS' : 'FAIL'}  worst 1 s ${row.worst_1s} (bound ${BOUND}); ` +
      `${formedOk ? 'PASS' : 'FAIL'}  mesh formed in ${formed.ok ? secs(formedMs) : `> ${formLimitMs / 1000}`} s (target ${formedBound} s)`,
  );
  console.log('');

  const rows: (AccuracyRow & Record<string, unknown>)[] = [
    {
      ...row,
      source: 'docker',
      nodes: N,
      seconds: SECONDS,
      requests: c,
      decision_time_source: decidedAt ? 'replica decidedAt' : 'host send time',
      gossip_ticks_per_s_node: round(tickRate, 1),
      gossip_sustained_pct: sustainedPct,
      overloaded: overload ?? false,
      worst_1s_by: clocks,
      predicted_worst_1s: pred.worst_1s,
      predicted_admitted: pred.admitted,
      predicted_worst_100ms: pred.worst_100ms,
      predicted_msgs_per_s_node: pred.msgs_per_s_node,
      predicted_bytes_per_s_node: pred.bytes_per_s_node,
      ...lag,
      host_cpu: { ...cpuUse, driver_pct_of_host: driverPct },
      replicas: perRows,
      mesh_formed_ms: round(formedMs, 0),
      up_returned_ms: round(upReturnedMs, 0),
      image: IMAGE,
      image_mb: imageMb,
      host: { cores: cpus().length, load_before: round(loadBefore, 2), compose: composeCmd.join(' ') },
    },
  ];
  const errPct = round((c.errors / Math.max(1, c.sent)) * 100, 2);
  const checks: Check[] = [
    check('worst 1 s (seed trace)', row.worst_1s, `<= ${BOUND}`, ok1),
    // A run where replies time out measures nothing: it must not pass on a low worst 1 s.
    CI
      ? check('requests that got no decision', c.errors, '0', c.errors === 0)
      : check('requests that got no decision (errors %)', errPct, '<= 1', errPct <= 1),
    check('mesh formed (s after up)', secs(formedMs), formedBound, formedOk),
  ];

  // 5. drills (replica 1 = trace node 0, the 40 % node)
  const drills: DrillOutcome[] = [];
  for (const name of ['kill', 'partition'] as const) {
    if (!DRILLS.has(name)) continue;
    const again = await waitForMesh(replicas, 60_000, performance.now());
    if (!again.ok)
      log(
        `WARNING  mesh not whole before the ${name} drill (live ${again.lastLive.join('/')}); running it anyway`,
      );
    log(`drill ${name}`);
    if (name === 'partition' && (process.getuid?.() !== 0 || !existsSync('/usr/bin/nsenter'))) {
      const why = process.getuid?.() !== 0 ? 'not root' : 'no nsenter';
      console.log(
        `FAIL  partition drill not run: ${why} (its traffic goes through a relay made with nsenter)`,
      );
      checks.push(check('partition drill ran', why, 'ran', false));
      continue;
    }
    const d = name === 'kill' ? await killDrill(trace, 0) : await partitionDrill(trace, 0);
    drills.push(d);
    const ok = d.checks.every((x) => x.ok);
    console.log(
      `${ok ? 'PASS' : 'FAIL'}  ${d.name}: admitted ${d.row.admitted}, worst 1s ${d.row.worst_1s}, worst 100ms ${d.row.worst_100ms}`,
    );
    for (const x of d.checks)
      console.log(`   ${x.ok ? 'ok ' : 'BAD'}  ${x.what}: ${x.value} (bound ${x.bound})`);
    const { requests, send_lag_ms } = d.row;
    const timing = Object.fromEntries(
      Object.entries(d.row).filter(([key]) => key.endsWith('_ms') && typeof d.row[key] === 'number'),
    );
    console.log(`        times ${JSON.stringify(timing)}`);
    console.log(`        requests ${JSON.stringify(requests)} send lag ${JSON.stringify(send_lag_ms)}`);
    const dl = d.row as unknown as ReturnType<typeof lagStats>;
    const ov = overloaded(dl);
    console.log(
      ov
        ? `OVERLOADED  ${ov}`
        : `not overloaded: reply latency p99 ${dl.latency_ms.p99} ms, send lag p99 ${dl.send_lag_ms.p99} ms`,
    );
    d.row.overloaded = ov ?? false;
    rows.push(d.row);
    checks.push(...d.checks);
  }

  const totalMs = elapsed();
  rows[0]!.total_s = secs(totalMs);
  rows[0]!.checks = checks;
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(rows, null, 2)}\n`);
  log(`wrote ${relative(process.cwd(), OUT)}`);
  await teardown('done');
  const failed = checks.filter((x) => !x.ok);
  console.log(
    `${failed.length === 0 ? 'PASS' : `FAIL (${failed.map((x) => x.what).join('; ')})`}: total ${secs(elapsed())} s, image ${IMAGE} ${imageMb} MB`,
  );
  return failed.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    console.error(`[docker:mesh] FAILED: ${err instanceof Error ? err.message : String(err)}`);
    await teardown('failure');
    process.exit(1);
  },
);
