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
  floatSlack,
  isTime,
  PARAM_INVALID,
} from './shared.js';
import type { AlgoResult, LocalAlgorithm } from './types.js';

/** Parameters of a {@link Gcra}: `limit` cells per `windowMs`, bursts of `burst` cells. */
export interface GcraOptions {
  limit: number;
  windowMs: number;
  /** The most cells admitted at once. Default: `limit`. */
  burst?: number;
}

/**
 * GCRA state: one number, the theoretical arrival time (TAT).
 *
 * The TAT is kept in emission intervals (ms × rate) rather than in ms, so that
 * spending `cost` adds an integer and a burst from a fresh state is exact in
 * floating point whatever the rate.
 */
export interface GcraState {
  tat: number;
}

/**
 * Generic Cell Rate Algorithm (the virtual-scheduling form of a token bucket):
 * rate = `limit / windowMs` cells per ms, burst = `burst` cells.
 *
 * A request of `cost` at `now` is admitted when `max(tat, now) + cost - now <= burst`
 * (in emission intervals), and then `tat = max(tat, now) + cost`. Over any closed
 * interval of length `I` ms at most `burst + rate × I` cells are admitted.
 *
 * Clock going backwards: the TAT is never earlier than any time the state was
 * created or spent at, so an earlier `now` meets the same TAT with more debt
 * outstanding: never more permissive than the latest time, only stricter.
 */
export class Gcra implements LocalAlgorithm<GcraState>, FitsAt<GcraState> {
  readonly name = 'gcra' as const;
  readonly capacity: number;
  /** Cells per ms. */
  readonly rate: number;

  constructor(options: GcraOptions) {
    const limit = integer(options.limit, 'limit', 1, undefined, PARAM_INVALID);
    const windowMs = positive(options.windowMs, 'windowMs', PARAM_INVALID);
    this.capacity = integer(options.burst ?? limit, 'burst', 1, undefined, PARAM_INVALID);
    this.rate = limit / windowMs;
  }

  init(now: number): GcraState {
    return { tat: isTime(now) ? now * this.rate : Number.NEGATIVE_INFINITY };
  }

  /** Outstanding debt in cells at `x = t × rate` (0 when the state is full, noise included). */
  private debt(state: GcraState, x: number, slack: number): number {
    const d = state.tat - x;
    return d > slack ? d : 0;
  }

  fitsAt(state: GcraState, cost: number, t: number): boolean {
    if (!isTime(t)) return false;
    const x = t * this.rate;
    const slack = floatSlack(x, this.capacity);
    return this.debt(state, x, slack) + cost <= this.capacity + slack;
  }

  check(state: GcraState, cost: number, now: number, out: AlgoResult): boolean {
    if (!isTime(now)) return denyBadTime(out);
    const x = now * this.rate;
    const slack = floatSlack(x, this.capacity);
    const debt = this.debt(state, x, slack);
    const resetNow = ceilMs((debt - slack) / this.rate);
    if (!costFits(cost, this.capacity)) return deny(out, cells(this.capacity - debt + slack), -1, resetNow);
    const after = debt + cost;
    if (after <= this.capacity + slack) {
      return allow(out, cells(this.capacity - after + slack), ceilMs((after - slack) / this.rate), 0);
    }
    const retry = exactRetry(this, state, cost, now, (after - this.capacity) / this.rate);
    return deny(out, cells(this.capacity - debt + slack), retry, resetNow);
  }

  commit(state: GcraState, cost: number, now: number): void {
    if (!isTime(now) || !costFits(cost, this.capacity)) return;
    const x = now * this.rate;
    state.tat = Math.max(state.tat, x) + cost;
  }

  isIdle(state: GcraState, now: number): boolean {
    if (!isTime(now)) return false;
    const x = now * this.rate;
    return state.tat - x <= floatSlack(x, this.capacity);
  }
}
