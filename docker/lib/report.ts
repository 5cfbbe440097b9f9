/** Trace, figures, the simulator's prediction, rows and checks: what the run prints and writes. */
import { type AccuracyRow, gossipRow } from '../../bench/accuracy.js';
import { gcraBound } from '../../src/sim/baselines.js';
import { round, rowFigures, slidingLogAdmits } from '../../src/sim/metrics.js';
import { type Cut, replayTrace } from '../../src/sim/simulator.js';
import { seedTrace, type Trace } from '../../src/sim/trace.js';
import { D, G, L, SCALE, SEED, W } from './config.js';
import { admittedTimes, type Replay } from './replay.js';

// ---------------------------------------------------------------- trace, figures, prediction

/** The seed trace, its first `seconds` × 2,000 × SCALE requests, node i mod N, at 2,000 × SCALE per s. */
export function dockerTrace(nodes: number, seconds: number): Trace {
  const full = seedTrace(Math.round(seconds * 2000 * SCALE));
  const node = new Uint8Array(full.node.length);
  for (let i = 0; i < node.length; i++) node[i] = full.node[i]! % nodes;
  // --scale S: the same requests spread S times thinner (2,000 x S per s), against L = 1,000 x S
  const t = SCALE === 1 ? full.t : full.t.map((x) => x / SCALE);
  return { t, node, nodes };
}

export function figures(trace: Trace, admitted: number[]) {
  return rowFigures(
    admitted,
    gcraBound(trace, 1 / SCALE, Math.round(96 * SCALE)),
    slidingLogAdmits(trace.t, L, W).length,
  );
}

/** The simulator's row for this run: gossipRow itself for the 8-node 10 s trace, else the same replay. */
export function predicted(trace: Trace, cut?: Cut): AccuracyRow {
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

// ---------------------------------------------------------------- printing

export function rowCells(label: string, r: AccuracyRow): (string | number)[] {
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
export const ROW_HEADER = [
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

export interface Check {
  what: string;
  value: number | string;
  bound: string;
  ok: boolean;
}
export const check = (what: string, value: number | string, bound: string, ok: boolean): Check => ({
  what,
  value,
  bound,
  ok,
});

export interface DrillOutcome {
  name: string;
  row: AccuracyRow & Record<string, unknown>;
  checks: Check[];
}

export function liveRow(
  trace: Trace,
  r: Replay,
  msgs: number,
  bytes: number,
  cut: string | null,
): AccuracyRow {
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
export function rates(
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

export const mean = (xs: number[]) => {
  const ok = xs.filter((x) => Number.isFinite(x));
  return ok.length ? ok.reduce((a, b) => a + b, 0) / ok.length : Number.NaN;
};
