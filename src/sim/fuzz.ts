import type { Prng } from './prng.js';
import type { Simulator } from './simulator.js';

/**
 * The random meshes and traffic of `npm run bench:limit-fuzz` (bench/limit-fuzz.ts), shared with
 * the tests that replay one of its seeds. Draws in a fixed order from `rng`, so a seed gives the
 * same mesh and traffic wherever it is drawn.
 */

/** One key's random mesh: N in {3, 4, 6, 8, 12, 16}, L in [N, 4N), jitter, loss and g. */
export interface FuzzMesh {
  nodes: number;
  limit: number;
  jitterMs: number;
  loss: number;
  gossipIntervalMs: number;
}

/** The mesh of a seed: up to 60 ms of jitter on half of them, up to 30 % loss on 30 %, g in {50, 100, 250} ms. */
export function fuzzMesh(rng: Prng): FuzzMesh {
  const nodes = [3, 4, 6, 8, 12, 16][Math.floor(rng.next() * 6)]!;
  const limit = nodes + Math.floor(rng.next() * 3 * nodes);
  const jitterMs = rng.next() < 0.5 ? Math.floor(rng.next() * 60) : 0;
  const loss = rng.next() < 0.3 ? rng.next() * 0.3 : 0;
  const gossipIntervalMs = [50, 100, 250][Math.floor(rng.next() * 3)]!;
  return { nodes, limit, jitterMs, loss, gossipIntervalMs };
}

/**
 * Traffic of `nodes` nodes on one key over `T` ms with windows of `W`, in time order: each node
 * steady (0.2 to 20 a second), bursty (20 bursts of 1 to 10, one in five up to 200) or a burst of
 * up to 50 about once a window.
 */
export function fuzzTraffic(rng: Prng, nodes: number, T: number, W: number): { t: number; n: number }[] {
  const ev: { t: number; n: number }[] = [];
  for (let n = 0; n < nodes; n++) {
    const kind = rng.next();
    if (kind < 0.3) {
      const r = rng.next() * 20;
      if (r > 0.2)
        for (let t = 500 + rng.next() * 1000; t < T; t += 1000 / r) ev.push({ t: Math.floor(t), n });
    } else if (kind < 0.7) {
      for (let b = 0; b < 20; b++) {
        const t0 = 300 + Math.floor(rng.next() * (T - 1000));
        const size = 1 + Math.floor(rng.next() * (rng.next() < 0.2 ? 200 : 10));
        for (let j = 0; j < size; j++) ev.push({ t: t0 + Math.floor(j * rng.next() * 3), n });
      }
    } else {
      let t = 300 + rng.next() * 2000;
      while (t < T) {
        const size = 1 + Math.floor(rng.next() * 50);
        for (let j = 0; j < size; j++) ev.push({ t: Math.floor(t) + j, n });
        t += W + (rng.next() - 0.5) * 400;
      }
    }
  }
  ev.sort((a, b) => a.t - b.t);
  return ev;
}

/** Each event a request of key `k` of policy `p` at its node, of cost 1; the admitted times. */
export function replayFuzz(sim: Simulator, ev: readonly { t: number; n: number }[]): number[] {
  return replayFuzzKeys(sim, ev, 1, () => 0)[0]!;
}

/**
 * {@link replayFuzz} over `keys` keys: each request for key `k<i>`, i from `pick` (0: `k`, the
 * key of {@link replayFuzz}), of a cost `cost` draws (1 without it); the admitted times by key,
 * one a unit of cost (a request of cost 3 admitted at t: t three times).
 */
export function replayFuzzKeys(
  sim: Simulator,
  ev: readonly { t: number; n: number }[],
  keys: number,
  pick: () => number,
  cost?: () => number,
): number[][] {
  const names = Array.from({ length: keys }, (_, i) => (i === 0 ? 'k' : `k${i}`));
  const admitted = names.map((): number[] => []);
  for (const e of ev) {
    sim.runUntil(e.t);
    const c = cost === undefined ? 1 : cost();
    const i = pick();
    if (sim.request(e.n, 'p', names[i]!, c).allowed) for (let u = 0; u < c; u++) admitted[i]!.push(e.t);
  }
  return admitted;
}
