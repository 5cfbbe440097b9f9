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

/** Parameters of a {@link SlidingWindowLog}: at most `limit` cells in any rolling `windowMs`. */
export interface SlidingWindowLogOptions {
  limit: number;
  windowMs: number;
}

/**
 * Sliding-window-log state: a ring of admitted events, oldest first, as
 * `(time, cost)` pairs in one Float64Array (`buf[2p]` time, `buf[2p + 1]` cost).
 * `total` is the sum of the stored costs; `last` the latest time the state saw.
 */
export interface SlidingWindowLogState {
  buf: Float64Array;
  start: number;
  len: number;
  total: number;
  last: number;
}

const MIN_SLOTS = 4;
/** Shared by fresh states until their first event; never written (it has no slots). */
const EMPTY = new Float64Array(0);

/**
 * Sliding-window log (exact): stores the time and cost of every admitted
 * request and admits `cost` at `t` when the costs admitted in `(t - windowMs, t]`
 * plus `cost` are at most `limit`. Any half-open interval `[s, s + windowMs)`
 * therefore holds at most `limit` cells.
 *
 * Memory is proportional to the events in the window, not O(1): 16 bytes per
 * stored event, up to `limit` events per key (requests in the same ms share
 * one entry). The ring grows by doubling and shrinks when three quarters
 * empty. Expired events are trimmed on commit; a check walks the expired
 * prefix without trimming it (checks do not mutate).
 *
 * Clock going backwards: an earlier `now` counts as `last`, the latest time the
 * state was created or spent at, so events stay in time order and none leaves
 * the window early.
 */
export class SlidingWindowLog
  implements LocalAlgorithm<SlidingWindowLogState>, FitsAt<SlidingWindowLogState>
{
  readonly name = 'sliding-window-log' as const;
  readonly capacity: number;
  readonly windowMs: number;

  constructor(options: SlidingWindowLogOptions) {
    this.capacity = integer(options.limit, 'limit', 1, undefined, PARAM_INVALID);
    this.windowMs = positive(options.windowMs, 'windowMs', PARAM_INVALID);
  }

  init(now: number): SlidingWindowLogState {
    return { buf: EMPTY, start: 0, len: 0, total: 0, last: isTime(now) ? now : Number.NEGATIVE_INFINITY };
  }

  /** Ring position of the `i`-th stored event (0 = oldest). */
  private pos(state: SlidingWindowLogState, i: number): number {
    const p = state.start + i;
    const slots = state.buf.length >> 1;
    return p < slots ? p : p - slots;
  }

  /** The cost admitted in `(t - windowMs, t]`, with `t` no earlier than `last`. */
  private sum(state: SlidingWindowLogState, t: number): number {
    const cutoff = Math.max(t, state.last) - this.windowMs;
    let sum = state.total;
    for (let i = 0; i < state.len; i++) {
      const p = this.pos(state, i) << 1;
      if (state.buf[p]! > cutoff) break;
      sum -= state.buf[p + 1]!;
    }
    return sum;
  }

  fitsAt(state: SlidingWindowLogState, cost: number, t: number): boolean {
    return isTime(t) && this.sum(state, t) + cost <= this.capacity;
  }

  /** Closed-form wait: until enough of the oldest events have left the window. */
  private waitFor(state: SlidingWindowLogState, cost: number, now: number, inWindow: number): number {
    const room = this.capacity - cost;
    const cutoff = Math.max(now, state.last) - this.windowMs;
    let acc = inWindow;
    for (let i = 0; i < state.len; i++) {
      const p = this.pos(state, i) << 1;
      const time = state.buf[p]!;
      if (time <= cutoff) continue;
      acc -= state.buf[p + 1]!;
      if (acc <= room) return time + this.windowMs - now;
    }
    return Number.POSITIVE_INFINITY;
  }

  /** ms from `now` until every stored event has left the window. */
  private resetNow(state: SlidingWindowLogState, now: number): number {
    if (state.len === 0) return 0;
    return ceilMs(state.buf[this.pos(state, state.len - 1) << 1]! + this.windowMs - now);
  }

  check(state: SlidingWindowLogState, cost: number, now: number, out: AlgoResult): boolean {
    if (!isTime(now)) return denyBadTime(out);
    const inWindow = this.sum(state, now);
    if (!costFits(cost, this.capacity)) {
      return deny(out, cells(this.capacity - inWindow), -1, this.resetNow(state, now));
    }
    if (inWindow + cost <= this.capacity) {
      const t = Math.max(now, state.last);
      return allow(out, cells(this.capacity - inWindow - cost), ceilMs(t + this.windowMs - now), 0);
    }
    const retry = exactRetry(this, state, cost, now, this.waitFor(state, cost, now, inWindow));
    return deny(out, cells(this.capacity - inWindow), retry, this.resetNow(state, now));
  }

  commit(state: SlidingWindowLogState, cost: number, now: number): void {
    if (!isTime(now) || !costFits(cost, this.capacity)) return;
    const t = Math.max(now, state.last);
    const cutoff = t - this.windowMs;
    while (state.len > 0) {
      const p = state.start << 1;
      if (state.buf[p]! > cutoff) break;
      state.total -= state.buf[p + 1]!;
      state.start = this.pos(state, 1);
      state.len--;
    }
    if (state.len === 0) {
      state.start = 0;
      state.total = 0;
    }
    state.last = t;
    if (state.len > 0) {
      const p = this.pos(state, state.len - 1) << 1;
      if (state.buf[p] === t) {
        state.buf[p + 1]! += cost;
        state.total += cost;
        return;
      }
    }
    const slots = state.buf.length >> 1;
    if (state.len === slots) this.resize(state, slots < MIN_SLOTS ? MIN_SLOTS : slots * 2);
    else if (slots > MIN_SLOTS && state.len * 4 <= slots) this.resize(state, slots >> 1);
    const p = this.pos(state, state.len) << 1;
    state.buf[p] = t;
    state.buf[p + 1] = cost;
    state.len++;
    state.total += cost;
  }

  /** Move the events into a ring of `slots` slots, oldest at position 0. */
  private resize(state: SlidingWindowLogState, slots: number): void {
    const buf = new Float64Array(slots * 2);
    for (let i = 0; i < state.len; i++) {
      const p = this.pos(state, i) << 1;
      buf[i * 2] = state.buf[p]!;
      buf[i * 2 + 1] = state.buf[p + 1]!;
    }
    state.buf = buf;
    state.start = 0;
  }

  isIdle(state: SlidingWindowLogState, now: number): boolean {
    return isTime(now) && this.sum(state, now) === 0;
  }

  /** Events currently stored for `state` (for tests and memory accounting). */
  storedEvents(state: SlidingWindowLogState): number {
    return state.len;
  }
}
