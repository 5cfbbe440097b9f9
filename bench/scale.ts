/**
 * How the gossip plane scales (issue 13), in the simulator with the production engine:
 *
 * - nodes: N ∈ {8 … 1024}, one key, L = 1000 per 1 s, k = 50, 2,000 req/s spread
 *   uniformly over the nodes, g = 100 ms, d = 10 ms, 10 s;
 * - keys: K ∈ {1, 100, 1k, 10k, 100k} at N = 8 and N = 64, 5,000 req/s Zipf(1) over
 *   the K keys, per-key L = 20 per 10 s, k = 10, g = 100 ms, d = 10 ms, 30 s.
 *
 * Every row: admitted against an exact central sliding-window log on the same
 * arrivals (per key), the ceiling of any limiter whose nodes decide alone and never pass L
 * (against the same exact limiter), admitted against that ceiling, the worst window over keys minus L, messages and bytes
 * received per node per second, bytes received per node per cluster request,
 * the largest message, and the engine's wall time per node per second.
 *
 *   npx tsx bench/scale.ts [--only nodes|keys] [--design broadcast,relay,default] [--nodes 8,16] [--keys 1,100]
 *     [--seconds S] [--out FILE]
 *   npx tsx bench/scale.ts --print [--only nodes]   (the rows saved, as printed)
 *   npx tsx bench/scale.ts --fill-ceiling   (the ceiling of saved rows that lack it: no simulation)
 *   npx tsx bench/scale.ts --steady [--design ...] [--nodes ...] [--seconds 30] [--print]
 *     (the nodes rows run for 30 s, with admitted and the ceiling also counted from 10 s on:
 *     the steady part, without the start's burst; writes bench/results/scale-steady.json)
 *
 * Writes bench/results/scale.json (merged by row: a partial run replaces its rows only).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { localCeilingAdmits, round, slidingLogAdmits, worstRolling } from '../src/sim/metrics.js';
import { Prng } from '../src/sim/prng.js';
import { Simulator } from '../src/sim/simulator.js';
import type { PolicySpec } from '../src/types.js';

const here = dirname(fileURLToPath(import.meta.url));
/** The results file; `--out FILE` writes another (two runs at once must not share one). */
const OUT = (() => {
  const i = process.argv.indexOf('--out');
  if (i >= 0) return resolve(process.argv[i + 1]!);
  return resolve(
    here,
    process.argv.includes('--steady') ? 'results/scale-steady.json' : 'results/scale.json',
  );
})();

/**
 * The gossip design a row measures: `broadcast` (relayFanout 0), `relay` (relayFanout FANOUT),
 * `default` (relayFanout left out, 'auto': broadcast up to 101 members at g = 100 ms, relay at
 * fanout 4 above; src/mesh/auto-relay.ts).
 */
export type Design = 'broadcast' | 'relay' | 'default';

export interface ScaleRow {
  /** `nodes`: N grows, one key, L = 1000 per 1 s; `keys`: K grows, L = 20 per 10 s. */
  series: 'nodes' | 'keys';
  design: Design;
  nodes: number;
  keys: number;
  requests: number;
  admitted: number;
  exact: number;
  admitted_vs_bound: number;
  /**
   * The most a limiter whose nodes decide alone can admit without passing L, against the exact
   * limiter's (localCeilingAdmits in src/sim/metrics.ts, the mean of CEILING_DRAWS draws).
   */
  ceiling: number;
  /** admitted against that ceiling. */
  admitted_vs_ceiling: number;
  /** Worst over keys of (worst rolling window − L); negative when no window reached L. */
  worst_1s: number;
  msgs_in_per_s_node: number;
  bytes_in_per_s_node: number;
  bytes_in_per_request_node: number;
  max_msg_bytes: number;
  engine_ms_per_s_node: number;
  /** Simulated seconds of the row (10 for nodes, 30 for keys, unless run shorter: the big broadcast rows). */
  seconds: number;
  /** Wall time of the row, s. */
  wall_s: number;
  /**
   * `--steady` rows only: the same figures over the run's steady part, from `steady_from_s` to
   * its end (the first windows, where every node starts at once and the exact limiter admits L
   * in a burst, left out): admitted against the exact limiter's admissions there, and the
   * ceiling's.
   */
  steady_from_s?: number;
  admitted_vs_bound_steady?: number;
  ceiling_steady?: number;
  admitted_vs_ceiling_steady?: number;
}

interface Shape {
  nodes: number;
  keys: number;
  rate: number;
  limit: number;
  windowMs: number;
  buckets: number;
  seconds: number;
}

/** Ranks 0..K-1 drawn with P(r) ∝ 1 / (r + 1). */
function zipf(K: number, prng: Prng): () => number {
  if (K === 1) return () => 0;
  const cdf = new Float64Array(K);
  let s = 0;
  for (let r = 0; r < K; r++) {
    s += 1 / (r + 1);
    cdf[r] = s;
  }
  return () => {
    const u = prng.next() * s;
    let lo = 0;
    let hi = K - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

export function runRow(
  series: ScaleRow['series'],
  design: Design,
  shape: Shape,
  steadyFromMs?: number,
): ScaleRow {
  const { nodes, keys, limit, windowMs, buckets, seconds } = shape;
  const policy: PolicySpec = {
    name: 'p',
    limit,
    windowMs,
    buckets,
    overAdmission: 'controlled',
    fallback: true,
  };
  const sim = new Simulator({
    nodes,
    policies: [policy],
    gossipIntervalMs: 100,
    delayMs: 10,
    seed: 7,
    timeEngine: true,
    // every node knows the mesh size at start (a deployment's expectedMembers): L/N until it hears everyone
    engine: {
      maxPeers: Math.max(256, nodes),
      expectedMembers: nodes,
      ...(design === 'relay' && STALE !== undefined ? { staleAfterMs: STALE } : {}),
      ...(design === 'relay' && HOPS !== undefined ? { relayHops: HOPS } : {}),
    },
    ...(design === 'relay' ? { relay: { fanout: FANOUT } } : design === 'default' ? { relay: 'auto' } : {}),
  });
  const draw = drawArrivals(shape);
  const arrivals: number[][] = Array.from({ length: keys }, () => []);
  const admittedAt: number[][] = Array.from({ length: keys }, () => []);
  const names = Array.from({ length: keys }, (_, k) => `k${k}`);
  let admitted = 0;
  const t0 = performance.now();
  for (let i = 0; i < draw.keys.length; i++) {
    const t = i * draw.step;
    const k = draw.keys[i]!;
    sim.runUntil(t);
    arrivals[k]!.push(t);
    if (sim.request(draw.nodes[i]!, 'p', names[k]!).allowed) {
      admitted++;
      admittedAt[k]!.push(t);
    }
  }
  const wall = (performance.now() - t0) / 1000;
  let worst = Number.NEGATIVE_INFINITY;
  for (let k = 0; k < keys; k++) {
    if (arrivals[k]!.length === 0) continue;
    const w = worstRolling(admittedAt[k]!, windowMs) - limit;
    if (w > worst) worst = w;
  }
  const { exact, ceiling, exactSteady, ceilingSteady } = bounds(arrivals, shape, steadyFromMs);
  const n = draw.keys.length;
  let admittedSteady = 0;
  if (steadyFromMs !== undefined)
    for (const times of admittedAt) for (const t of times) if (t >= steadyFromMs) admittedSteady++;
  const durS = (n * draw.step) / 1000;
  return {
    series,
    design,
    nodes,
    keys,
    requests: n,
    admitted,
    exact,
    admitted_vs_bound: round(admitted / exact),
    ceiling: round(ceiling / exact),
    admitted_vs_ceiling: round(admitted / ceiling),
    worst_1s: worst,
    msgs_in_per_s_node: round(sim.delivered / nodes / durS, 1),
    bytes_in_per_s_node: Math.round(sim.deliveredBytes / nodes / durS),
    bytes_in_per_request_node: round(sim.deliveredBytes / nodes / n, 1),
    max_msg_bytes: sim.maxMessageBytes,
    engine_ms_per_s_node: round(sim.engineMs / nodes / durS, 1),
    seconds,
    wall_s: round(wall, 1),
    ...(steadyFromMs === undefined
      ? {}
      : {
          steady_from_s: steadyFromMs / 1000,
          admitted_vs_bound_steady: round(admittedSteady / exactSteady),
          ceiling_steady: round(ceilingSteady / exactSteady),
          admitted_vs_ceiling_steady: round(admittedSteady / ceilingSteady),
        }),
  };
}

/** Draws of the ceiling oracle averaged per row. */
const CEILING_DRAWS = 5;

/**
 * What the exact limiter admits on `arrivals` (per key), and the ceiling's mean over
 * CEILING_DRAWS draws; with `steadyFromMs`, also both counted from then on.
 */
function bounds(
  arrivals: number[][],
  shape: Shape,
  steadyFromMs = Number.POSITIVE_INFINITY,
): { exact: number; ceiling: number; exactSteady: number; ceilingSteady: number } {
  let exact = 0;
  let ceiling = 0;
  let exactSteady = 0;
  let ceilingSteady = 0;
  for (let d = 0; d < CEILING_DRAWS; d++) {
    const prng = new Prng(101 + d);
    for (const times of arrivals) {
      if (times.length === 0) continue;
      if (d === 0) {
        const ex = slidingLogAdmits(times, shape.limit, shape.windowMs);
        exact += ex.length;
        exactSteady += countFrom(ex, steadyFromMs);
      }
      const ce = localCeilingAdmits(times, shape.limit, shape.windowMs, shape.nodes, prng);
      ceiling += ce.length;
      ceilingSteady += countFrom(ce, steadyFromMs);
    }
  }
  return {
    exact,
    ceiling: ceiling / CEILING_DRAWS,
    exactSteady,
    ceilingSteady: ceilingSteady / CEILING_DRAWS,
  };
}

/** How many of `times` (ascending) are at or after `from`. */
function countFrom(times: readonly number[], from: number): number {
  let n = 0;
  for (let i = times.length - 1; i >= 0 && times[i]! >= from; i--) n++;
  return n;
}

/** A row's arrivals in order, one every `step` ms: the node and the key of each. */
function drawArrivals(shape: Shape): { nodes: Int32Array; keys: Int32Array; step: number } {
  const prng = new Prng(11);
  const pick = zipf(shape.keys, prng);
  const n = Math.round(shape.rate * shape.seconds);
  const nodes = new Int32Array(n);
  const keys = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    nodes[i] = Math.floor(prng.next() * shape.nodes);
    keys[i] = pick();
  }
  return { nodes, keys, step: 1000 / shape.rate };
}

/** The arrival times of a row, per key (as runRow sees them). */
function arrivalsOf(shape: Shape): number[][] {
  const { keys, step } = drawArrivals(shape);
  const arrivals: number[][] = Array.from({ length: shape.keys }, () => []);
  for (let i = 0; i < keys.length; i++) arrivals[keys[i]!]!.push(i * step);
  return arrivals;
}

const FANOUT = Number(process.env.FANOUT ?? 4);
/** An override of staleAfterMs for relay rows (default: the engine's, from relayHops). */
const STALE = process.env.STALE === undefined ? undefined : Number(process.env.STALE);
/** An override of relayHops for relay rows (default: expectedRelayHops(N, FANOUT)). */
const HOPS = process.env.HOPS === undefined ? undefined : Number(process.env.HOPS);
export const NODE_COUNTS = [8, 16, 32, 64, 128, 256, 512, 1024];
/** `--steady`: the nodes rows it runs by default, for how long, and from when it counts the steady part. */
const STEADY_NODE_COUNTS = [8, 16, 32, 64, 128, 256];
const STEADY_SECONDS = 30;
const STEADY_FROM_S = 10;
export const KEY_COUNTS = [1, 100, 1_000, 10_000, 100_000];

/** The traffic of a row of `series`. */
function shapeOf(series: ScaleRow['series'], nodes: number, keys: number, seconds: number): Shape {
  return series === 'nodes'
    ? { nodes, keys, rate: 2000, limit: 1000, windowMs: 1000, buckets: 50, seconds }
    : { nodes, keys, rate: 5000, limit: 20, windowMs: 10_000, buckets: 10, seconds };
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function list(name: string, def: number[]): number[] {
  const v = arg(name);
  return v === undefined ? def : v.split(',').map(Number);
}

const COLS: (keyof ScaleRow)[] = [
  'design',
  'nodes',
  'keys',
  'admitted_vs_bound',
  'ceiling',
  'admitted_vs_ceiling',
  'worst_1s',
  'msgs_in_per_s_node',
  'bytes_in_per_s_node',
  'bytes_in_per_request_node',
  'max_msg_bytes',
  'engine_ms_per_s_node',
  'seconds',
  'wall_s',
];

/** The columns of `--steady` rows. */
const STEADY_COLS: (keyof ScaleRow)[] = [
  'design',
  'nodes',
  'admitted_vs_bound',
  'ceiling',
  'steady_from_s',
  'admitted_vs_bound_steady',
  'ceiling_steady',
  'admitted_vs_ceiling_steady',
  'worst_1s',
  'seconds',
  'wall_s',
];

function columns(): (keyof ScaleRow)[] {
  return process.argv.includes('--steady') ? STEADY_COLS : COLS;
}

function printRow(r: ScaleRow): void {
  console.log(
    columns()
      .map((c) => String(r[c]).padStart(c === 'design' ? 10 : 12))
      .join(' '),
  );
}

function main(): void {
  if (process.argv.includes('--print')) {
    // the rows of the results file as the runs printed them
    const saved: ScaleRow[] = JSON.parse(readFileSync(OUT, 'utf8')).rows;
    const only = arg('only');
    const cols = columns();
    console.log(['series', ...cols].map((c) => c.padStart(c === 'design' ? 10 : 12)).join(' '));
    for (const r of saved) {
      r.seconds ??= r.series === 'nodes' ? 10 : 30;
      if (only !== undefined && r.series !== only) continue;
      const cells = cols.map((c) => String(r[c]).padStart(c === 'design' ? 10 : 12));
      console.log([r.series.padStart(12), ...cells].join(' '));
    }
    return;
  }
  if (process.argv.includes('--fill-ceiling')) {
    const saved: ScaleRow[] = JSON.parse(readFileSync(OUT, 'utf8')).rows;
    for (const r of saved) {
      if (r.ceiling !== undefined) continue;
      const shape = shapeOf(r.series, r.nodes, r.keys, r.seconds ?? (r.series === 'nodes' ? 10 : 30));
      const { exact, ceiling } = bounds(arrivalsOf(shape), shape);
      if (exact !== r.exact)
        throw new Error(`row ${r.series}/${r.design}/${r.nodes}/${r.keys}: other arrivals`);
      r.ceiling = round(ceiling / exact);
      r.admitted_vs_ceiling = round(r.admitted / ceiling);
    }
    save(saved);
    console.log(`filled the ceiling of ${OUT}`);
    return;
  }
  const designs = (arg('design') ?? 'broadcast,relay').split(',') as Design[];
  const seconds = arg('seconds');
  const rows: ScaleRow[] = [];
  console.log(
    columns()
      .map((c) => c.padStart(c === 'design' ? 10 : 12))
      .join(' '),
  );
  if (process.argv.includes('--steady')) {
    // The nodes rows run long, and counted from STEADY_FROM_S on as well (see ScaleRow.steady_from_s).
    for (const design of designs)
      for (const nodes of list('nodes', STEADY_NODE_COUNTS)) {
        const shape = shapeOf('nodes', nodes, 1, seconds ? Number(seconds) : STEADY_SECONDS);
        const r = runRow('nodes', design, shape, STEADY_FROM_S * 1000);
        rows.push(r);
        printRow(r);
        save([r]);
      }
    console.log(`wrote ${OUT}`);
    return;
  }
  const only = arg('only');
  if (only === undefined || only === 'nodes') {
    for (const design of designs)
      for (const nodes of list('nodes', NODE_COUNTS)) {
        const r = runRow('nodes', design, shapeOf('nodes', nodes, 1, seconds ? Number(seconds) : 10));
        rows.push(r);
        printRow(r);
        save([r]);
      }
  }
  if (only === undefined || only === 'keys') {
    for (const design of designs)
      for (const nodes of list('nodes', [8, 64]))
        for (const keys of list('keys', KEY_COUNTS)) {
          const r = runRow('keys', design, shapeOf('keys', nodes, keys, seconds ? Number(seconds) : 30));
          rows.push(r);
          printRow(r);
          save([r]);
        }
  }
  console.log(`wrote ${OUT}`);
}

/** Merge `rows` into the results file by (design, nodes, keys): a partial run replaces its rows only. */
function save(rows: ScaleRow[]): void {
  const old: ScaleRow[] = existsSync(OUT) ? JSON.parse(readFileSync(OUT, 'utf8')).rows : [];
  // rows written before rows carried their seconds ran the default
  for (const r of old) r.seconds ??= r.series === 'nodes' ? 10 : 30;
  const id = (r: ScaleRow) => `${r.series}/${r.design}/${r.nodes}/${r.keys}`;
  const fresh = new Set(rows.map(id));
  const merged = [...old.filter((r) => !fresh.has(id(r))), ...rows];
  merged.sort(
    (a, b) =>
      b.series.localeCompare(a.series) ||
      a.design.localeCompare(b.design) ||
      a.nodes - b.nodes ||
      a.keys - b.keys,
  );
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify({ node: process.version, rows: merged }, null, 2)}\n`);
}

main();
