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

/**
 * What the best limiter whose nodes decide alone can admit, without ever passing `limit` in a
 * window, on arrivals `times` (ascending, cost 1) that each go to one of `nodes` nodes chosen
 * uniformly and independently (the ceiling beside the scale bench's rows, issue 13).
 *
 * A node admits only on units of the headroom h = limit − (admitted in (t − W, t]) that it
 * already holds: no node may count on another's units without hearing from it, so the units
 * held add up to at most h, and at most min(h, nodes) of the nodes hold one. The node of an
 * arrival is independent of who holds them, so no such limiter admits it with a probability
 * above min(h, nodes) / nodes. This oracle admits every arrival with exactly that probability
 * (as if units moved between nodes at once and for free, with no gossip delay), drawn from
 * `prng`: one draw of the ceiling (the times it admits); average a few. Using a unit now rather than later never
 * costs one: it is free again W later.
 *
 * Arrivals at the same instant (a client's burst) are decided on one holding of the units:
 * nothing can move between them. Each node admits at most the units it holds, and on every
 * holding of h units the least expected excess, Σ E[(X_i − u_i)+] (X_i: the burst's arrivals
 * at node i), is the one as even as whole units go (E[(X − u)+] is convex in u, the X_i alike):
 * h mod N nodes hold ⌈h/N⌉, the others ⌊h/N⌋. This oracle draws each arrival's node and admits
 * it while its node has a unit left. On one node (or a single arrival) that is the rule above.
 */
export function localCeilingAdmits(
  times: ArrayLike<number>,
  limit: number,
  windowMs: number,
  nodes: number,
  prng: { next(): number },
): number[] {
  const flags = localCeilingFlags(times, limit, windowMs, nodes, prng);
  const admitted: number[] = [];
  for (let i = 0; i < times.length; i++) if (flags[i]) admitted.push(times[i]!);
  return admitted;
}

/** {@link localCeilingAdmits} as one flag per arrival (1 = admitted). */
export function localCeilingFlags(
  times: ArrayLike<number>,
  limit: number,
  windowMs: number,
  nodes: number,
  prng: { next(): number },
): Uint8Array {
  const flags = new Uint8Array(times.length);
  const admitted: number[] = [];
  let head = 0;
  let used: Int32Array | undefined;
  for (let i = 0; i < times.length; ) {
    const t = times[i]!;
    let j = i + 1;
    while (j < times.length && times[j] === t) j++;
    while (head < admitted.length && admitted[head]! <= t - windowMs) head++;
    const h = limit - (admitted.length - head);
    if (j - i === 1) {
      // one: with probability min(h, nodes) / nodes
      if (h >= 1 && prng.next() * nodes < Math.min(h, nodes)) {
        admitted.push(t);
        flags[i] = 1;
      }
    } else {
      // a burst: the h units held as evenly as whole units go, each arrival (a draw each) on its
      // node's
      used ??= new Int32Array(nodes);
      used.fill(0);
      const q = Math.floor(Math.max(0, h) / nodes);
      const r = Math.max(0, h) - q * nodes;
      for (let x = i; x < j; x++) {
        const node = Math.floor(prng.next() * nodes);
        if (used[node]! < q + (node < r ? 1 : 0)) {
          used[node]!++;
          admitted.push(t);
          flags[x] = 1;
        }
      }
    }
    i = j;
  }
  return flags;
}
