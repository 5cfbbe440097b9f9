import { ErrorCodes, RateMeshError } from './errors.js';

/**
 * A source of time in milliseconds. Readings are wall-clock epoch milliseconds
 * that never go backwards within a process: the production clock anchors the
 * monotonic `performance.now()` to the wall clock once, at start, so an NTP
 * step does not move local decisions while buckets stay keyed by wall time.
 */
export interface Clock {
  now(): number;
}

const origin = performance.timeOrigin;
const perf = performance;

/** The production clock: wall time at process start plus monotonic elapsed time. */
export const systemClock: Clock = {
  now: () => origin + perf.now(),
};

/** A clock that only moves when told to; for tests and the simulator. */
export class ManualClock implements Clock {
  private t: number;

  constructor(start = 0) {
    this.t = checkTime(start);
  }

  now(): number {
    return this.t;
  }

  /** Set the time; it may go backwards (to test that nothing extra is admitted). */
  set(t: number): void {
    this.t = checkTime(t);
  }

  advance(ms: number): void {
    this.t = checkTime(this.t + ms);
  }
}

/** Throws a clear error for NaN or infinite times; returns the time otherwise. */
export function checkTime(t: number): number {
  if (typeof t !== 'number' || !Number.isFinite(t)) {
    throw new RateMeshError(
      ErrorCodes.CLOCK_INVALID,
      `time must be a finite number of milliseconds (got ${String(t)})`,
    );
  }
  return t;
}
