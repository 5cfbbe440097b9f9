/**
 * Random meshes and traffic against one key, to find windows past L: how often, and by how
 * much, the controlled rule over-admits where views disagree (bursts, jitter, loss, slow
 * gossip). A measurement, not a test: it prints what it finds.
 *
 *   npm run bench:limit-fuzz -- [--seeds 300] [--from 0] [--costs M] [--keys K]
 *
 * Each seed draws N in {3, 4, 6, 8, 12, 16}, L in [N, 4N), g in {50, 100, 250} ms, d = 10 ms,
 * jitter up to 60 ms on half the seeds, loss up to 30 % on 30 %, W = 10 s, 60 s of traffic; each
 * node steady (0.2 to 20 a second), bursty (20 bursts of 1 to 10, one in five up to 200) or a
 * burst of up to 50 about once a window. Each mesh ticks fast while a key is tight at the interval
 * the live mesh picks (fastGossipIntervalMs 'auto'); `--fast-gossip off`: every tick g apart.
 * `--costs M`: each request costs 1 to M (uniform, from a generator of its own, so the mesh and
 * the arrivals are the seed's), L is M times as large, and windows are summed in units of cost.
 * `--keys K`: seven requests in ten go to the seed's key, the rest to one of K - 1 others (a
 * generator of its own), so decisions on one key come between others' (the hot key's fast path
 * changes hands); the worst window is each key's, L each key's.
 */
import { fastGossipIntervalMs } from '../src/mesh/auto-relay.js';
import { fuzzMesh, fuzzTraffic, replayFuzzKeys } from '../src/sim/fuzz.js';
import { worstRolling } from '../src/sim/metrics.js';
import { Prng } from '../src/sim/prng.js';
import { Simulator } from '../src/sim/simulator.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 0)
    throw new Error(`${name} takes a whole number, got ${process.argv[i + 1]}`);
  return v;
}

const W = 10_000;
const T = 60_000;
const seeds = arg('--seeds', 300);
const from = arg('--from', 0);
const fi = process.argv.indexOf('--fast-gossip');
const fastOff = fi >= 0 && process.argv[fi + 1] === 'off';
const maxCost = Math.max(1, arg('--costs', 1));
const keys = Math.max(1, arg('--keys', 1));
let over = 0;
let excess = 0;
let admittedAll = 0;
let exceeding: string[] = [];
for (let seed = from + 1; seed <= from + seeds; seed++) {
  const rng = new Prng(seed * 104729);
  const { nodes: N, limit: units, jitterMs, loss, gossipIntervalMs: g } = fuzzMesh(rng);
  const L = units * maxCost;
  const costs = new Prng(seed * 7919);
  const picks = new Prng(seed * 6007);
  const sim = new Simulator({
    nodes: N,
    policies: [
      { name: 'p', limit: L, windowMs: W, buckets: 10, overAdmission: 'controlled', fallback: true },
    ],
    gossipIntervalMs: g,
    delayMs: 10,
    jitterMs,
    loss,
    seed,
    fastGossipMs: fastOff ? 0 : fastGossipIntervalMs(N, g, 10),
    engine: { expectedMembers: N },
  });
  const byKey = replayFuzzKeys(
    sim,
    fuzzTraffic(rng, N, T, W),
    keys,
    keys > 1 ? () => (picks.next() < 0.7 ? 0 : 1 + Math.floor(picks.next() * (keys - 1))) : () => 0,
    maxCost > 1 ? () => 1 + Math.floor(costs.next() * maxCost) : undefined,
  );
  let worst = 0;
  for (const admitted of byKey) {
    admittedAll += admitted.length;
    worst = Math.max(worst, worstRolling(admitted, W));
  }
  if (worst > L) {
    over++;
    excess += worst - L;
    exceeding.push(`${seed} (N ${N}, L ${L}, g ${g}, +${worst - L})`);
  }
}
if (exceeding.length > 40) exceeding = [...exceeding.slice(0, 40), '...'];
console.log(
  `seeds ${from + 1}-${from + seeds}${fastOff ? ' (fast gossip off)' : ''}${maxCost > 1 ? ` (costs 1-${maxCost}, L ${maxCost} times as large, in units)` : ''}${keys > 1 ? ` (${keys} keys, each its worst window)` : ''}: ${over} with a window past L (sum of excess ${excess}), admitted ${admittedAll}`,
);
if (exceeding.length > 0) console.log(`past L: ${exceeding.join(', ')}`);
