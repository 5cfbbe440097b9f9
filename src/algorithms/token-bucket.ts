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
  REL_EPS,
} from './shared.js';
import type { AlgoResult, LocalAlgorithm } from './types.js';

/** Parameters of a {@link TokenBucket}: refill `limit` tokens per `windowMs`, hold at most `burst`. */
export interface TokenBucketOptions {
  limit: number;
  windowMs: number;
  /** Bucket capacity in tokens. Default: `limit`. */
  burst?: number;
}

/** Token-bucket state: the balance at `last`, the latest time the state saw (ms). */
export interface TokenBucketState {
  tokens: number;
  last: number;
}

/**
 * Token bucket: capacity = `burst` tokens, refilled at `limit / windowMs` tokens
 * per ms. At each decision `tokens = min(capacity, tokens + rate × elapsed)`;
 * a request of `cost` is admitted when that balance covers it. Over any closed
 * interval of length `I` ms at most `burst + rate × I` tokens are spent.
 *
 * Clock going backwards: `elapsed` is measured from `last`, the latest time the
 * state was created or spent at; an earlier `now` counts as `last` (no refill).
 */
export class TokenBucket implements LocalAlgorithm<TokenBucketState>, FitsAt<TokenBucketState> {
  readonly name = 'token-bucket' as const;
  readonly capacity: number;
  /** Tokens per ms. */
  readonly rate: number;
  /** Float-noise slack (tokens) for comparisons. */
  private readonly slack: number;

  constructor(options: TokenBucketOptions) {
    const limit = integer(options.limit, 'limit', 1, undefined, PARAM_INVALID);
    const windowMs = positive(options.windowMs, 'windowMs', PARAM_INVALID);
    this.capacity = integer(options.burst ?? limit, 'burst', 1, undefined, PARAM_INVALID);
    this.rate = limit / windowMs;
    this.slack = this.capacity * REL_EPS * 256;
  }

  init(now: number): TokenBucketState {
    return { tokens: this.capacity, last: isTime(now) ? now : Number.NEGATIVE_INFINITY };
  }

  /** The balance at `t` (refilled from `last`, capped at capacity). */
  private level(state: TokenBucketState, t: number): number {
    if (t <= state.last) return state.tokens;
    const v = state.tokens + (t - state.last) * this.rate;
    return Math.min(v, this.capacity);
  }

  fitsAt(state: TokenBucketState, cost: number, t: number): boolean {
    return isTime(t) && this.level(state, t) + this.slack >= cost;
  }

  check(state: TokenBucketState, cost: number, now: number, out: AlgoResult): boolean {
    if (!isTime(now)) return denyBadTime(out);
    const level = this.level(state, now);
    const resetNow = ceilMs((this.capacity - level - this.slack) / this.rate);
    if (!costFits(cost, this.capacity)) return deny(out, cells(level + this.slack), -1, resetNow);
    if (level + this.slack >= cost) {
      const left = level - cost;
      return allow(out, cells(left + this.slack), ceilMs((this.capacity - left - this.slack) / this.rate), 0);
    }
    // Refill starts from `last` when the clock went back.
    const from = Math.max(now, state.last);
    const retry = exactRetry(this, state, cost, now, from - now + (cost - level) / this.rate);
    return deny(out, cells(level + this.slack), retry, resetNow);
  }

  commit(state: TokenBucketState, cost: number, now: number): void {
    if (!isTime(now) || !costFits(cost, this.capacity)) return;
    state.tokens = this.level(state, now) - cost;
    if (now > state.last) state.last = now;
  }

  isIdle(state: TokenBucketState, now: number): boolean {
    return isTime(now) && this.level(state, now) + this.slack >= this.capacity;
  }
}
