/**
 * The real network path, every landing: 4 node processes on 127.0.0.1 (libp2p,
 * gossipsub, noise, yamux), each replaying its share of a 4 s trace in real
 * time against one global limit. Bounds are generous for a loaded 2-core CI box
 * (g = 50 ms, expected delay 50 ms) but still fail if gossip does not flow: with
 * no gossip each node would admit up to L on its own, 4 × L in all.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { killAllChildren, Mesh, readDecisions } from '../../mesh-test/harness.js';
import { figures, replayLive, sum } from '../../mesh-test/replay.js';
import { bothErrors, pairLive } from '../../mesh-test/two-sided.js';
import { seedTrace, type Trace } from '../../src/sim/trace.js';
import { globalKeyArrivals } from '../../src/sim/two-sided.js';
import type { PolicySpec } from '../../src/types.js';

const NODES = 4;
const L = 200;
const POLICY: PolicySpec = { name: 'live', limit: L, windowMs: 1000, buckets: 20 };

/** 1,600 requests at 2.5 ms (400/s, 2 × L) over 4 s, balancer weights 40/30/20/10 %. */
function trace(): Trace {
  const s = seedTrace(1600, [40, 30, 20, 10]);
  return { t: s.t.map((t) => t * 5), node: s.node, nodes: NODES };
}

/** Both meshes: gossip every 50 ms, expected delay 50 ms (generous for a loaded CI box). */
const MESH = {
  gossipIntervalMs: 50,
  injectDelayMs: 0,
  expectedDelayMs: 50,
  heartbeatMs: 200,
  discoveryIntervalMs: 500,
} as const;

describe('live mesh of real node processes', () => {
  afterAll(() => killAllChildren());

  it('keeps the global limit across processes and gossips', { timeout: 90_000 }, async () => {
    const tr = trace();
    const mesh = await Mesh.start({
      nodes: NODES,
      policies: [POLICY],
      ...MESH,
    });
    try {
      await mesh.waitForPeers(40_000);
      const out = await replayLive(mesh, tr, { policy: POLICY.name });
      const f = figures(tr, out.admitted, L, POLICY.windowMs);
      const r = out.reports;
      const summary = {
        ...f,
        served: r.map((x) => x.served),
        msgsIn: r.map((x) => x.gossip.msgsIn),
        msgsOut: r.map((x) => x.gossip.msgsOut),
        mergedIn: r.map((x) => x.engine.gossipIn),
        modes: r.map((x) => x.engine.byMode),
        lateP99: r.map((x) => x.lateMs.p99),
      };
      expect(r.length, JSON.stringify(summary)).toBe(NODES);
      // every request was served (none skipped)
      expect(sum(r.map((x) => x.served)), JSON.stringify(summary)).toBe(tr.t.length);
      // gossip flowed both ways on every node and the engines merged it
      for (const x of r) {
        expect(x.gossip.msgsOut, JSON.stringify(summary)).toBeGreaterThan(20);
        expect(x.gossip.msgsIn, JSON.stringify(summary)).toBeGreaterThan(20);
        expect(x.engine.gossipIn, JSON.stringify(summary)).toBeGreaterThan(20);
      }
      // the over-admission figure: within L + 10 % (the simulator puts this trace within L + 2 %);
      // without gossip it would be near 2 × L (every node admits its whole offer, 400/s)
      expect(f.worst_1s, JSON.stringify(summary)).toBeLessThanOrEqual(L * 1.1);
      // and it is a limiter, not a wall: at least 80 % of what an exact central log admits
      expect(f.vs_window_bound, JSON.stringify(summary)).toBeGreaterThanOrEqual(0.8);
    } finally {
      await mesh.close();
    }
  });

  it('denies no request of a key offered under its limit (both rules, live)', {
    timeout: 90_000,
  }, async () => {
    // bench:two-sided's 0.5 L row on 4 nodes for 4 s: L = 1,000 per 1 s, 500/s, nodes drawn
    // uniformly; an exact limiter admits every request. Each node's part (about 125 a window) is
    // under its share however its view of the peers goes: L/N = 250 when they all look stale.
    const planned = globalKeyArrivals(NODES, [[500, 0, 4000]]);
    const tr: Trace = { t: Float64Array.from(planned.t), node: Uint8Array.from(planned.node), nodes: NODES };
    const policies: PolicySpec[] = [
      { name: 'under', limit: 1000, windowMs: 1000 },
      { name: 'under-naive', limit: 1000, windowMs: 1000, overAdmission: 'naive' },
    ];
    const mesh = await Mesh.start({
      nodes: NODES,
      policies,
      ...MESH,
    });
    try {
      await mesh.waitForPeers(40_000);
      const naiveFile = (i: number) => `${mesh.dir}/under-naive-${i}.bin`;
      const out = await replayLive(mesh, tr, {
        policy: 'under',
        key: 'global',
        extra: (i) => ({ also: [{ policy: 'under-naive', decisionFile: naiveFile(i) }] }),
      });
      const live = pairLive(
        out.decisions,
        out.decisions.map((_, i) => readDecisions(naiveFile(i))),
      );
      const controlled = bothErrors(live.arrivals, live.controlled);
      const naive = bothErrors(live.arrivals, live.naive);
      const summary = JSON.stringify({ controlled, naive, late: out.reports.map((r) => r.lateMs.p99) });
      expect(live.arrivals.t.length, summary).toBe(tr.t.length);
      expect(controlled.exact, summary).toBe(tr.t.length);
      expect(controlled.false_denials_pct, summary).toBe(0);
      expect(naive.false_denials_pct, summary).toBe(0);
    } finally {
      await mesh.close();
    }
  });
});
