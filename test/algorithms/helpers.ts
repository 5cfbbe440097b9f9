import { createAlgorithm, LeakyBucket } from '../../src/algorithms/index.js';
import { type AlgoResult, type LocalAlgorithm, newAlgoResult } from '../../src/algorithms/types.js';
import type { AlgorithmName, LocalAlgorithmSpec } from '../../src/types.js';

/** A complete spec with every extra filled in (what the policy compiler hands over). */
export function spec(
  algorithm: AlgorithmName,
  limit: number,
  windowMs: number,
  extra: Partial<LocalAlgorithmSpec> = {},
): Required<LocalAlgorithmSpec> {
  return {
    algorithm,
    limit,
    windowMs,
    burst: extra.burst ?? limit,
    buckets: extra.buckets ?? 10,
    queue: extra.queue ?? limit,
    deadlineMs: extra.deadlineMs ?? windowMs,
  };
}

export function make(s: Required<LocalAlgorithmSpec>): LocalAlgorithm<unknown> {
  return createAlgorithm(s);
}

/** One arrival: time (ms) and cost. */
export interface Arrival {
  t: number;
  cost: number;
}

/** An admitted arrival with what the algorithm said. */
export interface Admitted extends Arrival {
  delayMs: number;
  /** Leaky bucket: units queued just after this admission, measured at its `t`. */
  queued: number;
}

/**
 * Feeds arrivals one at a time to a single state, check then commit when
 * allowed (the way every caller uses an algorithm); returns the admitted ones.
 */
export function run(
  algo: LocalAlgorithm<unknown>,
  arrivals: readonly Arrival[],
  initAt: number,
  onAdmit?: (state: unknown, a: Arrival, out: AlgoResult) => void,
): Admitted[] {
  const state = algo.init(initAt);
  const out = newAlgoResult();
  const admitted: Admitted[] = [];
  for (const a of arrivals) {
    if (algo.check(state, a.cost, a.t, out)) {
      const delayMs = out.delayMs;
      algo.commit(state, a.cost, a.t);
      const queued = algo instanceof LeakyBucket ? (state as { empty: number }).empty - a.t * algo.rate : 0;
      admitted.push({ t: a.t, cost: a.cost, delayMs, queued });
      onAdmit?.(state, a, out);
    }
  }
  return admitted;
}

/** Sum of the costs. */
export function total(xs: readonly Arrival[]): number {
  let n = 0;
  for (const x of xs) n += x.cost;
  return n;
}

/** A deep copy of a state (Float64Arrays included), for "did not change" assertions. */
export function snapshot<S>(state: S): S {
  return structuredClone(state);
}
