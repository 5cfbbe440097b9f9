/**
 * How the controlled rule holds as gossip slows against the window: the seed trace (L = 1,000
 * per 1 s, 2,000 req/s) on a warm mesh (every node has heard every other for 3 s, with no
 * traffic), so the key's demand starts on every node at once, as in the live harness. Two
 * shapes: 8 nodes broadcasting, and 32 relaying with fanout 3 (the live 32-node run).
 * Prints each row's worst 1 s over the run and after its first 1.5 s, what it admitted, the
 * gossip horizon g + D (D: the data's expected age on arrival, relay hops included), and
 * whether the engine warns about the policy (a window under twice the horizon).
 *
 *   npx tsx bench/slow-gossip.ts
 */
import { liveTrace } from '../mesh-test/accuracy.js';
import { SEED_POLICY } from '../mesh-test/harness.js';
import { dataDelayMs, expectedRelayHops } from '../src/decision/constants.js';
import { worstRolling } from '../src/sim/metrics.js';
import { Simulator } from '../src/sim/simulator.js';
import { printTable } from './table.js';

const POLICY = SEED_POLICY;
const WARM_MS = 3000;
const D = 10;

function row(nodes: number, fanout: number, g: number): (string | number)[] {
  const trace = liveTrace(nodes, 10);
  let warned = 0;
  const sim = new Simulator({
    nodes,
    ...(fanout > 0 ? { relay: { fanout } } : {}),
    policies: [POLICY],
    gossipIntervalMs: g,
    delayMs: D,
    loss: 0,
    cuts: [],
    seed: 7,
    engine: { expectedMembers: nodes, logger: { warn: () => void warned++ } },
  });
  const admitted: number[] = [];
  for (let i = 0; i < trace.t.length; i++) {
    const t = trace.t[i]! + WARM_MS;
    sim.runUntil(t);
    if (sim.request(trace.node[i]!, POLICY.name, 'global').allowed) admitted.push(t);
  }
  const hops = fanout > 0 ? expectedRelayHops(nodes, fanout) : 0;
  const horizon = g + dataDelayMs(g, D, hops);
  const worst = worstRolling(admitted, POLICY.windowMs);
  return [
    nodes,
    fanout > 0 ? `relay f=${fanout}` : 'broadcast',
    g,
    D,
    Math.round(horizon),
    (horizon / POLICY.windowMs).toFixed(2),
    worst,
    `${(((worst - POLICY.limit) / POLICY.limit) * 100).toFixed(1)}%`,
    worstRolling(
      admitted.filter((t) => t > WARM_MS + 1500),
      POLICY.windowMs,
    ),
    admitted.length,
    warned > 0 ? 'yes' : 'no',
  ];
}

const rows: (string | number)[][] = [];
for (const g of [100, 200, 250, 500, 1000]) rows.push(row(8, 0, g));
for (const g of [100, 200, 250, 300, 500, 1000]) rows.push(row(32, 3, g));
console.log(
  `seed trace, L = ${POLICY.limit} per ${POLICY.windowMs} ms, 2,000 req/s over 10 s, on a mesh warm for ${WARM_MS} ms (simulator, production engine)`,
);
printTable(
  [
    'nodes',
    'gossip',
    'g ms',
    'd ms',
    'g + D ms',
    '(g + D) / W',
    'worst 1s',
    'over L',
    'worst 1s after 1.5 s',
    'admitted',
    'engine warns',
  ],
  rows,
);
