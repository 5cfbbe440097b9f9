import { expect } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine, type EngineOptions } from '../../src/decision/engine.js';
import { type ErrorCode, isRateMeshError } from '../../src/errors.js';
import type { PolicySpec } from '../../src/types.js';

export const T0 = 1_700_000_000_000;

/** An engine on its own ManualClock, gossiping every 10 ms (stale after 50 ms) unless `opts` says otherwise. */
export function engine(
  policies: readonly PolicySpec[],
  opts: Partial<EngineOptions> = {},
  clock = new ManualClock(T0),
): { e: Engine; clock: ManualClock } {
  return { e: new Engine({ gossipIntervalMs: 10, policies, clock, ...opts }), clock };
}

/** Asserts `fn` throws a RateMeshError with `code`. */
export function expectCode(fn: () => unknown, code: ErrorCode): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(isRateMeshError(thrown), `expected a RateMeshError ${code}, got ${String(thrown)}`).toBe(true);
  if (isRateMeshError(thrown)) expect(thrown.code).toBe(code);
}

/** Build `from`'s gossip and deliver it to each of `to`; returns the results. */
export function gossip(from: Engine, ...to: Engine[]): { ok: boolean; reason?: string }[] {
  const bytes = from.buildGossip();
  return to.map((t) => t.receiveGossip(from.nodeId, bytes));
}

/** Admit up to `n` requests of cost 1; returns how many were allowed. */
export function spend(e: Engine, policy: string, key: string, n: number): number {
  let ok = 0;
  for (let i = 0; i < n; i++) if (e.check(policy, key).allowed) ok++;
  return ok;
}
