import { describe, expect, it } from 'vitest';
import { defaultStaleAfterMs, expectedRelayHops } from '../../src/decision/constants.js';
import { Simulator } from '../../src/sim/simulator.js';
import { defaultMesh } from '../../src/sim/two-sided.js';

const policies = [{ name: 'p', limit: 1000, windowMs: 1000 }];

describe("simulator relay: 'auto' (what a mesh node does with relayFanout left out)", () => {
  it('broadcasts up to 101 nodes at g = 100 ms, relays at fanout 4 above, with the hops in the engine', () => {
    for (const nodes of [2, 8, 32, 64, 101]) {
      const sim = new Simulator({ ...defaultMesh(nodes), policies });
      expect(sim.relay).toBeUndefined();
      expect(sim.engines[0]!.staleAfterMs).toBe(defaultStaleAfterMs(100, 10, 0));
    }
    for (const nodes of [102, 256]) {
      const sim = new Simulator({ ...defaultMesh(nodes), policies });
      expect(sim.relay).toEqual({ fanout: 4 });
      expect(sim.engines[0]!.staleAfterMs).toBe(defaultStaleAfterMs(100, 10, expectedRelayHops(nodes, 4)));
    }
    // the threshold follows g: broadcast would bring (N - 1) * 1000 / g messages a second
    expect(new Simulator({ ...defaultMesh(64), gossipIntervalMs: 50, policies }).relay).toEqual({
      fanout: 4,
    });
  });

  it('at 256 nodes: 4 messages in per node a tick, 40 a second', () => {
    const sim = new Simulator({ ...defaultMesh(256), policies });
    sim.runUntil(1000);
    expect(sim.delivered / 256).toBeLessThanOrEqual(50);
    expect(sim.delivered / 256).toBeGreaterThanOrEqual(39);
  });
});
