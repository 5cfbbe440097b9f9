/**
 * Helpers shared by the local algorithms: parameter validation, filling an
 * {@link AlgoResult} in place, and exact retry-after search. Internal to
 * src/algorithms (not re-exported by the barrel).
 */
import { ErrorCodes } from '../errors.js';
import type { AlgoResult } from './types.js';

/** A pure "would `cost` fit at `t`" predicate, the one `check` decides with. */
export interface FitsAt<S> {
  fitsAt(state: S, cost: number, t: number): boolean;
}

/** How far the exact search may walk from the closed-form estimate (float noise is < 1 ms). */
const NUDGE_STEPS = 8;

/**
 * The smallest whole number of ms `r >= 1` such that `cost` fits at `now + r`,
 * given a closed-form estimate of the real-valued wait. The estimate is then
 * corrected against the algorithm's own predicate, so retrying exactly at
 * `now + r` is admitted and at `now + r - 1` is not, whatever the float
 * rounding in the closed form. Every predicate is monotone in time for a fixed
 * state, which is what makes a local walk sufficient.
 */
export function exactRetry<S>(
  algo: FitsAt<S>,
  state: S,
  cost: number,
  now: number,
  estimateMs: number,
): number {
  if (Number.isNaN(estimateMs) || estimateMs === Number.POSITIVE_INFINITY) return -1;
  let r = estimateMs > 1 ? Math.ceil(estimateMs) : 1;
  for (let i = 0; i < NUDGE_STEPS && r > 1 && algo.fitsAt(state, cost, now + r - 1); i++) r--;
  for (let i = 0; i < NUDGE_STEPS && !algo.fitsAt(state, cost, now + r); i++) r++;
  return r;
}

/**
 * Relative tolerance for float noise when a value measured against an epoch-sized
 * quantity is compared (16 to 32 ulps of it): far below one cell, so it can never
 * admit a whole extra cell, yet it keeps "full again at resetMs" and
 * "exactly at capacity" true despite rounding.
 */
export const REL_EPS = 2 ** -48;

/** Float-noise slack (cells) for comparisons around `x = now × rate` on a state of `capacity` cells. */
export function floatSlack(x: number, capacity: number): number {
  return (Math.abs(x) + capacity) * REL_EPS;
}

/** A duration in ms rounded up to a whole ms, never negative. */
export function ceilMs(ms: number): number {
  return ms > 0 ? Math.ceil(ms) : 0;
}

/** Whole cells left, never negative. */
export function cells(x: number): number {
  return x > 0 ? Math.floor(x) : 0;
}

/** True for a usable time reading (finite). */
export function isTime(t: number): boolean {
  return typeof t === 'number' && Number.isFinite(t);
}

/** True when `cost` can ever be admitted by an algorithm of this capacity. */
export function costFits(cost: number, capacity: number): boolean {
  return cost > 0 && cost <= capacity;
}

/** Fills `out` as admitted; returns true. */
export function allow(out: AlgoResult, remaining: number, resetMs: number, delayMs: number): boolean {
  out.allowed = true;
  out.remaining = remaining;
  out.retryAfterMs = 0;
  out.resetMs = resetMs;
  out.delayMs = delayMs;
  return true;
}

/** Fills `out` as denied; returns false. */
export function deny(out: AlgoResult, remaining: number, retryAfterMs: number, resetMs: number): boolean {
  out.allowed = false;
  out.remaining = remaining;
  out.retryAfterMs = retryAfterMs;
  out.resetMs = resetMs;
  out.delayMs = 0;
  return false;
}

/**
 * A non-finite `now` is refused and changes nothing: the result is a denial
 * with no advice (retry 0, reset 0), since no wait can be computed from it.
 * Callers validate times with `checkTime` first, so this is only a backstop.
 */
export function denyBadTime(out: AlgoResult): boolean {
  return deny(out, 0, 0, 0);
}

/** Algorithm parameters are policy fields: invalid ones are POLICY_INVALID (validated by src/validate.ts). */
export const PARAM_INVALID = ErrorCodes.POLICY_INVALID;
