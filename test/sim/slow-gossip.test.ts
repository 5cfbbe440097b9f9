import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { slidingLogAdmits, worstRolling } from '../../src/sim/metrics.js';
import { Prng } from '../../src/sim/prng.js';
import { Simulator } from '../../src/sim/simulator.js';

const policy = {
  name: 'p',
  limit: 200,
  windowMs: 1000,
  buckets: 10,
  overAdmission: 'controlled' as const,
  fallback: true,
};

/** 8 nodes offered twice the limit, spread at random, for 15 s; what they admit. */
function run(g: number, d: number, seed: number) {
  const sim = new Simulator({
    nodes: 8,
    policies: [policy],
    gossipIntervalMs: g,
    delayMs: d,
    seed,
    // no early publishes (they would shorten the horizon): a node reports once a tick
    engine: { expectedMembers: 8, earlyPublishFraction: 1 },
  });
  const prng = new Prng(seed);
  const arrivals: number[] = [];
  const admitted: number[] = [];
  for (let i = 0; i < 6000; i++) {
    const at = i * 2.5;
    sim.runUntil(at);
    arrivals.push(at);
    if (sim.request(Math.floor(prng.next() * 8), 'p', 'k').allowed) admitted.push(at);
  }
  return { arrivals, admitted };
}

describe('controlled rule: gossip as slow as the window', () => {
  // The unseen horizon U (how long the least recently heard peer has been unseen) is then a
  // window or more: nothing peers admitted inside the window is known to have reached us. The
  // rule used to skip the shares there and admit on its estimate alone, each node up to L
  // (measured: 32 live nodes at g = 1 s admitted 2,014 in a second against L = 1,000).
  for (const [g, d] of [
    [1000, 10],
    [1000, 250],
    [2000, 10],
  ] as const) {
    it(`g = ${g} ms, d = ${d} ms on a 1 s window: the limit holds, and shares still admit`, () => {
      for (const seed of [1, 2, 3]) {
        const { arrivals, admitted } = run(g, d, seed);
        // Measured with the fix: at most 232 of 200 over the run (g = 2 s, as the nodes leave
        // L/N for the shares) and 202 after 4 s; 400 before it (d = 250 ms). Views about a window
        // old are not exact: a few percent past L, the published curve (bench:accuracy, g sweep).
        expect(worstRolling(admitted, policy.windowMs)).toBeLessThanOrEqual(policy.limit * 1.2);
        expect(
          worstRolling(
            admitted.filter((t) => t > 4000),
            policy.windowMs,
          ),
        ).toBeLessThanOrEqual(policy.limit * 1.05);
        expect(admitted.length).toBeGreaterThan(
          0.5 * slidingLogAdmits(arrivals, policy.limit, policy.windowMs).length,
        );
      }
    });
  }
});

describe('engine: a warning where gossip is slow against a policy window', () => {
  const global = (name: string, windowMs: number) => ({ name, limit: 100, windowMs, buckets: 10 });

  it('warns once per such policy, names it, and not for windows of twice the horizon or more', () => {
    const warned: Record<string, unknown>[] = [];
    // horizon g + D = 500 + 10: the 1 s window is under twice it, the 1,020 ms one is not
    const e = new Engine({
      gossipIntervalMs: 500,
      expectedDelayMs: 10,
      policies: [
        global('short', 1000),
        global('long', 1020),
        { name: 'mine', limit: 10, windowMs: 100, scope: 'local' as const },
      ],
      clock: new ManualClock(1_700_000_000_000),
      logger: { warn: (o) => warned.push(o as Record<string, unknown>) },
    });
    expect(warned.map((w) => w.policy)).toEqual(['short']);
    expect(warned[0]).toMatchObject({ windowMs: 1000, gossipIntervalMs: 500, dataDelayMs: 10 });
    // the same policies again: no second warning
    e.replacePolicies([global('short', 1000), global('long', 1020)]);
    expect(warned).toHaveLength(1);
    // a short window that a replacement brings in is warned about then
    e.replacePolicies([global('short', 1000), global('new', 600)]);
    expect(warned.map((w) => w.policy)).toEqual(['short', 'new']);
  });

  it('counts relay hops in the horizon', () => {
    const warned: unknown[] = [];
    // g = 100, d = 10, 5 hops: D = 10 + 5 × 60 = 310, horizon 410; W = 800 is under twice it
    new Engine({
      gossipIntervalMs: 100,
      expectedDelayMs: 10,
      relayHops: 5,
      policies: [global('p', 800)],
      clock: new ManualClock(1_700_000_000_000),
      logger: { warn: (o) => warned.push(o) },
    });
    expect(warned).toHaveLength(1);
  });
});
