/**
 * Both errors live: the global rows of `bench:two-sided` (one key, L = 1,000 per 1 s, the policy
 * as a user writes it: name, limit, window) replayed in real time on a mesh of real node
 * processes on loopback. Every request is checked by the default rule and, right after on the
 * same node, by the naive rule (a second policy on the same key: its own counts), so both see the
 * same arrivals; the exact sliding-window log is run on the times the nodes decided. Printed
 * beside the simulator's prediction for the same arrivals, g and d (the bench's default mesh:
 * what `bench:two-sided` prints at g = 100 ms, d = 10 ms).
 *
 *   npm run mesh:two-sided -- [--nodes 8 (2 to 16)] [--rows 0.5L,0.9L,2L,step] [--gossip-ms 100]
 *                             [--fast-gossip auto|off]
 *                             [--delays 10] [--seconds 10] [--repeat 1]
 *
 * `--delays` injects that much delay into every gossip message (the simulator's d); loopback adds
 * its own, well under a millisecond when the box has CPU to spare. Writes
 * mesh-test/results/live-two-sided.json (8 nodes) or live-two-sided-n<N>.json.
 */
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { printTable } from '../bench/table.js';
import { fastGossipIntervalMs } from '../src/mesh/auto-relay.js';
import type { Trace } from '../src/sim/trace.js';
import {
  type Arrivals,
  defaultMesh,
  globalKeyArrivals,
  oneKeyFigures,
  type RateSegment,
  runSim,
  type TwoSidedFigures,
  WARMUP_MS,
} from '../src/sim/two-sided.js';
import type { PolicySpec } from '../src/types.js';
import { type DecisionRecord, ensureDir, killAllChildren, Mesh, ROOT, readDecisions } from './harness.js';
import { replayLive, round, sum } from './replay.js';

const L = 1000;
const W = 1000;
/** The policy as a user writes it (every other option its default), and the naive rule beside it. */
const DEFAULT_POLICY: PolicySpec = { name: 'global', limit: L, windowMs: W };
const NAIVE_POLICY: PolicySpec = { name: 'global-naive', limit: L, windowMs: W, overAdmission: 'naive' };

/** bench:two-sided's global rows, over `ms`. */
export const LIVE_ROWS: Record<string, (ms: number) => RateSegment[]> = {
  '0.5L': (ms) => [[500, 0, ms]],
  '0.9L': (ms) => [[900, 0, ms]],
  '2L': (ms) => [[2000, 0, ms]],
  step: (ms) => [
    [500, 0, ms / 2],
    [2000, ms / 2, ms],
  ],
};

/** The two limiters' decisions on the arrivals as the nodes served them, in order of decision time. */
export interface LiveArrivals {
  arrivals: Arrivals;
  /** The default rule's decisions, 1 = admitted, one per arrival. */
  controlled: Uint8Array;
  /** The naive rule's, on the same arrivals. */
  naive: Uint8Array;
}

/**
 * Pairs each node's decisions by the default rule (`primary[i]`) with its decisions by the naive
 * rule (`also[i]`: the same requests, one check each right after the primary one, so in the same
 * order) and merges the nodes by the primary decision's time (ties keep node order). Throws when
 * a node's two lists differ in length (a check of one policy was lost).
 */
export function pairLive(
  primary: readonly DecisionRecord[][],
  also: readonly DecisionRecord[][],
): LiveArrivals {
  if (primary.length !== also.length) throw new Error('pairLive: decisions of different meshes');
  const rows: { t: number; node: number; c: number; n: number }[] = [];
  primary.forEach((p, i) => {
    const a = also[i]!;
    if (p.length !== a.length)
      throw new Error(
        `pairLive: node ${i} decided ${p.length} requests by one rule and ${a.length} by the other`,
      );
    for (let j = 0; j < p.length; j++)
      rows.push({ t: p[j]!.t, node: i, c: p[j]!.allowed ? 1 : 0, n: a[j]!.allowed ? 1 : 0 });
  });
  // a stable sort: equal times keep node order, and a node's own in the order it decided them
  rows.sort((x, y) => x.t - y.t);
  return {
    arrivals: {
      t: rows.map((r) => r.t),
      node: rows.map((r) => r.node),
      key: rows.map(() => 0),
      keys: ['global'],
    },
    controlled: Uint8Array.from(rows, (r) => r.c),
    naive: Uint8Array.from(rows, (r) => r.n),
  };
}

/** Both errors of a limiter that admitted `admitted` on `a` (one key, L per W), against the exact log on the same arrivals. */
export function bothErrors(a: Arrivals, admitted: Uint8Array): TwoSidedFigures {
  return oneKeyFigures(a, admitted, L, W);
}

interface LiveTwoSidedRow {
  row: string;
  nodes: number;
  g_ms: number;
  d_ms: number;
  /** The engines' expectedDelayMs (the harness's default: the injected d). */
  expected_delay_ms: number;
  /** fastGossipIntervalMs 'auto' (the default) on every node; false: 0 (off). */
  fast_gossip: boolean;
  /** Gossip ticks a node a second over the replay, the mean over nodes (g = 100 ms: 10). */
  ticks_per_s: number;
  /** Where the default rule's worst rolling window starts, ms from the replay's start, and what each node admitted in it. */
  worst_window_at_ms: number;
  worst_window_by_node: number[];
  /** The default rule's decisions by mode and outcome, over every node. */
  modes: Record<string, number>;
  seconds: number;
  /** Requests the trace sent, and the ones the nodes served (a node too slow to start skips none: it serves late). */
  requests: number;
  served: number;
  live: { default: TwoSidedFigures; naive: TwoSidedFigures };
  sim: { default: TwoSidedFigures; naive: TwoSidedFigures };
  /** How late the worst node served its requests at the 99th percentile, ms, and its gossip ticks as a % of those due. */
  late_p99_ms: number;
  ticks_pct_min: number;
  cpu_pct_total: number;
  load_avg: [number, number];
}

/** Where the rolling window [s, s + W) holding the most admitted requests starts (the first such). */
export function worstWindowAt(t: readonly number[], admitted: Uint8Array): number {
  const at: number[] = [];
  for (let i = 0; i < t.length; i++) if (admitted[i]) at.push(t[i]!);
  let best = -1;
  let from = Number.NaN;
  let j = 0;
  for (let i = 0; i < at.length; i++) {
    while (j < at.length && at[j]! < at[i]! + W) j++;
    if (j - i > best) {
      best = j - i;
      from = at[i]!;
    }
  }
  return from;
}

/** What each node admitted by the default rule in [from, from + W). */
function byNodeIn(live: LiveArrivals, from: number): number[] {
  const out: number[] = [];
  const { t, node } = live.arrivals;
  for (let i = 0; i < t.length; i++) {
    while (out.length <= node[i]!) out.push(0);
    if (live.controlled[i] && t[i]! >= from && t[i]! < from + W) out[node[i]!]!++;
  }
  return out;
}

/** Decisions by mode and outcome ('global admitted', 'fallback denied', ...). */
function modesOf(decisions: readonly DecisionRecord[][]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const d of decisions.flat()) {
    const k = `${d.mode} ${d.allowed ? 'admitted' : 'denied'}`;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/** The simulator's run of the same arrivals (as planned), g and d on the bench's default mesh. */
function predict(planned: Arrivals, nodes: number, g: number, d: number, fast: boolean, expected?: number) {
  const base = defaultMesh(nodes);
  const mesh = {
    ...base,
    gossipIntervalMs: g,
    delayMs: d,
    // as the live nodes pick it (fastGossipIntervalMs 'auto'), or off
    fastGossipMs: fast ? fastGossipIntervalMs(nodes, g, expected ?? d) : 0,
    ...(expected === undefined ? {} : { engine: { ...base.engine, expectedDelayMs: expected } }),
  };
  const shifted = { ...planned, t: planned.t.map((t) => t + WARMUP_MS) };
  return {
    default: bothErrors(shifted, runSim(mesh, DEFAULT_POLICY, shifted).admitted),
    naive: bothErrors(shifted, runSim(mesh, NAIVE_POLICY, shifted).admitted),
  };
}

async function liveTwoSidedRow(
  row: string,
  nodes: number,
  g: number,
  d: number,
  seconds: number,
  fast: boolean,
  expected?: number,
): Promise<LiveTwoSidedRow> {
  const planned = globalKeyArrivals(nodes, LIVE_ROWS[row]!(seconds * 1000));
  const trace: Trace = { t: Float64Array.from(planned.t), node: Uint8Array.from(planned.node), nodes };
  const load0 = round(loadavg()[0]!, 1);
  const mesh = await Mesh.start(
    {
      nodes,
      policies: [DEFAULT_POLICY, NAIVE_POLICY],
      gossipIntervalMs: g,
      injectDelayMs: d,
      ...(expected === undefined ? {} : { expectedDelayMs: expected }),
      ...(fast ? {} : { fastGossipIntervalMs: 0 }),
    },
    60_000,
  );
  try {
    await mesh.waitForPeers(30_000);
    const naiveFile = (i: number) => join(mesh.dir, `naive-${i}.bin`);
    const out = await replayLive(mesh, trace, {
      policy: DEFAULT_POLICY.name,
      key: 'global',
      extra: (i) => ({ also: [{ policy: NAIVE_POLICY.name, decisionFile: naiveFile(i) }] }),
    });
    const reps = out.reports;
    if (reps.length !== nodes) throw new Error(`only ${reps.length} of ${nodes} nodes reported`);
    const live = pairLive(
      out.decisions,
      out.decisions.map((_, i) => readDecisions(naiveFile(i))),
    );
    const worstAt = worstWindowAt(live.arrivals.t, live.controlled);
    if (process.env.TWO_SIDED_DUMP)
      writeFileSync(
        process.env.TWO_SIDED_DUMP,
        JSON.stringify({ t: live.arrivals.t, node: live.arrivals.node, c: [...live.controlled] }),
      );
    return {
      row,
      nodes,
      g_ms: g,
      d_ms: d,
      seconds,
      requests: planned.t.length,
      served: live.arrivals.t.length,
      live: {
        default: bothErrors(live.arrivals, live.controlled),
        naive: bothErrors(live.arrivals, live.naive),
      },
      sim: predict(planned, nodes, g, d, fast, expected),
      fast_gossip: fast,
      expected_delay_ms: expected ?? d,
      worst_window_at_ms: worstAt,
      worst_window_by_node: byNodeIn(live, worstAt),
      modes: modesOf(out.decisions),
      late_p99_ms: round(Math.max(...reps.map((r) => r.lateMs.p99)), 2),
      ticks_pct_min: round(Math.min(...reps.map((r) => (r.gossip.ticks / (r.wallMs / g)) * 100)), 1),
      ticks_per_s: round(sum(reps.map((r) => r.gossip.ticks / (r.wallMs / 1000))) / reps.length, 1),
      cpu_pct_total: round(sum(reps.map((r) => r.cpuPct)), 1),
      load_avg: [load0, round(loadavg()[0]!, 1)],
    };
  } finally {
    await mesh.close();
  }
}

function printRows(rows: LiveTwoSidedRow[]): void {
  const cells: (string | number)[][] = [];
  for (const r of rows) {
    for (const lim of ['default', 'naive'] as const) {
      const a = r.live[lim];
      const s = r.sim[lim];
      cells.push([
        lim === 'default' ? r.row : '',
        lim === 'default' ? r.nodes : '',
        lim === 'default' ? r.g_ms : '',
        lim === 'default' ? r.d_ms : '',
        lim,
        lim === 'default' ? `${r.served} / ${r.requests}` : '',
        `${a.exact} / ${s.exact}`,
        `${a.false_denials_pct.toFixed(2)} / ${s.false_denials_pct.toFixed(2)}`,
        `${a.worst_window_minus_l} / ${s.worst_window_minus_l}`,
        `${a.admitted_vs_exact.toFixed(4)} / ${s.admitted_vs_exact.toFixed(4)}`,
        lim === 'default' ? r.late_p99_ms : '',
        lim === 'default' ? r.ticks_pct_min : '',
        lim === 'default' ? r.cpu_pct_total : '',
        lim === 'default' ? r.load_avg.join('→') : '',
      ]);
    }
  }
  printTable(
    [
      'row',
      'N',
      'g ms',
      'd ms',
      'limiter',
      'served',
      'exact admits live/sim',
      'false den % live/sim',
      'worst - L live/sim',
      'adm/exact live/sim',
      'late p99 ms',
      'ticks %',
      'cpu %',
      'load 1m',
    ],
    cells,
  );
}

function args() {
  const { values } = parseArgs({
    options: {
      nodes: { type: 'string', default: '8' },
      rows: { type: 'string', default: '0.5L,0.9L,2L' },
      'gossip-ms': { type: 'string', default: '100' },
      delays: { type: 'string', default: '10' },
      seconds: { type: 'string', default: '10' },
      repeat: { type: 'string', default: '1' },
      'expected-delay-ms': { type: 'string' },
      'fast-gossip': { type: 'string', default: 'auto' },
    },
  });
  const num = (s: string, name: string, min: number, max: number) =>
    s.split(',').map((x) => {
      const v = Number(x.trim());
      if (!Number.isFinite(v) || v < min || v > max)
        throw new Error(`--${name}: ${x} not in [${min}, ${max}]`);
      return v;
    });
  const rows = values.rows.split(',').map((x) => x.trim());
  if (values['fast-gossip'] !== 'auto' && values['fast-gossip'] !== 'off')
    throw new Error(`--fast-gossip: ${values['fast-gossip']} is not auto or off`);
  for (const r of rows)
    if (LIVE_ROWS[r] === undefined)
      throw new Error(`--rows: ${r} is not one of ${Object.keys(LIVE_ROWS).join(', ')}`);
  return {
    nodes: num(values.nodes, 'nodes', 2, 16)[0]!,
    rows,
    gossip: num(values['gossip-ms'], 'gossip-ms', 10, 1000),
    delays: num(values.delays, 'delays', 0, 100),
    seconds: num(values.seconds, 'seconds', 2, 30)[0]!,
    repeat: num(values.repeat, 'repeat', 1, 10)[0]!,
    fast: values['fast-gossip'] === 'auto',
    expected:
      values['expected-delay-ms'] === undefined
        ? undefined
        : num(values['expected-delay-ms'], 'expected-delay-ms', 0, 1000)[0]!,
  };
}

async function main(): Promise<void> {
  const a = args();
  console.log(
    `live mesh, both errors: ${a.nodes} node processes on 127.0.0.1; one key, L = ${L} per ${W} ms, ` +
      `the default policy (k = 10, controlled) and the naive rule checked on every request, the exact log on the ` +
      `times the nodes decided; rows ${a.rows.join(', ')} over ${a.seconds} s, nodes drawn uniformly; ` +
      `g = ${a.gossip.join(',')} ms (fast gossip ${a.fast ? 'auto' : 'off'}), injected d = ${a.delays.join(',')} ms, engines expecting ${a.expected === undefined ? 'd' : `${a.expected} ms`} of delay; sim: bench:two-sided's default mesh ` +
      `at that g and d on the same arrivals; load average ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}`,
  );
  const rows: LiveTwoSidedRow[] = [];
  for (let k = 0; k < a.repeat; k++)
    for (const g of a.gossip)
      for (const d of a.delays)
        for (const row of a.rows) {
          const r = await liveTwoSidedRow(row, a.nodes, g, d, a.seconds, a.fast, a.expected);
          rows.push(r);
          console.log(
            `  ${row} g=${g} d=${d}: false denials ${r.live.default.false_denials_pct} % (sim ${r.sim.default.false_denials_pct}), ` +
              `worst - L ${r.live.default.worst_window_minus_l} at ${Math.round(r.worst_window_at_ms)} ms, by node ${r.worst_window_by_node.join('/')} (sim ${r.sim.default.worst_window_minus_l}); naive ` +
              `${r.live.naive.false_denials_pct} % / ${r.live.naive.worst_window_minus_l}; late p99 ${r.late_p99_ms} ms; ticks ${r.ticks_per_s} a node a second; ${JSON.stringify(r.modes)}`,
          );
        }
  console.log('');
  printRows(rows);
  const dir = join(ROOT, 'mesh-test', 'results');
  ensureDir(dir);
  const name = `live-two-sided${a.nodes === 8 ? '' : `-n${a.nodes}`}${a.fast ? '' : '-fast-off'}.json`;
  writeFileSync(join(dir, name), `${JSON.stringify(rows, null, 2)}\n`);
  console.log(`wrote mesh-test/results/${name}`);
}

if (process.argv[1]?.endsWith('two-sided.ts') && process.argv[1].includes('mesh-test')) {
  main().then(
    () => process.exit(),
    (err: unknown) => {
      console.error(err);
      killAllChildren();
      process.exit(1);
    },
  );
}
