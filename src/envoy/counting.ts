import type { CountingLimiter, RateLimiter } from '../types.js';

// The types live with the limiter interface (src/types.ts): the mesh implements them without importing this layer.
export type { CountingLimiter, CountMode } from '../types.js';

/** Whether `limiter` offers {@link CountingLimiter.checkAllCounted}. */
export function canCount(limiter: RateLimiter): limiter is RateLimiter & CountingLimiter {
  return typeof (limiter as Partial<CountingLimiter>).checkAllCounted === 'function';
}
