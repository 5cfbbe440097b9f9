import { slidingLogAdmits, worstRolling } from '../../src/sim/metrics.js';
import { type ReplayResult, replayTrace, type SimOptions } from '../../src/sim/simulator.js';
import { seedTrace } from '../../src/sim/trace.js';
import type { Decision, PolicySpec } from '../../src/types.js';

export const L = 1000;
export const TRACE = seedTrace();
/** What an exact central sliding-window log of 1000 per 1000 ms admits on the seed trace (10,000). */
export const WINDOW_BOUND = slidingLogAdmits(TRACE.t, L, 1000).length;

export function policy(extra: Partial<PolicySpec> = {}): PolicySpec[] {
  return [{ name: 'seed', limit: L, windowMs: 1000, buckets: 50, ...extra }];
}

export interface Row {
  admitted: number;
  worst1s: number;
  worst100ms: number;
  vsWindowBound: number;
  result: ReplayResult;
}

/** Replay the seed trace on 8 nodes (g = 10, d = 10 unless given) and measure it. */
export function replay(
  opts: Partial<SimOptions>,
  extra: Partial<PolicySpec> = {},
  onRequest?: (i: number, node: number, d: Decision) => void,
): Row {
  const result = replayTrace(
    TRACE,
    { nodes: 8, gossipIntervalMs: 10, delayMs: 10, ...opts, policies: policy(extra) },
    'seed',
    'global',
    onRequest,
  );
  return {
    admitted: result.admitted.length,
    worst1s: worstRolling(result.admitted, 1000),
    worst100ms: worstRolling(result.admitted, 100),
    vsWindowBound: result.admitted.length / WINDOW_BOUND,
    result,
  };
}
