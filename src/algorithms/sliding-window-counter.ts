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

/** Parameters of a {@link SlidingWindowCounter}. */
export interface SlidingWindowCounterOptions {
  limit: number;
  windowMs: number;
  /** Sub-buckets per window (k). Default: 10. */
  buckets?: number;
}

/**
 * Sliding-window-counter state: a ring of `k + 1` sub-bucket counts and the
 * index (`floor(t / (windowMs / k))`) of the newest. Bucket `j` lives at
 * `counts[j mod (k + 1)]` while `head - k <= j <= head`.
 */
export interface SlidingWindowCounterState {
  head: number;
  counts: Float64Array;
}

/**
 * Sliding-window counter (approximate): the window is cut into `k` sub-buckets of
 * `w = windowMs / k`. The estimate at `t` (in sub-bucket `b`) is the sum of
 * buckets `b - k + 1 .. b` plus bucket `b - k` weighted by the part of it still
 * inside `(t - windowMs, t]`; a request is admitted when `estimate + cost <= limit`.
 * This is the same estimate the mesh uses over all origins (README, "How a node decides").
 *
 * It is approximate, not the exact rolling log: the weighting assumes the
 * oldest bucket's events were spread evenly across it. What it guarantees:
 * - any `k` consecutive aligned sub-buckets (a span of `windowMs`) hold at most `limit`;
 * - hence any rolling interval of length `windowMs - w` holds at most `limit`;
 * - a rolling interval of length `windowMs` holds less than `2 × limit`, and
 *   approaches that only when arrivals bunch at the very end of the oldest
 *   bucket; with arrivals spread evenly it is close to `limit`.
 * Memory is `k + 1` numbers per key; a check costs O(k).
 *
 * Clock going backwards: a `now` in an earlier bucket than `head` counts as the
 * start of `head` (the oldest bucket at full weight), which is never more
 * permissive than any later time.
 */
export class SlidingWindowCounter
  implements LocalAlgorithm<SlidingWindowCounterState>, FitsAt<SlidingWindowCounterState>
{
  readonly name = 'sliding-window-counter' as const;
  readonly capacity: number;
  readonly windowMs: number;
  /** Sub-buckets per window (k). */
  readonly buckets: number;
  /** Sub-bucket width in ms. */
  readonly bucketMs: number;
  private readonly slots: number;

  constructor(options: SlidingWindowCounterOptions) {
    this.capacity = integer(options.limit, 'limit', 1, undefined, PARAM_INVALID);
    this.windowMs = positive(options.windowMs, 'windowMs', PARAM_INVALID);
    this.buckets = integer(options.buckets ?? 10, 'buckets', 1, undefined, PARAM_INVALID);
    this.bucketMs = this.windowMs / this.buckets;
    this.slots = this.buckets + 1;
  }

  init(now: number): SlidingWindowCounterState {
    return {
      head: isTime(now) ? Math.floor(now / this.bucketMs) : Number.NEGATIVE_INFINITY,
      counts: new Float64Array(this.slots),
    };
  }

  private slot(j: number): number {
    const m = j % this.slots;
    return m < 0 ? m + this.slots : m;
  }

  /** The count of bucket `j` (0 outside the ring's span). */
  private count(state: SlidingWindowCounterState, j: number): number {
    return j > state.head || j < state.head - this.buckets ? 0 : state.counts[this.slot(j)]!;
  }

  /** The bucket `t` counts in, never before `head`. */
  private bucketAt(state: SlidingWindowCounterState, t: number): number {
    const b = Math.floor(t / this.bucketMs);
    return Math.max(b, state.head);
  }

  /** The estimate at `t` (see the class comment). */
  private estimate(state: SlidingWindowCounterState, t: number): number {
    const raw = Math.floor(t / this.bucketMs);
    const b = Math.max(raw, state.head);
    const k = this.buckets;
    if (b - k > state.head) return 0;
    let f = raw < b ? 0 : (t - b * this.bucketMs) / this.bucketMs;
    if (f < 0) f = 0;
    else if (f > 1) f = 1;
    let sum = 0;
    for (let j = b - k + 1; j <= b; j++) sum += this.count(state, j);
    return sum + this.count(state, b - k) * (1 - f);
  }

  fitsAt(state: SlidingWindowCounterState, cost: number, t: number): boolean {
    return isTime(t) && this.estimate(state, t) + cost <= this.capacity;
  }

  /** ms from `now` until the estimate is 0, given `newest` is the newest bucket holding anything. */
  private resetAfter(newest: number, now: number): number {
    return ceilMs((newest + this.buckets + 1) * this.bucketMs - now);
  }

  /** ms from `now` until the estimate of `state` as it stands is 0. */
  private resetNow(state: SlidingWindowCounterState, now: number): number {
    if (!isTime(state.head)) return 0;
    for (let j = state.head; j >= state.head - this.buckets; j--) {
      if (this.count(state, j) > 0) return this.resetAfter(j, now);
    }
    return 0;
  }

  /** Closed-form wait (ms, real-valued) until `estimate + cost <= limit`, with no further spending. */
  private waitFor(state: SlidingWindowCounterState, cost: number, now: number): number {
    const k = this.buckets;
    const room = this.capacity - cost;
    const b0 = this.bucketAt(state, now);
    let full = 0;
    for (let j = b0 - k + 1; j <= b0; j++) full += this.count(state, j);
    // Walk forward bucket by bucket: in bucket j the estimate falls linearly as
    // bucket j - k leaves the window; at most k + 1 steps until it is empty.
    for (let j = b0; j <= b0 + k + 1; j++) {
      if (j > b0) full += this.count(state, j) - this.count(state, j - k);
      if (full > room) continue;
      const old = this.count(state, j - k);
      const start = j * this.bucketMs;
      const t = full + old <= room ? start : start + (1 - (room - full) / old) * this.bucketMs;
      return t > now ? t - now : 0;
    }
    return Number.POSITIVE_INFINITY;
  }

  check(state: SlidingWindowCounterState, cost: number, now: number, out: AlgoResult): boolean {
    if (!isTime(now)) return denyBadTime(out);
    const est = this.estimate(state, now);
    const b = this.bucketAt(state, now);
    if (!costFits(cost, this.capacity)) {
      return deny(out, cells(this.capacity - est), -1, this.resetNow(state, now));
    }
    if (est + cost <= this.capacity) {
      return allow(out, cells(this.capacity - est - cost), this.resetAfter(b, now), 0);
    }
    const retry = exactRetry(this, state, cost, now, this.waitFor(state, cost, now));
    return deny(out, cells(this.capacity - est), retry, this.resetNow(state, now));
  }

  commit(state: SlidingWindowCounterState, cost: number, now: number): void {
    if (!isTime(now) || !costFits(cost, this.capacity)) return;
    const b = this.bucketAt(state, now);
    if (b > state.head) {
      // Clear the slots of buckets head+1 .. b (all of them when b jumped a whole ring).
      const n = Math.min(b - state.head, this.slots);
      for (let i = 0; i < n; i++) state.counts[this.slot(b - i)] = 0;
      state.head = b;
    }
    state.counts[this.slot(b)]! += cost;
  }

  isIdle(state: SlidingWindowCounterState, now: number): boolean {
    return isTime(now) && this.estimate(state, now) === 0;
  }
}
