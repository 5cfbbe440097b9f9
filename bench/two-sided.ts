/**
 * Both errors of the decision rule, per row (issue 26): on the same arrivals, three limiters
 * side by side — `default` (the policy as a user writes it: name, limit, window; every other
 * option the default), `naive` (`overAdmission: 'naive'`) and `exact` (an exact sliding-window
 * log over the arrivals, slidingLogAdmits). The mesh is the user's default too (defaultMesh:
 * g = 100 ms, d = 10 ms, gossip to every member); the production engine decides in the
 * simulator. Columns: false denials (% of what the exact limiter admits that this one denied;
 * also within each key's first window and after it), the worst rolling window − L (worst over
 * keys), admitted / exact, admitted / the local ceiling (localCeilingAdmits) and the ceiling's own
 * false denials (the fewest any limiter whose nodes decide alone can make), calls to other
 * nodes per request and the latency they add (0 while every decision is local: fed by a
 * CostProbe), and the denials by `rule`.
 *
 *   npm run bench:two-sided [-- --rows <substring>] [--nodes 2,3,8] [--out FILE] [--all] [--jobs P]
 *     [--limiters default,auto,naive]   (only these simulated limiters: a thin row at 256 nodes with auto alone)
 *   npm run bench:two-sided -- --print a.json[,b.json] [--out FILE]   (saved reports as printed, merged)
 *   npm run bench:two-sided -- --recompute-ceiling FILE   (a saved report's ceiling figures from its rows' arrivals)
 *   ... --cache DIR [--cached-only]   (each job's result kept in DIR as it ends, taken from there
 *     by a later run: a run cut short keeps what it finished; --cached-only runs nothing new)
 *
 * A run is one policy in one simulated mesh; the rows that share a run are classes of its keys
 * (one service's accounts: steady, bursty, heavy), so a row's figures never depend on which
 * other rows were asked for (`--rows` picks the runs that hold a matching row). Every run goes
 * at every node count of `--nodes` (default 2, 3, 8, 32, 64, 256; own batches also at 1, the
 * seed trace at 8 only), as two jobs (default, naive) on P child processes (default 2); the
 * exact limiter and the ceiling are computed from the arrivals. Keys per class fall with N
 * (population(): the engine's gossip work grows with nodes × keys). At 256 nodes, where the
 * gossip to every member costs about 10 s of CPU a simulated second, only the runs marked
 * `large` go (the global key for 2 s, the bursts on 2 keys per class); the others are
 * listed with their estimated cost and run with `--all`. Each job's CPU and wall time are
 * printed (on a shared machine the wall time overstates the cost). Deterministic: seeded
 * arrivals, seeded simulator; a run's output depends on nothing but its arguments.
 * Writes bench/results/two-sided.json (or `--out`).
 */
import { execSync, fork } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deserialize, serialize } from 'node:v8';
import { Prng } from '../src/sim/prng.js';
import type { SimOptions } from '../src/sim/simulator.js';
import { seedTrace } from '../src/sim/trace.js';
import {
  type Arrivals,
  addKey,
  burstsKey,
  type CostProbe,
  defaultMesh,
  emptyArrivals,
  exactFlags,
  figuresOf,
  firstWindowFlags,
  globalKeyArrivals,
  type LimiterRun,
  LOCAL_DECISIONS,
  localCeilingFigures,
  push,
  type RateSegment,
  ratio,
  ruleHistogram,
  runSim,
  sortArrivals,
  steadyKey,
  type TwoSidedFigures,
  timesByKey,
  WARMUP_MS,
} from '../src/sim/two-sided.js';
import { runOwnerSim } from '../src/sim/two-sided-owner.js';
import type { PolicySpec } from '../src/types.js';
import { printTable } from './table.js';

/** A simulated mesh run: one policy, arrivals whose keys are classed into the run's rows. */
interface RunDef {
  family: string;
  /** Row names, by key class. */
  rows: string[];
  limit: number;
  windowMs: number;
  /** Runs at LARGE nodes and up without `--all`. */
  large?: boolean;
  /** Node counts it runs at, if not every one asked for. */
  only?: (n: number) => boolean;
  /** Simulated seconds at `n` nodes (the cost estimate). */
  seconds(n: number): number;
  /** The arrivals at `n` nodes, and each key's class (an index into `rows`). */
  build(n: number): { arrivals: Arrivals; keyClass: number[] };
  /** Node counts it also runs at when `--nodes` is not given. */
  extraNodes?: number[];
  /** Nodes of the local ceiling at `n` (default n: arrivals spread over every node). */
  ceilingNodes?: (n: number) => number;
  /** What the rows' traffic is, at `n` nodes (printed). */
  describe(n: number): string;
  /** The mesh, where it is not the user's default (the frontier's alternatives). */
  mesh?: Partial<SimOptions>;
  /** The limiters it runs (default: default, auto and naive; the exact one always). */
  limiters?: readonly SimLimiter[];
  /** Traffic from the mesh's start (the cold-start family), not once it has formed (WARMUP_MS). */
  cold?: boolean;
  /** The policy's placement for the `auto` limiter, where not the default (the frontier's owner row). */
  placement?: 'owner';
  /** The policy's buckets, where not the default (the frontier's finer buckets). */
  buckets?: number;
}

type SimLimiter = 'default' | 'auto' | 'naive';
const SIM_LIMITERS: readonly SimLimiter[] = ['default', 'auto', 'naive'];

const NODE_COUNTS = [2, 3, 8, 32, 64, 256];
/** What a request costs beyond a local decision (calls/req, +ms): nothing while every decision is local. */
const PROBE: CostProbe = LOCAL_DECISIONS;
/** Node counts from which only the runs marked `large` run, unless `--all`. */
const LARGE = 256;
/**
 * CPU seconds per simulated second per N^2.5, about (gossip to every member: N² deliveries a
 * tick, each dearer with more members): measured about 10 s of CPU a simulated second at 256
 * nodes with a key at 900/s. Only the skipped list's estimates and the order of the jobs use it.
 */
const COST_PER_N25 = 1e-5;

/**
 * Accounts per class (steady, bursty) at `n` nodes: the engine's per-key gossip work grows with
 * nodes × keys, so fewer where there are more nodes (about 15 ms of CPU per node and account
 * over the run's 100 s, both limiters): 2,000 at 2 nodes, 600 at 8, 75 at 64.
 */
function population(n: number): number {
  return Math.max(10, Math.min(2000, Math.round(4800 / n / 5) * 5));
}

/** Login and SMS users at `n` nodes (their keys live shorter: cheaper). */
function users(n: number): number {
  return Math.max(50, Math.min(2000, Math.round(16000 / n / 10) * 10));
}

/** Heavy accounts at `n` nodes: a quarter of the others. */
function heavyAccounts(n: number): number {
  return Math.max(1, Math.ceil(population(n) / 4));
}

const S = 1000;
const MIN = 60 * S;
/** Simulated seconds of the accounts run: every key's first minute and 20-40 s after it. */
const ACCOUNT_SECONDS = 100;

function globalRun(
  name: string,
  segments: (n: number) => RateSegment[],
  alternative?: { mesh: Partial<SimOptions>; only: number[]; placement?: 'owner'; buckets?: number },
  cold?: { only: number[] },
): RunDef {
  const seconds = (n: number) => (n >= LARGE ? 2 : 10);
  return {
    family: cold !== undefined ? 'cold start' : alternative === undefined ? 'global' : 'frontier',
    large: alternative === undefined,
    ...(alternative === undefined
      ? {}
      : {
          mesh: alternative.mesh,
          only: (n: number) => alternative.only.includes(n),
          ...(alternative.placement === undefined
            ? { limiters: ['default'] as const }
            : { limiters: ['auto'] as const, placement: alternative.placement }),
          ...(alternative.buckets === undefined ? {} : { buckets: alternative.buckets }),
        }),
    ...(cold === undefined ? {} : { cold: true, only: (n: number) => cold.only.includes(n) }),
    rows: [name],
    limit: 1000,
    windowMs: S,
    seconds,
    build(n) {
      return { arrivals: globalKeyArrivals(n, segments(seconds(n) * S)), keyClass: [0] };
    },
    describe: (n) =>
      `one key, L = 1,000 per 1 s, ${segments(seconds(n) * S)
        .map(([r, f, t]) => `${r}/s over ${f / S}-${t / S} s`)
        .join(', then ')}, evenly spaced, nodes drawn uniformly`,
  };
}

const accountsRun: RunDef = {
  family: 'accounts',
  rows: ['steady 0.5L', 'bursty 30 per 40 s', 'heavy 3L'],
  limit: 100,
  windowMs: MIN,
  seconds: () => ACCOUNT_SECONDS,
  build(n) {
    const a = emptyArrivals();
    const keyClass: number[] = [];
    const prng = new Prng(21);
    const end = ACCOUNT_SECONDS * S;
    const A = population(n);
    for (let i = 0; i < A; i++) {
      keyClass.push(0);
      steadyKey(a, addKey(a, `steady-${i}`), 50 / 60, prng.next() * 20 * S, end, n, prng);
    }
    for (let i = 0; i < A; i++) {
      keyClass.push(1);
      burstsKey(a, addKey(a, `bursty-${i}`), 30, 40 * S, prng.next() * 20 * S, end, n, prng);
    }
    for (let i = 0; i < heavyAccounts(n); i++) {
      keyClass.push(2);
      steadyKey(a, addKey(a, `heavy-${i}`), 5, prng.next() * 20 * S, end, n, prng);
    }
    return { arrivals: sortArrivals(a), keyClass };
  },
  describe: (n) =>
    `one policy L = 100 per min, ${population(n)} steady accounts at 50/min, ${population(n)} sending 30 at once every 40 s, ` +
    `${heavyAccounts(n)} at 300/min; each key new (starts in the first 20 s), ${ACCOUNT_SECONDS} s, nodes drawn uniformly`,
};

/** Keys per class of the burst rows at `n` nodes. */
const burstKeys = (n: number) => (n >= LARGE ? 2 : 20);

const burstsRun: RunDef = {
  family: 'bursts',
  rows: ['fresh keys', 'warm keys (5 earlier)'],
  limit: 50,
  windowMs: 10 * S,
  large: true,
  seconds: (n) => 2.2 + burstKeys(n) * 0.4,
  build(n) {
    const a = emptyArrivals();
    const keyClass: number[] = [];
    const prng = new Prng(31);
    const K = burstKeys(n);
    for (let j = 0; j < K; j++) {
      keyClass.push(0);
      const k = addKey(a, `fresh-${j}`);
      const at = 500 + 400 * j;
      burstsKey(a, k, 300, S, at, at + 1, n, prng, 15, j % n);
    }
    for (let j = 0; j < K; j++) {
      keyClass.push(1);
      const k = addKey(a, `warm-${j}`);
      const at = 2000 + 400 * j + 200;
      for (let m = 0; m < 5; m++) push(a, at - 1000 + 100 * m, Math.floor(prng.next() * n), k);
      burstsKey(a, k, 300, S, at, at + 1, n, prng, 15, j % n);
    }
    return { arrivals: sortArrivals(a), keyClass };
  },
  describe: (n) =>
    `L = 50 per 10 s, ${burstKeys(n)} keys per class, each 300 requests within 15 ms round-robin over the nodes; ` +
    'warm keys had 5 requests (nodes drawn uniformly, 100 ms apart) from 1 s before',
};

/** Users making attempts at uniform nodes, and attackers spraying every node at once. */
function usersAndAttackers(
  family: string,
  limit: number,
  windowMs: number,
  attempts: { count: number; apartMs: number; startWithinMs: number },
  attack: { everyMs: number; forMs: number },
  end: number,
  cold?: { only: number[] },
): RunDef {
  const ATTACKERS = 5;
  return {
    family: cold === undefined ? family : 'cold start',
    ...(cold === undefined ? {} : { cold: true, only: (n: number) => cold.only.includes(n) }),
    rows: [
      `${cold === undefined ? '' : `${family} `}users ${attempts.count} attempts ${attempts.apartMs / S} s apart`,
      `${cold === undefined ? '' : `${family} `}attacker on every node at once`,
    ],
    limit,
    windowMs,
    seconds: () => end / S,
    build(n) {
      const a = emptyArrivals();
      const keyClass: number[] = [];
      const prng = new Prng(41);
      for (let i = 0; i < users(n); i++) {
        keyClass.push(0);
        const k = addKey(a, `user-${i}`);
        const t0 = prng.next() * attempts.startWithinMs;
        for (let j = 0; j < attempts.count; j++)
          push(a, t0 + j * attempts.apartMs, Math.floor(prng.next() * n), k);
      }
      for (let v = 0; v < ATTACKERS; v++) {
        keyClass.push(1);
        const k = addKey(a, `target-${v}`);
        const t0 = 2 * S + 3 * S * v;
        burstsKey(a, k, n, attack.everyMs, t0, t0 + attack.forMs, n, prng, 0, 0);
      }
      return { arrivals: sortArrivals(a), keyClass };
    },
    describe: (n) =>
      `L = ${limit} per ${windowMs >= 3_600_000 ? `${windowMs / 3_600_000} h` : `${windowMs / MIN} min`}, ${users(n)} users ` +
      `(first attempt in the first ${attempts.startWithinMs / S} s, nodes drawn uniformly); ${ATTACKERS} attacked keys, ` +
      `one attempt at every node at once every ${attack.everyMs / S} s for ${attack.forMs / S} s`,
  };
}

function ownRun(lo: number, hi: number): RunDef {
  const seconds = (n: number) => (n >= LARGE ? 5 : 20);
  return {
    family: 'own batches',
    rows: [`k = 10, gaps ${lo}-${hi} ms`],
    limit: 1000,
    windowMs: S,
    seconds,
    ceilingNodes: () => 1,
    extraNodes: [1],
    build(n) {
      const a = emptyArrivals();
      const k = addKey(a, 'hot');
      const prng = new Prng(7);
      const end = seconds(n) * S;
      let t = 0;
      let sent = 0;
      for (let step = 0; step < 1e6; step++) {
        t += lo + prng.next() * (hi - lo);
        if (t >= end) break;
        const due = Math.floor(t * 2) - sent;
        sent += due;
        for (let i = 0; i < due; i++) push(a, t, 0, k);
      }
      return { arrivals: a, keyClass: [0] };
    },
    describe: (n) =>
      `one key, L = 1,000 per 1 s (k = 10, the default), 2,000/s due, all at node 0, decided in batches at gaps ` +
      `drawn from [${lo}, ${hi}] ms, ${seconds(n)} s (bench:own-bursts)`,
  };
}

const seedRun: RunDef = {
  family: 'seed trace',
  // as the seed defines it (and bench:accuracy runs it): from the mesh's start
  cold: true,
  rows: ['8 nodes 40/20/10/10/5/5/5/5 %'],
  limit: 1000,
  windowMs: S,
  only: (n) => n === 8,
  seconds: () => 10,
  build() {
    const tr = seedTrace();
    const a = emptyArrivals();
    const k = addKey(a, 'global');
    for (let i = 0; i < tr.t.length; i++) push(a, tr.t[i]!, tr.node[i]!, k);
    return { arrivals: a, keyClass: [0] };
  },
  describe: () =>
    'the seed trace: 20,000 requests at 2,000/s, L = 1,000 per 1 s (k = 10, the default); 8 nodes only',
};

/**
 * The accounts with every request asked of the key's owner (`placement: 'owner'`, the `auto`
 * column) on 8 nodes, where `auto` keeps L = 100 local (L >= 4 N) and the local rule misses the
 * bursty and heavy targets: what deciding them exactly costs in calls and latency.
 */
const accountsOwnerRun: RunDef = {
  ...accountsRun,
  rows: accountsRun.rows.map((r) => `${r}, placement owner`),
  only: (n) => n === 8,
  limiters: ['auto'],
  placement: 'owner',
};

const RUNS: RunDef[] = [
  globalRun('0.5L', (e) => [[500, 0, e]]),
  globalRun('0.9L', (e) => [[900, 0, e]]),
  globalRun('2L', (e) => [[2000, 0, e]]),
  globalRun('step 0.5L to 2L', (e) => [
    [500, 0, e / 2],
    [2000, e / 2, e],
  ]),
  // the same rows with the traffic starting 50 ms into a 100 ms bucket (every row above starts on a
  // bucket's edge, as no key of a real service does): a peer's counts in the oldest bucket are
  // weighed as if spread over it, and a key's first counts all lie in its second half
  ...(
    [
      ['0.9L', (e: number) => [[900, 50, e + 50]]],
      ['2L', (e: number) => [[2000, 50, e + 50]]],
      [
        'step 0.5L to 2L',
        (e: number) => [
          [500, 50, e / 2 + 50],
          [2000, e / 2 + 50, e + 50],
        ],
      ],
    ] as const
  ).map(([row, segments]) => ({
    ...globalRun(`${row}, from 50 ms into a bucket`, segments as (e: number) => RateSegment[]),
    family: 'start offset',
    large: false,
  })),
  accountsRun,
  accountsOwnerRun,
  burstsRun,
  // the frontier (issue 26): the global key near and over L with the alternatives to the default's
  // gossip, so the default is a measured choice: g = 50, 25 and 10 ms, broadcast (more messages: 20, 40 and 100 a second from each peer), finer
  // buckets (20 and 50 a window: 50 and 20 ms against the default's 100), and every request
  // decided by the key's owner
  ...(['0.9L', '2L'] as const).flatMap((row) =>
    (
      [
        // broadcast (the mesh's auto relay would relay from 52 and 27 members at these g)
        // the default before fast gossip: every tick g = 100 ms apart, tight keys or not
        ['fast gossip off', { fastGossipMs: 0 }],
        ['g = 50, broadcast', { gossipIntervalMs: 50, relay: undefined, fastGossipMs: 0 }],
        ['g = 25, broadcast', { gossipIntervalMs: 25, relay: undefined, fastGossipMs: 0 }],
        ['g = 10, broadcast', { gossipIntervalMs: 10, relay: undefined, fastGossipMs: 0 }],
        // the mesh as it runs at g = 10 ms: auto relay from 12 members (more than 1,000 messages a second)
        ['g = 10, auto relay', { gossipIntervalMs: 10, fastGossipMs: 0 }],
        ['20 buckets', {}, undefined, 20],
        ['50 buckets', {}, undefined, 50],
        // every request asked of the key's owner (the `auto` column: one call a request)
        ['placement owner', {}, 'owner'],
      ] as const
    ).map(
      ([alt, mesh, placement, buckets]: readonly [
        string,
        Partial<SimOptions>,
        ('owner' | undefined)?,
        number?,
      ]) =>
        globalRun(`${row}, ${alt}`, (e) => [[row === '0.9L' ? 900 : 2000, 0, e]], {
          mesh,
          only: [8, 32, 64],
          ...(placement === undefined ? {} : { placement }),
          ...(buckets === undefined ? {} : { buckets }),
        }),
    ),
  ),
  usersAndAttackers(
    'login',
    5,
    MIN,
    { count: 3, apartMs: 10 * S, startWithinMs: 30 * S },
    { everyMs: S, forMs: 60 * S },
    75 * S,
  ),
  ownRun(2, 30),
  ownRun(10, 120),
  usersAndAttackers(
    'sms',
    3,
    3_600_000,
    { count: 3, apartMs: 30 * S, startWithinMs: 15 * S },
    { everyMs: 2 * S, forMs: 40 * S },
    75 * S,
  ),
  seedRun,
  // cold start: the traffic from the mesh's start, as the nodes first hear each other (every
  // other run starts WARMUP_MS later, once the mesh has formed)
  globalRun("0.5L from the mesh's start", (e) => [[500, 0, e]], undefined, { only: [8, 64, 256] }),
  globalRun("0.9L from the mesh's start", (e) => [[900, 0, e]], undefined, { only: [8, 64, 256] }),
  usersAndAttackers(
    'login',
    5,
    MIN,
    { count: 3, apartMs: 10 * S, startWithinMs: 30 * S },
    { everyMs: S, forMs: 60 * S },
    75 * S,
    { only: [8, 64] },
  ),
];

/** `auto`: the default policy with owner placement on (issue 27: thin keys decided by their owner). */
type Limiter = 'default' | 'auto' | 'naive' | 'exact';

interface ResultRow extends TwoSidedFigures {
  family: string;
  row: string;
  nodes: number;
  limiter: Limiter;
  limit: number;
  window_ms: number;
  seconds: number;
  /** The run's traffic at this node count, in words. */
  traffic: string;
  /** Denials by rule (default and naive). */
  denials_by_rule: Record<string, number>;
  /**
   * The local ceiling's false denials on the row's arrivals (localCeilingFigures): the fewest, in
   * expectation, of any limiter whose nodes decide alone and never pass L. The same on each
   * limiter's line of a row; absent in reports written before it.
   */
  ceiling_false_denials_pct?: number;
  /** Gossip messages a node received a second over the row's run (simulated limiters). */
  msgs_in_node_s?: number;
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function policyOf(limiter: 'default' | 'auto' | 'naive', r: RunDef): PolicySpec {
  const p: PolicySpec = {
    name: 'p',
    limit: r.limit,
    windowMs: r.windowMs,
    ...(r.buckets === undefined ? {} : { buckets: r.buckets }),
  };
  if (limiter === 'auto' && r.placement !== undefined) return { ...p, placement: r.placement };
  return limiter === 'naive' ? { ...p, overAdmission: 'naive' } : p;
}

function rulesText(h: Record<string, number>): string {
  const e = Object.entries(h).sort((x, y) => y[1] - x[1]);
  return e.length === 0 ? '-' : e.map(([k, v]) => `${k} ${v}`).join(', ');
}

/** CPU s of one limiter's run, estimated: the gossip of its nodes, and the accounts' keys (about 1.5 ms per node and account). */
function estimate(run: RunDef, n: number): number {
  const keys = run.family === 'accounts' ? 0.0015 * n * (2 * population(n) + heavyAccounts(n)) : 0;
  return COST_PER_N25 * n ** 2.5 * run.seconds(n) + keys;
}

/** One simulator run of a limiter: a run definition at a node count. */
interface Job {
  run: number;
  nodes: number;
  limiter: 'default' | 'auto' | 'naive';
}

/** What a worker sends back. */
interface JobResult {
  job: Job;
  result: LimiterRun;
  wall_s: number;
  /** CPU time of the job (user + system), s: on a busy machine less than its wall time. */
  cpu_s: number;
}

function runJob(job: Job): JobResult {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const run = RUNS[job.run]!;
  const built = run.build(job.nodes).arrivals;
  const arrivals = run.cold === true ? built : { ...built, t: built.t.map((t) => t + WARMUP_MS) };
  const result =
    job.limiter === 'auto'
      ? runOwnerSim({ ...defaultMesh(job.nodes), ...run.mesh }, policyOf(job.limiter, run), arrivals)
      : runSim({ ...defaultMesh(job.nodes), ...run.mesh }, policyOf(job.limiter, run), arrivals, PROBE);
  const c = process.cpuUsage(c0);
  return { job, result, wall_s: (performance.now() - t0) / 1000, cpu_s: (c.user + c.system) / 1e6 };
}

/** Run `jobs` on `parallel` child processes (this file with --worker), calling `done` as each ends. */
async function runJobs(jobs: Job[], parallel: number, done: (r: JobResult) => void): Promise<void> {
  if (parallel <= 1) {
    for (const j of jobs) done(runJob(j));
    return;
  }
  const file = fileURLToPath(import.meta.url);
  let next = 0;
  const worker = () =>
    new Promise<void>((res, rej) => {
      const child = fork(file, ['--worker'], { execArgv: process.execArgv, serialization: 'advanced' });
      const feed = () => {
        if (next >= jobs.length) {
          child.disconnect();
          return;
        }
        child.send(jobs[next++]!);
      };
      child.on('message', (m: JobResult) => {
        done(m);
        feed();
      });
      child.on('error', rej);
      child.on('exit', (code) => (code === 0 ? res() : rej(new Error(`worker exited with ${code}`))));
      feed();
    });
  await Promise.all(Array.from({ length: Math.min(parallel, jobs.length) }, worker));
}

function worker(): void {
  process.on('message', (job: Job) => {
    process.send!(runJob(job));
  });
}

/** One flag per arrival: 1 where its key is of class `c` (a row of the run). */
function rowFlags(a: Arrivals, keyClass: readonly number[], c: number): Uint8Array {
  const only = new Uint8Array(a.t.length);
  for (let i = 0; i < only.length; i++) if (keyClass[a.key[i]!] === c) only[i] = 1;
  return only;
}

/** The local ceiling of a row's keys (their arrival times, `byKey`) at `n` nodes. */
function ceilingOf(run: RunDef, n: number, byKey: number[][]) {
  return localCeilingFigures(byKey, run.limit, run.windowMs, run.ceilingNodes?.(n) ?? n);
}

/**
 * `--recompute-ceiling FILE`: a saved report's ceiling figures (adm/ceiling, ceil den %) computed
 * again from each row's arrivals, which depend only on the row and N (the model of the ceiling
 * changed; the simulations did not): written back to FILE.
 */
function recomputeCeiling(file: string): void {
  const rep = JSON.parse(readFileSync(file, 'utf8')) as Report;
  const memo = new Map<string, ReturnType<typeof ceilingOf>>();
  for (const r of rep.rows) {
    const id = `${r.family}/${r.row}/${r.nodes}`;
    let c = memo.get(id);
    if (c === undefined) {
      const run = RUNS.find((x) => x.family === r.family && x.rows.includes(r.row));
      if (run === undefined) throw new Error(`no run for ${id}`);
      const { arrivals, keyClass } = run.build(r.nodes);
      c = ceilingOf(
        run,
        r.nodes,
        timesByKey(arrivals, rowFlags(arrivals, keyClass, run.rows.indexOf(r.row))),
      );
      memo.set(id, c);
    }
    r.admitted_vs_ceiling = ratio(r.admitted, c.admitted);
    r.ceiling_false_denials_pct = c.falseDenialsPct;
  }
  writeFileSync(file, `${JSON.stringify(rep, null, 2)}\n`);
  console.log(`wrote ${resolve(file)} (${memo.size} rows' ceilings)`);
}

async function main(): Promise<void> {
  const recompute = arg('recompute-ceiling');
  if (recompute !== undefined) return recomputeCeiling(resolve(recompute));
  const print = arg('print');
  if (print !== undefined) {
    // saved reports, as a run prints them
    const merged = mergeReports(print.split(',').map((f) => JSON.parse(readFileSync(f, 'utf8')) as Report));
    printReport(merged);
    const to = arg('out');
    if (to !== undefined) {
      writeFileSync(resolve(to), `${JSON.stringify(merged, null, 2)}\n`);
      console.log(`wrote ${resolve(to)}`);
    }
    return;
  }
  const here = dirname(fileURLToPath(import.meta.url));
  const out = resolve(arg('out') ?? join(here, 'results', 'two-sided.json'));
  const match = arg('rows');
  const nodesArg = arg('nodes');
  const nodeCounts = nodesArg === undefined ? NODE_COUNTS : nodesArg.split(',').map(Number);
  const parallel = Number(arg('jobs') ?? Math.min(2, availableParallelism()));
  const all = process.argv.includes('--all');
  const limitersArg = arg('limiters')?.split(',');
  if (limitersArg !== undefined && !limitersArg.every((l) => (SIM_LIMITERS as readonly string[]).includes(l)))
    throw new Error(`--limiters takes some of ${SIM_LIMITERS.join(', ')}, got ${limitersArg.join(', ')}`);
  const ranOf = (run: RunDef) =>
    (run.limiters ?? SIM_LIMITERS).filter((l) => limitersArg === undefined || limitersArg.includes(l));
  const skipped: { family: string; rows: string[]; nodes: number; estimated_s: number }[] = [];
  const selected = (family: string, row: string) => match === undefined || `${family}/${row}`.includes(match);
  const jobs: Job[] = [];
  RUNS.forEach((run, r) => {
    if (!run.rows.some((x) => selected(run.family, x))) return;
    for (const n of [...(nodesArg === undefined ? (run.extraNodes ?? []) : []), ...nodeCounts]) {
      if (run.only !== undefined && !run.only(n)) continue;
      const est = estimate(run, n);
      if (n >= LARGE && run.large !== true && !all) {
        skipped.push({ family: run.family, rows: run.rows, nodes: n, estimated_s: Math.round(est) });
        continue;
      }
      for (const limiter of ranOf(run)) jobs.push({ run: r, nodes: n, limiter });
    }
  });
  // the longest first (a pool of processes finishes sooner); the output does not depend on the order
  jobs.sort((a, b) => estimate(RUNS[b.run]!, b.nodes) - estimate(RUNS[a.run]!, a.nodes));
  let commit = 'unknown';
  try {
    commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim();
  } catch {
    // not a git checkout
  }
  const t0 = performance.now();
  const results = new Map<string, JobResult>();
  const id = (j: Omit<Job, 'limiter'>, l: string) => `${j.run}/${j.nodes}/${l}`;
  // --cache DIR: each job's result is kept there as it ends and taken from there on a later run
  // (a run cut short keeps what it finished; one tree per directory: nothing checks the code)
  const cache = arg('cache');
  const cacheFile = (j: Job) => {
    const run = RUNS[j.run]!;
    const name = `${run.family}-${run.rows.join('+')}-${j.nodes}-${j.limiter}`.replace(
      /[^A-Za-z0-9.+-]+/g,
      '_',
    );
    return join(resolve(cache!), `${name}.v8`);
  };
  const toRun: Job[] = [];
  for (const j of jobs) {
    if (cache !== undefined && existsSync(cacheFile(j))) {
      const r = deserialize(readFileSync(cacheFile(j))) as JobResult;
      results.set(id(j, j.limiter), { ...r, job: j });
    } else if (!process.argv.includes('--cached-only')) toRun.push(j);
  }
  if (cache !== undefined) mkdirSync(resolve(cache), { recursive: true });
  let finished = 0;
  await runJobs(toRun, parallel, (r) => {
    results.set(id(r.job, r.job.limiter), r);
    if (cache !== undefined) writeFileSync(cacheFile(r.job), serialize(r));
    finished++;
    const run = RUNS[r.job.run]!;
    process.stderr.write(
      `[${finished}/${toRun.length}] ${run.family} ${run.rows.join(' + ')} N = ${r.job.nodes} ${r.job.limiter}: ` +
        `${r.cpu_s.toFixed(1)} s CPU, ${r.wall_s.toFixed(1)} s wall (${((performance.now() - t0) / 1000).toFixed(0)} s in)\n`,
    );
  });
  const elapsed = (performance.now() - t0) / 1000;

  const rows: ResultRow[] = [];
  const cpuByFamily: Record<string, number> = {};
  const wallByFamily: Record<string, number> = {};
  RUNS.forEach((run, r) => {
    const family = run.family;
    for (const n of [...(nodesArg === undefined ? (run.extraNodes ?? []) : []), ...nodeCounts]) {
      const ran = ranOf(run);
      const got = ran.map((l) => results.get(id({ run: r, nodes: n }, l)));
      if (got.some((x) => x === undefined)) continue;
      const sims: Partial<Record<SimLimiter, LimiterRun>> = {};
      ran.forEach((l, i) => {
        const x = got[i]!;
        sims[l] = x.result;
        cpuByFamily[family] = round1((cpuByFamily[family] ?? 0) + x.cpu_s);
        wallByFamily[family] = round1((wallByFamily[family] ?? 0) + x.wall_s);
      });
      const { arrivals, keyClass } = run.build(n);
      const exact = exactByKey(arrivals, run.limit, run.windowMs);
      const firstW = firstWindowFlags(arrivals, run.windowMs);
      for (let c = 0; c < run.rows.length; c++) {
        if (!selected(family, run.rows[c]!)) continue;
        const only = rowFlags(arrivals, keyClass, c);
        const ceiling = ceilingOf(run, n, timesByKey(arrivals, only));
        for (const limiter of [...ran, 'exact' as const]) {
          const sim = limiter === 'exact' ? undefined : sims[limiter];
          const f = figuresOf(
            arrivals,
            sim?.admitted ?? exact,
            only,
            exact,
            firstW,
            ceiling.admitted,
            run.limit,
            run.windowMs,
            sim?.calls,
            sim?.latencyMs,
          );
          rows.push({
            family,
            row: run.rows[c]!,
            nodes: n,
            limiter,
            limit: run.limit,
            window_ms: run.windowMs,
            seconds: run.seconds(n),
            traffic: run.describe(n),
            ...f,
            denials_by_rule: sim === undefined ? {} : ruleHistogram(sim, only),
            ceiling_false_denials_pct: ceiling.falseDenialsPct,
            ...(sim?.msgsIn === undefined ? {} : { msgs_in_node_s: sim.msgsIn }),
          });
        }
      }
    }
  });
  const report: Report = {
    commit,
    node: process.version,
    cpu_s_by_family: cpuByFamily,
    wall_s_by_family: wallByFamily,
    elapsed_s: Math.round(elapsed),
    processes: Math.min(parallel, jobs.length),
    skipped,
    rows,
  };
  printReport(report);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`wrote ${out}`);
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}

/** What a run writes (and `--print` reads back). */
interface Report {
  commit: string;
  node: string;
  cpu_s_by_family: Record<string, number>;
  wall_s_by_family: Record<string, number>;
  elapsed_s: number;
  processes: number;
  skipped: { family: string; rows: string[]; nodes: number; estimated_s: number }[];
  rows: ResultRow[];
}

/**
 * Reports of several runs as one (`--print a.json,b.json`: runs split over node counts, say):
 * a later report's rows replace an earlier one's for the same row, nodes and limiter; times add up.
 */
function mergeReports(reports: Report[]): Report {
  const byId = new Map<string, ResultRow>();
  const key = (r: ResultRow) => `${r.family}/${r.row}/${r.nodes}/${r.limiter}`;
  for (const rep of reports)
    for (const r of rep.rows) {
      // reports written before rows carried their traffic: the run's words for it
      r.traffic ??=
        RUNS.find((x) => x.family === r.family && x.rows.includes(r.row))?.describe(r.nodes) ?? '';
      byId.set(key(r), r);
    }
  const order = (r: ResultRow) => {
    const run = RUNS.findIndex((x) => x.family === r.family && x.rows.includes(r.row));
    return [
      families().indexOf(r.family),
      run,
      r.nodes,
      RUNS[run]?.rows.indexOf(r.row) ?? 0,
      ['default', 'auto', 'naive', 'exact'].indexOf(r.limiter),
    ];
  };
  const rows = [...byId.values()].sort((a, b) => {
    const x = order(a);
    const y = order(b);
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
    return 0;
  });
  const add = (pick: (r: Report) => Record<string, number>) => {
    const out: Record<string, number> = {};
    for (const rep of reports)
      for (const [k, v] of Object.entries(pick(rep))) out[k] = round1((out[k] ?? 0) + v);
    return out;
  };
  const ran = new Set(rows.map((r) => `${r.family}/${r.row}/${r.nodes}`));
  return {
    commit: [...new Set(reports.map((r) => r.commit))].join(', '),
    node: [...new Set(reports.map((r) => r.node))].join(', '),
    cpu_s_by_family: add((r) => r.cpu_s_by_family),
    wall_s_by_family: add((r) => r.wall_s_by_family),
    elapsed_s: reports.reduce((s, r) => s + r.elapsed_s, 0),
    processes: Math.max(...reports.map((r) => r.processes ?? 2)),
    skipped: reports
      .flatMap((r) => r.skipped)
      .filter((s) => !s.rows.some((row) => ran.has(`${s.family}/${row}/${s.nodes}`))),
    rows,
  };
}

/** The families, in the order they print. */
function families(): string[] {
  return [...new Set(RUNS.map((r) => r.family))];
}

/** Print a report: a header, one table per family (a line per row, node count and limiter), the runs left out, the times. */
function printReport(rep: Report): void {
  console.log(
    `bench:two-sided at ${rep.commit}: default (the policy as written: name, limit, window; every decision local), ` +
      "auto (the same policy on a mesh that asks owners: placement 'auto' puts L < 4 N on the key's owner, docs/owner.md), " +
      "naive (overAdmission 'naive'), " +
      'exact (a sliding-window log over the same arrivals); simulator g = 100 ms, d = 10 ms, every member expected, ' +
      'the mesh as a node runs it by default (spread rounds; fast ticks while a key is tight: every (N - 1) ms, at least 10, up to 51 members; relay from 102 members; each node pulls the state of every other by sync at its start, as a mesh node does from each member it connects to)' +
      ', on timers up to 2 ms late and links up to 1 ms slower (defaultMesh); traffic from ' +
      `${WARMUP_MS / S} s after the mesh starts, once it has formed (the cold-start family and the seed trace: from its start).\n` +
      'false den %: of the requests the exact limiter admits on the same arrivals, the % this limiter denied ' +
      `(1st W: arrivals in their key's first window; after: the rest); on an over row (the exact limiter denies some) it also ` +
      'counts admitting other arrivals than the exact one. worst - L: the worst rolling window over keys, minus L. ' +
      'adm/ceiling: admitted against localCeilingAdmits (mean of 5 draws); ceil den %: the false denials of that ceiling on an under row, the fewest ' +
      'any limiter whose nodes decide alone and never pass L makes (expected; arrivals at one instant are decided on one holding ' +
      'of the units, as even as whole units go). calls/req, +ms: calls to other nodes and added latency. msgs in/s: gossip messages a node received a second over the run (early publishes and fast ticks included).',
  );
  for (const family of families()) {
    const rows = rep.rows.filter((r) => r.family === family);
    if (rows.length === 0) continue;
    console.log(
      `\n== ${family} (simulations: ${(rep.cpu_s_by_family[family] ?? 0).toFixed(1)} s of CPU, ` +
        `${(rep.wall_s_by_family[family] ?? 0).toFixed(1)} s wall)`,
    );
    // each traffic once, with the node counts it ran at
    const traffic = new Map<string, number[]>();
    for (const r of rows) {
      const ns = traffic.get(r.traffic) ?? [];
      if (!ns.includes(r.nodes)) ns.push(r.nodes);
      traffic.set(r.traffic, ns);
    }
    for (const [t, ns] of traffic) console.log(`  N = ${ns.join(', ')}: ${t}`);
    printTable(
      [
        'row',
        'N',
        'load',
        'limiter',
        'requests',
        'false den %',
        'ceil den %',
        '1st W %',
        'after %',
        'worst - L',
        'adm/exact',
        'adm/ceiling',
        'calls/req',
        '+ms',
        'msgs in/s',
        'denials by rule',
      ],
      rows.map((row, i) => {
        // the first line of a row and node count (a limiter of the row before, or none)
        const prev = rows[i - 1];
        const first = prev === undefined || prev.row !== row.row || prev.nodes !== row.nodes;
        return [
          first ? row.row : '',
          first ? row.nodes : '',
          first ? (row.exact < row.requests ? 'over' : 'under') : '',
          row.limiter,
          row.requests,
          row.false_denials_pct.toFixed(2),
          // under rows only: on an over row the exact limiter's own choice of arrivals weighs in
          first && row.exact === row.requests ? (row.ceiling_false_denials_pct?.toFixed(2) ?? '') : '',
          row.false_denials_first_w_pct.toFixed(2),
          row.false_denials_after_pct.toFixed(2),
          row.worst_window_minus_l,
          row.admitted_vs_exact.toFixed(4),
          row.admitted_vs_ceiling.toFixed(4),
          row.calls_per_request,
          row.added_latency_ms,
          row.msgs_in_node_s ?? '',
          row.limiter === 'exact' ? '' : rulesText(row.denials_by_rule),
        ];
      }),
    );
  }
  if (rep.skipped.length > 0) {
    console.log(
      `\nnot run at ${LARGE} nodes and up (CPU per limiter estimated; --all runs them):\n` +
        rep.skipped
          .map((s) => {
            // the estimate of this tree (a saved report may hold an older one)
            const run = RUNS.find((r) => r.family === s.family && r.rows[0] === s.rows[0]);
            const est = run === undefined ? s.estimated_s : Math.round(estimate(run, s.nodes));
            return `  ${s.family} (${s.rows.join(', ')}) N = ${s.nodes}: about ${est} s`;
          })
          .join('\n'),
    );
  }
  const list = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
  console.log(
    `\nsimulations by family, CPU s: ${list(rep.cpu_s_by_family)}; wall s (summed over processes): ` +
      `${list(rep.wall_s_by_family)}; ${rep.elapsed_s} s elapsed on ${rep.processes} processes`,
  );
}

/** The exact limiter's flags over `a`, key by key. */
function exactByKey(a: Arrivals, limit: number, windowMs: number): Uint8Array {
  const idx: number[][] = a.keys.map(() => []);
  for (let i = 0; i < a.t.length; i++) idx[a.key[i]!]!.push(i);
  const flags = new Uint8Array(a.t.length);
  for (const list of idx) {
    const f = exactFlags(
      list.map((i) => a.t[i]!),
      limit,
      windowMs,
    );
    list.forEach((i, j) => {
      flags[i] = f[j]!;
    });
  }
  return flags;
}

if (process.argv.includes('--worker')) worker();
else
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
