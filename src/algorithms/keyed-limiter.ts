import { ErrorCodes, RateMeshError } from '../errors.js';
import { DEFAULT_MAX_KEYS, KeyBudget, KeyStore } from '../keys/key-store.js';
import type { AlgoResult, LocalAlgorithm } from './types.js';

/** Options of a {@link KeyedLimiter}. */
export interface KeyedLimiterOptions {
  /** The most keys held at once. Default: 100,000. */
  maxKeys?: number;
  /** The fewest states one eviction round frees. Default: `ceil(maxKeys / 16)`. */
  evictBatch?: number;
}

export { DEFAULT_MAX_KEYS } from '../keys/key-store.js';

/**
 * One local algorithm applied per key: a capped map of states (the engine's
 * {@link KeyStore}, under its own {@link KeyBudget}), so a flood of distinct
 * keys cannot grow memory without bound.
 *
 * Two-phase use: a request spends only if every key allows, so call
 * {@link check} on every key first (it changes nothing), and {@link commit} on
 * each only when all allowed, with the same `now` and `cost`.
 *
 * Eviction rule (the key store's; see {@link KeyBudget}): a key absent from the
 * map is judged as a fresh state. When a new key is committed while `maxKeys`
 * are held, one round frees at least `evictBatch` states: first every idle
 * state (one that holds nothing a fresh state would not, so forgetting it
 * changes no decision), then, if that freed too few, the oldest-inserted states
 * (no second chance here: marking a hit would cost the hot path). A round
 * happens at most once per `evictBatch` new keys, so the cost is amortised
 * O(maxKeys / evictBatch) = O(1) per key. Forgetting a non-idle state lets that
 * key spend afresh: it only happens when more than `maxKeys` keys are active at
 * once, the price of bounded memory.
 */
export class KeyedLimiter<S> {
  readonly algorithm: LocalAlgorithm<S>;
  readonly maxKeys: number;
  readonly evictBatch: number;
  private readonly states: KeyStore<S>;
  /** The time of the commit that may evict: what idleness is judged at. */
  private now = 0;
  // A fresh state made by `check` for an absent key, reused by the `commit` that follows.
  private spare: S | undefined;
  private spareKey = '';
  private spareNow = Number.NaN;

  constructor(algorithm: LocalAlgorithm<S>, options: KeyedLimiterOptions = {}) {
    this.algorithm = algorithm;
    this.maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isSafeInteger(this.maxKeys) || this.maxKeys < 1) {
      throw new RateMeshError(
        ErrorCodes.CONFIG_INVALID,
        `must be a positive integer (got ${String(options.maxKeys)})`,
        'maxKeys',
      );
    }
    this.evictBatch = options.evictBatch ?? Math.ceil(this.maxKeys / 16);
    if (!Number.isSafeInteger(this.evictBatch) || this.evictBatch < 1 || this.evictBatch > this.maxKeys) {
      throw new RateMeshError(
        ErrorCodes.CONFIG_INVALID,
        `must be an integer from 1 to maxKeys (got ${String(options.evictBatch)})`,
        'evictBatch',
      );
    }
    this.states = new KeyStore<S>(new KeyBudget(this.maxKeys, this.evictBatch), {
      isExpired: (state) => this.algorithm.isIdle(state, this.now),
    });
  }

  /** Keys held now. */
  get size(): number {
    return this.states.size;
  }

  /** States dropped by eviction rounds so far (not counting {@link sweep} or {@link delete}). */
  get evictions(): number {
    return this.states.evictions;
  }

  /** Whether `key` has a state. */
  has(key: string): boolean {
    return this.states.has(key);
  }

  /** Whether `cost` fits for `key` at `now`; fills `out`; changes nothing. */
  check(key: string, cost: number, now: number, out: AlgoResult): boolean {
    let state = this.states.get(key);
    if (state === undefined) {
      if (this.spare === undefined || this.spareKey !== key || this.spareNow !== now) {
        this.spare = this.algorithm.init(now);
        this.spareKey = key;
        this.spareNow = now;
      }
      state = this.spare;
    }
    return this.algorithm.check(state, cost, now, out);
  }

  /** Spend `cost` for `key` at `now`; call only after {@link check} allowed it at the same `now`. */
  commit(key: string, cost: number, now: number): void {
    let state = this.states.get(key);
    if (state === undefined) {
      if (this.spare !== undefined && this.spareKey === key && this.spareNow === now) {
        state = this.spare;
      } else {
        state = this.algorithm.init(now);
      }
      this.spare = undefined;
      this.now = now;
      this.states.insert(key, state);
    }
    this.algorithm.commit(state, cost, now);
  }

  /** Drop every idle state; returns how many were dropped. O(size); for a periodic timer. */
  sweep(now: number): number {
    this.now = now;
    return this.states.sweep();
  }

  /** Forget `key`; returns whether it was held. */
  delete(key: string): boolean {
    return this.states.delete(key);
  }

  /** Forget every key. */
  clear(): void {
    this.states.clear();
    this.spare = undefined;
  }
}
