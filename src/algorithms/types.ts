import type { AlgorithmName } from '../types.js';

/** What an algorithm says about one request; filled in place to avoid allocation. */
export interface AlgoResult {
  allowed: boolean;
  /** Cells left after this request (if allowed) or now (if denied); never negative. */
  remaining: number;
  /** Denied: ms until `cost` fits; 0 when allowed; -1 when it never fits. */
  retryAfterMs: number;
  /** ms until the state is back to full capacity. */
  resetMs: number;
  /** leaky-bucket: ms to wait before proceeding when admitted; 0 otherwise. */
  delayMs: number;
}

export function newAlgoResult(): AlgoResult {
  return { allowed: false, remaining: 0, retryAfterMs: 0, resetMs: 0, delayMs: 0 };
}

/**
 * A pure local algorithm over a per-key state `S`. Time is passed in (ms);
 * a time earlier than one already seen by a state is treated as that later
 * time, so a clock that goes backwards never admits extra.
 */
export interface LocalAlgorithm<S> {
  readonly name: AlgorithmName;
  /** The largest cost a single request can ever be admitted with. */
  readonly capacity: number;
  /** A fresh state at `now`. */
  init(now: number): S;
  /** Decide whether `cost` fits at `now` without changing `state`; fills `out`, returns out.allowed. */
  check(state: S, cost: number, now: number, out: AlgoResult): boolean;
  /** Spend `cost` at `now`; call only after `check` allowed it at the same `now`. */
  commit(state: S, cost: number, now: number): void;
  /** True when `state` holds nothing a fresh state would not (safe to forget). */
  isIdle(state: S, now: number): boolean;
}
