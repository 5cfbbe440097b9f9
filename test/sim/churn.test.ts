import { describe, expect, it } from 'vitest';
import { worstRolling } from '../../src/sim/metrics.js';
import { Simulator } from '../../src/sim/simulator.js';
import { L, policy, TRACE } from './helpers.js';

/**
 * A rolling deploy that never ends: nodes 1..3 of a 4-node mesh are replaced
 * by fresh processes with fresh ids, one every 667 ms, until node 0 has seen
 * `ids` peer ids; then the seed trace (each request to node i mod 4) runs on
 * the mesh as it stands.
 */
function churnThenTrace(ids: number) {
  const sim = new Simulator({
    nodes: 4,
    policies: policy(),
    gossipIntervalMs: 10,
    delayMs: 10,
    engine: { expectedMembers: 4 },
  });
  const step = 2000 / 3;
  let t = 0;
  for (let i = 0; i < ids; i++) {
    t += step;
    sim.runUntil(t);
    sim.replace(1 + (i % 3));
  }
  const start = t + 3000;
  sim.runUntil(start);
  const tableAfterChurn = sim.engines[0]!.stats().peerTable;
  const admitted: number[] = [];
  for (let i = 0; i < TRACE.t.length; i++) {
    const at = start + TRACE.t[i]!;
    sim.runUntil(at);
    if (sim.request(TRACE.node[i]! % 4, 'seed', 'global').allowed) admitted.push(at);
  }
  sim.runUntil(start + 11_000);
  const stats = sim.engines.map((e) => e.stats());
  return { sim, admitted, worst1s: worstRolling(admitted, 1000), stats, tableAfterChurn };
}

describe('peer churn (fresh peer ids, as every rolling deploy brings)', () => {
  it('300 peer ids through a 4-node mesh: no too-many-peers drop, the table holds live members only, worst 1 s <= L + 2 %', () => {
    const r = churnThenTrace(300);
    expect(r.sim.replaced).toBe(300);
    const node0 = r.stats[0]!;
    // measured before departed peers were forgotten (same test, the engine at 459ce28, where this work branched): node 0's table
    // filled at 256 ids, 12,897 messages were dropped as too-many-peers and node 0 saw 0 live
    // peers (it decided alone, on its own counts). The limit still held in this run (admitted
    // 9,386, worst 1 s 989) only because nodes 1..3 still heard node 0 and made up for it.
    for (const s of r.stats) expect(s.dropped['too-many-peers'] ?? 0).toBe(0);
    expect(node0.peersForgotten).toBeGreaterThanOrEqual(290);
    // 3 live members, plus the departed ones whose counts may still be in a window
    expect(r.tableAfterChurn).toBeLessThanOrEqual(12);
    expect(node0.peerTable).toBeLessThanOrEqual(3);
    expect(node0.livePeers).toBe(3);
    expect(r.worst1s).toBeLessThanOrEqual(L * 1.02);
    // and the mesh still admits what it should (the window bound of this trace is 10,000)
    expect(r.admitted.length).toBeGreaterThanOrEqual(9500);
  });
});
