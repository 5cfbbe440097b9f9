import { ErrorCodes, RateMeshError } from '../errors.js';
import type { LocalAlgorithmSpec } from '../types.js';
import { FixedWindow } from './fixed-window.js';
import { Gcra } from './gcra.js';
import { LeakyBucket } from './leaky-bucket.js';
import { SlidingWindowCounter } from './sliding-window-counter.js';
import { SlidingWindowLog } from './sliding-window-log.js';
import { TokenBucket } from './token-bucket.js';
import type { LocalAlgorithm } from './types.js';

export { FixedWindow, type FixedWindowOptions, type FixedWindowState } from './fixed-window.js';
export { Gcra, type GcraOptions, type GcraState } from './gcra.js';
export { KeyedLimiter, type KeyedLimiterOptions } from './keyed-limiter.js';
export { LeakyBucket, type LeakyBucketOptions, type LeakyBucketState } from './leaky-bucket.js';
export {
  SlidingWindowCounter,
  type SlidingWindowCounterOptions,
  type SlidingWindowCounterState,
} from './sliding-window-counter.js';
export {
  SlidingWindowLog,
  type SlidingWindowLogOptions,
  type SlidingWindowLogState,
} from './sliding-window-log.js';
export { TokenBucket, type TokenBucketOptions, type TokenBucketState } from './token-bucket.js';
export { type AlgoResult, type LocalAlgorithm, newAlgoResult } from './types.js';

/**
 * Builds the local algorithm a validated spec names. Parameters are checked
 * again here (a bad value throws a POLICY_INVALID {@link RateMeshError} naming
 * the field), so a spec never fails later, on a request.
 */
export function createAlgorithm(spec: Required<LocalAlgorithmSpec>): LocalAlgorithm<unknown> {
  const { limit, windowMs } = spec;
  switch (spec.algorithm) {
    case 'gcra':
      return new Gcra({ limit, windowMs, burst: spec.burst });
    case 'token-bucket':
      return new TokenBucket({ limit, windowMs, burst: spec.burst });
    case 'fixed-window':
      return new FixedWindow({ limit, windowMs });
    case 'sliding-window-counter':
      return new SlidingWindowCounter({ limit, windowMs, buckets: spec.buckets });
    case 'sliding-window-log':
      return new SlidingWindowLog({ limit, windowMs });
    case 'leaky-bucket':
      return new LeakyBucket({ limit, windowMs, queue: spec.queue, deadlineMs: spec.deadlineMs });
    default:
      throw new RateMeshError(
        ErrorCodes.POLICY_INVALID,
        `unknown algorithm ${JSON.stringify(String((spec as { algorithm: unknown }).algorithm))}`,
        'algorithm',
      );
  }
}
