import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { Prng } from '../../src/sim/prng.js';
import type { PolicySpec } from '../../src/types.js';
import { T0 } from './helpers.js';

const policies: PolicySpec[] = [{ name: 'p', limit: 100, windowMs: 1000 }];

/** What the horizon must be: the oldest send time (ours) of a live peer's newest data, by a full pass. */
function bruteOldest(core: {
  peers: { live: { lastHeard: number; delayMs: number }[] };
  cfg: { staleAfterMs: number };
}): number {
  let oldest = Number.POSITIVE_INFINITY;
  for (const p of core.peers.live) {
    const sent = p.lastHeard - Math.min(p.delayMs, core.cfg.staleAfterMs);
    if (sent < oldest) oldest = sent;
  }
  return oldest;
}

describe('the unseen horizon kept in order of the peers’ data', () => {
  it('equals a full pass after every message, in any order and with any delays', () => {
    const clock = new ManualClock(T0);
    const me = new Engine({ gossipIntervalMs: 100, policies, clock, expectedMembers: 25 });
    // 24 peers on clocks that agree with ours; their messages take 0 to 60 ms to arrive
    const peers = Array.from({ length: 24 }, (_, i) => {
      const c = new ManualClock(T0);
      return { e: new Engine({ gossipIntervalMs: 100, policies, clock: c, nodeId: `peer-${i}` }), c };
    });
    const prng = new Prng(17);
    // internals: the test reads the core the engine decides on
    const core = (me as unknown as { core: Parameters<typeof bruteOldest>[0] & { oldestSent: number } }).core;
    let inFlight: { at: number; from: string; bytes: Uint8Array }[] = [];
    let checked = 0;
    for (let step = 0; step < 3000; step++) {
      clock.advance(1 + Math.floor(prng.next() * 3));
      const p = peers[Math.floor(prng.next() * peers.length)]!;
      p.c.set(clock.now());
      inFlight.push({
        at: clock.now() + Math.floor(prng.next() * 60),
        from: p.e.nodeId,
        bytes: p.e.buildGossip(),
      });
      const due = inFlight.filter((m) => m.at <= clock.now());
      inFlight = inFlight.filter((m) => m.at > clock.now());
      for (const m of due) {
        // a message overtaken by a newer one of the same peer is dropped: the horizon holds still
        if (me.receiveGossip(m.from, m.bytes).ok) checked++;
        expect(core.oldestSent).toBe(bruteOldest(core));
      }
      me.check('p', 'k');
    }
    expect(checked).toBeGreaterThan(1500);
    expect(core.peers.live.length).toBe(24);
  });
});
