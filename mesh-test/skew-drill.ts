/**
 * Live clock-skew drill (issue 11): 8 node processes on 127.0.0.1 replay the seed
 * trace while the busiest node's clock (40 % of the traffic) runs `skewMs` off
 * true time. Its limiter reads the skewed clock (gossip send times, sync round
 * trips, bucket ids); decisions are recorded in true time, so the worst rolling
 * 1 s is what a central observer would count.
 *
 * Within maxClockOffsetMs (1 s) the peers estimate the offset from gossip send
 * times and the sync at join, and move the skewed node's counts into their own
 * buckets. Past it the skewed node is treated as stale by the others (they count
 * it at least L/N) and it sees every peer as too far off, so it falls back to L/N
 * on its own counts. Bound: worst 1 s ≤ L + 2 % either way.
 */

import type { Trace } from '../src/sim/trace.js';
import { check, type DrillResult, pick } from './drills.js';
import { Mesh, SEED_POLICY, sleep } from './harness.js';
import { figures, replayLive, sum } from './replay.js';

const L = SEED_POLICY.limit;
const BOUND = Math.floor(L * 1.02);

export async function skewDrill(trace: Trace, g: number, d: number, skewMs: number): Promise<DrillResult> {
  const mesh = await Mesh.start({
    nodes: trace.nodes,
    policies: [SEED_POLICY],
    gossipIntervalMs: g,
    injectDelayMs: d,
    skewMs: [skewMs],
  });
  try {
    if (Math.abs(skewMs) < 1000) await mesh.waitForPeers(30_000);
    else {
      // past maxClockOffsetMs the skewed node and its peers see each other as stale by design:
      // wait for every connection instead (bounded), then a second for the offsets to settle
      const until = Date.now() + 30_000;
      const want = mesh.procs.length - 1;
      while ((await Promise.all(mesh.procs.map((p) => p.status()))).some((s) => s.connected < want)) {
        if (Date.now() > until) throw new Error('skew drill: the mesh did not connect within 30 s');
        await sleep(100);
      }
      await sleep(1000);
    }
    const out = await replayLive(mesh, trace, { policy: SEED_POLICY.name });
    const f = figures(trace, out.admitted, L, SEED_POLICY.windowMs);
    const reports = out.reports;
    const skewed = reports.find((r) => r.index === 0);
    const others = reports.filter((r) => r.index !== 0);
    const skewedId = mesh.procs[0]!.peerId;
    const offsets = others.map((r) => {
      const v = r.peers.find((p) => p.id === skewedId);
      return v === undefined ? null : Math.round(v.clockOffsetMs);
    });
    const fallback0 = skewed?.engine.byMode.fallback ?? 0;
    const checks = [
      check(
        'requests decided',
        sum(reports.map((r) => r.served)),
        `= ${trace.t.length}`,
        sum(reports.map((r) => r.served)) === trace.t.length,
      ),
      check('worst 1 s over the trace', f.worst_1s, `<= ${BOUND} (L + 2 %)`, f.worst_1s <= BOUND),
    ];
    return {
      drill: `clock skew (the busiest node's clock ${skewMs > 0 ? '+' : ''}${skewMs} ms off, seed trace on 8 nodes)`,
      g_ms: g,
      d_ms: d,
      ...pick(f),
      checks,
      details: {
        skew_ms: skewMs,
        vs_window_bound: f.vs_window_bound,
        offsets_seen_by_peers_ms: offsets,
        skewed_node_fallback_decisions: fallback0,
        skewed_node_admitted: skewed?.admitted,
        skewed_node_sees_skewed_peers: skewed?.engine.skewedPeers,
        peers_seeing_a_skewed_peer: others.map((r) => r.engine.skewedPeers),
      },
    };
  } finally {
    await mesh.close();
  }
}
