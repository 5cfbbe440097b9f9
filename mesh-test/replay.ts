/**
 * Live replay of a trace on a mesh of real node processes, and the figures of
 * the simulator's rows (bench/accuracy.ts) computed from what the nodes admitted.
 */
import { gcraBound } from '../src/sim/baselines.js';
import { round, rowFigures, slidingLogAdmits } from '../src/sim/metrics.js';
import type { Trace } from '../src/sim/trace.js';
import { type DecisionRecord, type Mesh, readDecisions, shares, sleep } from './harness.js';
import type { RunReport, RunSpec } from './protocol.js';

export { round };

/** How a replay is set up beyond the trace. */
export interface ReplayOptions {
  policy: string;
  key?: string;
  /** Lead time before the common start instant, ms (children wait for it). Default 1500. */
  leadMs?: number;
  /** Per node: extra run-spec fields (isolation window, rogue window, gate). */
  extra?: (i: number) => Partial<RunSpec>;
  /** Called once the run has started (drills kill and restart from here). */
  during?: (startAt: number, runs: Promise<RunReport>[]) => Promise<void>;
}

export interface ReplayOutcome {
  startAt: number;
  reports: RunReport[];
  /** Decisions of every node (and every incarnation), by node index. */
  decisions: DecisionRecord[][];
  /** Admitted decision times (ms since start), ascending, over all nodes. */
  admitted: number[];
}

/** Replays `trace` (node i's share at node i) on `mesh`, all nodes from one wall-clock instant. */
export async function replayLive(mesh: Mesh, trace: Trace, opts: ReplayOptions): Promise<ReplayOutcome> {
  const n = mesh.spec.nodes;
  const byNode = shares(trace.t, trace.node, n);
  const durationMs = trace.t.length > 0 ? trace.t[trace.t.length - 1]! + 0.5 : 0;
  const startAt = Date.now() + (opts.leadMs ?? 1500);
  const runs: Promise<RunReport>[] = [];
  for (let i = 0; i < mesh.procs.length; i++) {
    const spec: RunSpec = {
      startAt,
      times: i < n ? byNode[i]! : [],
      policy: opts.policy,
      key: opts.key ?? 'global',
      decisionFile: mesh.decisionFile(i),
      ...opts.extra?.(i),
    };
    const run = mesh.procs[i]!.run(spec, durationMs + 60_000);
    // A node killed on purpose rejects its run; allSettled below reads it, this keeps it from being unhandled.
    run.catch(() => {});
    runs.push(run);
  }
  if (opts.during) await opts.during(startAt, runs);
  const settled = await Promise.allSettled(runs);
  // Let in-flight file writes land (they are synchronous in the child; this is belt and braces).
  await sleep(50);
  const reports: RunReport[] = [];
  for (const s of settled) if (s.status === 'fulfilled') reports.push(s.value);
  const decisions: DecisionRecord[][] = [];
  for (let i = 0; i < mesh.procs.length; i++) {
    const all: DecisionRecord[] = [];
    for (let inc = 0; inc < 4; inc++) all.push(...readDecisions(mesh.decisionFile(i, inc)));
    all.sort((a, b) => a.t - b.t);
    decisions.push(all);
  }
  const admitted = decisions
    .flat()
    .filter((d) => d.allowed)
    .map((d) => d.t)
    .sort((a, b) => a - b);
  return { startAt, reports, decisions, admitted };
}

/** The simulator's row figures for a set of admitted times. */
export function figures(trace: Trace, admitted: number[], limit: number, windowMs: number) {
  return rowFigures(admitted, gcraBound(trace), slidingLogAdmits(trace.t, limit, windowMs).length);
}

/** Largest count admitted in [from, from + 1 s) for every start `from` in [a, b] (ms). */
export function worstRollingIn(admitted: number[], a: number, b: number, widthMs = 1000): number {
  let best = 0;
  let j = 0;
  let i0 = 0;
  while (i0 < admitted.length && admitted[i0]! < a) i0++;
  // windows that start at a, or at an admitted time in (a, b]
  const starts = [a, ...admitted.filter((t) => t > a && t <= b)];
  for (const s of starts) {
    while (i0 < admitted.length && admitted[i0]! < s) i0++;
    if (j < i0) j = i0;
    while (j < admitted.length && admitted[j]! < s + widthMs) j++;
    if (j - i0 > best) best = j - i0;
  }
  return best;
}

export function sum(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}
