import type { Simulator } from './simulator.js';

/**
 * The seed trace (shared/seeds/000): request i arrives at i × 0.5 ms (2,000/s),
 * at a node chosen by xorshift64 from seed 0x9E3779B97F4A7C15 with balancer
 * weights 40/20/10/10/5/5/5/5 %. Ported exactly (64-bit arithmetic in BigInt).
 */
export interface Trace {
  /** Arrival time of each request, ms. */
  readonly t: Float64Array;
  /** Node of each request. */
  readonly node: Uint8Array;
  readonly nodes: number;
}

export const SEED_WEIGHTS = [40, 20, 10, 10, 5, 5, 5, 5] as const;
const MASK = (1n << 64n) - 1n;

export function seedTrace(nReq = 20_000, weights: readonly number[] = SEED_WEIGHTS): Trace {
  const t = new Float64Array(nReq);
  const node = new Uint8Array(nReq);
  let s = 0x9e3779b97f4a7c15n;
  for (let i = 0; i < nReq; i++) {
    s ^= (s << 13n) & MASK;
    s ^= s >> 7n;
    s ^= (s << 17n) & MASK;
    let r = Number(s % 100n);
    let pick = 0;
    for (let j = 0; j < weights.length; j++) {
      if (r < weights[j]!) {
        pick = j;
        break;
      }
      r -= weights[j]!;
    }
    node[i] = pick;
    t[i] = i * 0.5;
  }
  return { t, node, nodes: weights.length };
}

/**
 * Nodes that start on a key at once (bench/cold-burst.ts, test/sim/cold-sharers.test.ts): node 0
 * sends one request on `key` at `reportAt`; from `burstAt` every other node sends 5, one every
 * `stagger` ms, one node after the other; then node 0 sends 30. The times admitted.
 */
export function coldBurst(
  sim: Simulator,
  policy: string,
  key: string,
  reportAt: number,
  burstAt: number,
  stagger: number,
): number[] {
  const admitted: number[] = [];
  const offer = (node: number, t: number) => {
    sim.runUntil(t);
    if (sim.request(node, policy, key).allowed) admitted.push(t);
  };
  offer(0, reportAt);
  let t = burstAt;
  for (let n = 1; n < sim.engines.length; n++)
    for (let j = 0; j < 5; j++) {
      offer(n, t);
      t += stagger;
    }
  for (let j = 0; j < 30; j++) offer(0, t);
  return admitted;
}
