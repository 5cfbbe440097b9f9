import type { Decision, KeyOutcome, PolicyKey, RateLimiter } from '../types.js';

/**
 * Which pairs a counted check spends on, whatever their outcome: `every`, all of them (hits
 * over the limit count, envoyproxy/ratelimit's default); `refused`, when any pair refused (or
 * the caller refused the request itself), the refused pairs only, else every pair (their
 * `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`).
 */
export type CountMode = 'every' | 'refused';

/**
 * A limiter that can count as envoyproxy/ratelimit does (the decision engine, and the mesh
 * limiter through it): {@link RateLimiter.checkAll} with one cost per pair, then the costs
 * spent by {@link CountMode} whatever the decision. A global pair's forced spend stops where
 * the node's own count over the window reaches L (its peers credit an origin with at most what
 * it could have admitted). `allowed` is checkAll's, and false when `over`.
 */
export interface CountingLimiter {
  checkAllCounted(
    pairs: readonly PolicyKey[],
    costs: readonly number[],
    mode: CountMode,
    over?: boolean,
  ): Decision & { outcomes: KeyOutcome[] };
}

/** Whether `limiter` offers {@link CountingLimiter.checkAllCounted}. */
export function canCount(limiter: RateLimiter): limiter is RateLimiter & CountingLimiter {
  return typeof (limiter as Partial<CountingLimiter>).checkAllCounted === 'function';
}
