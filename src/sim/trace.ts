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
