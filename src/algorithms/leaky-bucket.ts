import { finite, integer, positive } from '../validate.js';
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

/** Parameters of a {@link LeakyBucket} shaper. */
export interface LeakyBucketOptions {
  /** Cost units drained per window (the emission rate is limit / windowMs). */
  limit: number;
  windowMs: number;
  /** Queue capacity in cost units. Default: `limit`. */
  queue?: number;
  /** The longest a request may be told to wait, in ms (whole ms; a fraction is dropped). Default: `windowMs`. */
  deadlineMs?: number;
}

/**
 * Leaky-bucket state: one number, the time the queue will be empty, in drain
 * intervals (ms × rate). The queue holds `max(0, empty - now × rate)` units.
 */
export interface LeakyBucketState {
  empty: number;
}

/**
 * Leaky-bucket shaper: a bounded FIFO queue of `queue` cost units drained at
 * `limit / windowMs` units per ms. A request of `cost` finding `q` units queued
 * ahead of it is admitted when `q + cost <= queue` and its wait
 * `delayMs = ceil(q / rate)` is at most `deadlineMs`; the caller then waits
 * `delayMs` before proceeding. Otherwise it is rejected with the exact
 * `retryAfterMs` until both would hold.
 *
 * Guarantees: the queue never holds more than `queue` units; no delay exceeds
 * `deadlineMs`; requests proceed in arrival order, each starting no earlier than
 * the previous one's start plus its cost / rate, so the units starting in any
 * interval of `I` ms are at most `rate × I` plus one request's cost (plus `rate × 1`
 * for the rounding of delays up to whole ms). A shaper smooths bursts at the
 * price of latency, bounded here by the deadline.
 *
 * Clock going backwards: the empty time never moves back, so an earlier `now`
 * sees more queued ahead of it (stricter) and is told to proceed at the same
 * absolute time.
 */
export class LeakyBucket implements LocalAlgorithm<LeakyBucketState>, FitsAt<LeakyBucketState> {
  readonly name = 'leaky-bucket' as const;
  readonly capacity: number;
  /** Units drained per ms. */
  readonly rate: number;
  readonly deadlineMs: number;

  constructor(options: LeakyBucketOptions) {
    const limit = integer(options.limit, 'limit', 1, undefined, PARAM_INVALID);
    const windowMs = positive(options.windowMs, 'windowMs', PARAM_INVALID);
    this.capacity = integer(options.queue ?? limit, 'queue', 1, undefined, PARAM_INVALID);
    this.deadlineMs = Math.floor(
      finite(options.deadlineMs ?? windowMs, 'deadlineMs', 0, undefined, PARAM_INVALID),
    );
    this.rate = limit / windowMs;
  }

  init(now: number): LeakyBucketState {
    return { empty: isTime(now) ? now * this.rate : Number.NEGATIVE_INFINITY };
  }

  /** Units queued at `x = t × rate` (0 when empty, noise included). */
  private queued(state: LeakyBucketState, x: number, slack: number): number {
    const q = state.empty - x;
    return q > slack ? q : 0;
  }

  /** Whole ms a request finding `q` units ahead waits. */
  private delay(q: number, slack: number): number {
    return ceilMs((q - slack) / this.rate);
  }

  fitsAt(state: LeakyBucketState, cost: number, t: number): boolean {
    if (!isTime(t)) return false;
    const x = t * this.rate;
    const slack = floatSlack(x, this.capacity);
    const q = this.queued(state, x, slack);
    return q + cost <= this.capacity + slack && this.delay(q, slack) <= this.deadlineMs;
  }

  check(state: LeakyBucketState, cost: number, now: number, out: AlgoResult): boolean {
    if (!isTime(now)) return denyBadTime(out);
    const x = now * this.rate;
    const slack = floatSlack(x, this.capacity);
    const q = this.queued(state, x, slack);
    // the queue ahead drains in `delay`: both how long this request would wait and when all is reset
    const delay = this.delay(q, slack);
    const resetNow = delay;
    if (!costFits(cost, this.capacity)) return deny(out, cells(this.capacity - q + slack), -1, resetNow);
    const after = q + cost;
    if (after <= this.capacity + slack && delay <= this.deadlineMs) {
      return allow(out, cells(this.capacity - after + slack), this.delay(after, slack), delay);
    }
    // Wait until the queue has drained to what both the capacity and the deadline allow.
    const target = Math.min(this.capacity - cost, this.deadlineMs * this.rate);
    const retry = exactRetry(this, state, cost, now, (q - target) / this.rate);
    return deny(out, cells(this.capacity - q + slack), retry, resetNow);
  }

  commit(state: LeakyBucketState, cost: number, now: number): void {
    if (!isTime(now) || !costFits(cost, this.capacity)) return;
    const x = now * this.rate;
    state.empty = Math.max(state.empty, x) + cost;
  }

  isIdle(state: LeakyBucketState, now: number): boolean {
    if (!isTime(now)) return false;
    const x = now * this.rate;
    return state.empty - x <= floatSlack(x, this.capacity);
  }
}
