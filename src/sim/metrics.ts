/**
 * Figures of merit for a set of admitted request times (ms, ascending).
 */

/** The largest number admitted in any half-open interval [s, s + widthMs). */
export function worstRolling(admitted: readonly number[], widthMs: number): number {
  let best = 0;
  let j = 0;
  for (let i = 0; i < admitted.length; i++) {
    const end = admitted[i]! + widthMs;
    if (j < i) j = i;
    while (j < admitted.length && admitted[j]! < end) j++;
    if (j - i > best) best = j - i;
  }
  return best;
}

/** The largest number admitted in an aligned bin [k·width, (k+1)·width). */
export function worstAligned(admitted: readonly number[], widthMs: number): number {
  const bins = new Map<number, number>();
  let best = 0;
  for (const t of admitted) {
    const b = Math.floor(t / widthMs);
    const v = (bins.get(b) ?? 0) + 1;
    bins.set(b, v);
    if (v > best) best = v;
  }
  return best;
}

/**
 * How many an exact central sliding-window log of `limit` per `windowMs` admits
 * on arrivals `times` (ascending, cost 1): admit at t when fewer than `limit`
 * were admitted in (t - W, t]. Any half-open [s, s + W) then holds at most `limit`.
 */
export function slidingLogAdmits(times: ArrayLike<number>, limit: number, windowMs: number): number[] {
  const admitted: number[] = [];
  let head = 0;
  for (let i = 0; i < times.length; i++) {
    const t = times[i]!;
    while (head < admitted.length && admitted[head]! <= t - windowMs) head++;
    if (admitted.length - head < limit) admitted.push(t);
  }
  return admitted;
}

/** Round to `digits` decimals, as the result rows print fractions. */
export function round(x: number, digits = 4): number {
  return Math.round(x * 10 ** digits) / 10 ** digits;
}

/** The figures every accuracy row carries, for admitted times on a trace of arrivals. */
export interface RowFigures {
  admitted: number;
  /** admitted / the most a burst-96, 1/ms GCRA can admit on the trace. */
  vs_gcra_bound: number;
  /** admitted / what an exact central sliding-window log of `limit` per `windowMs` admits. */
  vs_window_bound: number;
  worst_1s: number;
  worst_100ms: number;
}

/** Row figures of `admitted` (ms, ascending) against bounds `gcra` and `windowBound`. */
export function rowFigures(admitted: readonly number[], gcra: number, windowBound: number): RowFigures {
  return {
    admitted: admitted.length,
    vs_gcra_bound: round(admitted.length / gcra),
    vs_window_bound: round(admitted.length / windowBound),
    worst_1s: worstRolling(admitted, 1000),
    worst_100ms: worstAligned(admitted, 100),
  };
}
