import { integer, positive } from '../validate.js';
import {
  allow,
  ceilMs,
  cells,
  costFits,
  deny,
  denyBadTime,
  exactRetry,
  type FitsAt,
  isTime,
  PARAM_INVALID,
} from './shared.js';
import type { AlgoResult, LocalAlgorithm } from './types.js';

/** Parameters of a {@link FixedWindow}: `limit` cells per aligned window of `windowMs`. */
export interface FixedWindowOptions {
  limit: number;
  windowMs: number;
}

/** Fixed-window state: the index of the current window (`floor(t / windowMs)`) and what it has spent. */
export interface FixedWindowState {
  index: number;
  count: number;
}

/**
 * Fixed window: at most `limit` cells in each window `[n × windowMs, (n + 1) × windowMs)`,
 * aligned to the epoch. State is two numbers.
 *
 * Boundary double burst: the count resets at each window edge, so a client may
 * spend `limit` just before an edge and `limit` again just after it: up to
 * `2 × limit` in an interval far shorter than `windowMs`. Use GCRA or a sliding
 * window when that matters.
 *
 * Clock going backwards: a `now` in an earlier window than the state's counts
 * as the state's window (it is never reset by going back).
 */
export class FixedWindow implements LocalAlgorithm<FixedWindowState>, FitsAt<FixedWindowState> {
  readonly name = 'fixed-window' as const;
  readonly capacity: number;
  readonly windowMs: number;

  constructor(options: FixedWindowOptions) {
    this.capacity = integer(options.limit, 'limit', 1, undefined, PARAM_INVALID);
    this.windowMs = positive(options.windowMs, 'windowMs', PARAM_INVALID);
  }

  init(now: number): FixedWindowState {
    return { index: isTime(now) ? Math.floor(now / this.windowMs) : Number.NEGATIVE_INFINITY, count: 0 };
  }

  /** The window `t` falls in, never before the state's. */
  private index(state: FixedWindowState, t: number): number {
    const i = Math.floor(t / this.windowMs);
    return Math.max(i, state.index);
  }

  fitsAt(state: FixedWindowState, cost: number, t: number): boolean {
    if (!isTime(t)) return false;
    const count = this.index(state, t) === state.index ? state.count : 0;
    return count + cost <= this.capacity;
  }

  check(state: FixedWindowState, cost: number, now: number, out: AlgoResult): boolean {
    if (!isTime(now)) return denyBadTime(out);
    const i = this.index(state, now);
    const count = i === state.index ? state.count : 0;
    const untilNext = ceilMs((i + 1) * this.windowMs - now);
    if (!costFits(cost, this.capacity)) {
      return deny(out, cells(this.capacity - count), -1, count > 0 ? untilNext : 0);
    }
    if (count + cost <= this.capacity) {
      return allow(out, cells(this.capacity - count - cost), untilNext, 0);
    }
    const retry = exactRetry(this, state, cost, now, (i + 1) * this.windowMs - now);
    return deny(out, cells(this.capacity - count), retry, untilNext);
  }

  commit(state: FixedWindowState, cost: number, now: number): void {
    if (!isTime(now) || !costFits(cost, this.capacity)) return;
    const i = this.index(state, now);
    if (i !== state.index) {
      state.index = i;
      state.count = 0;
    }
    state.count += cost;
  }

  isIdle(state: FixedWindowState, now: number): boolean {
    return isTime(now) && (state.count === 0 || this.index(state, now) !== state.index);
  }
}
