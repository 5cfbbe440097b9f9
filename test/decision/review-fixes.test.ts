import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decodeMessage, TYPE_GOSSIP } from '../../src/crdt/codec.js';
import { Engine } from '../../src/decision/engine.js';
import { T0 } from './helpers.js';

function gossip(bytes: Uint8Array) {
  const d = decodeMessage(bytes);
  if (!d.ok || d.message.type !== TYPE_GOSSIP) throw new Error('not gossip');
  return d.message;
}

describe('a policy version that comes to match again', () => {
  const v1 = [{ name: 'p', limit: 100, windowMs: 60_000, buckets: 10 }];
  const v2 = [{ name: 'p', limit: 200, windowMs: 60_000, buckets: 10 }];

  /**
   * a admits on its version while b runs the other, then one of them (`moves`) takes the
   * other's version: what b holds of a's counts after 4 ticks, against what a admitted.
   */
  function matchAgain(moves: 'a' | 'b') {
    const clock = new ManualClock(T0);
    const a = new Engine({ policies: moves === 'a' ? v2 : v1, clock, nodeId: 'a' });
    const b = new Engine({ policies: moves === 'a' ? v1 : v2, clock, nodeId: 'b' });
    const tick = () => {
      b.receiveGossip('a', a.buildGossip());
      a.receiveGossip('b', b.buildGossip());
      clock.advance(100);
    };
    for (let i = 0; i < 3; i++) tick();
    let admitted = 0;
    for (let i = 0; i < 60; i++) if (a.check('p', 'k').allowed) admitted++;
    for (let i = 0; i < 3; i++) tick();
    const before = b.estimate('p', 'k');
    (moves === 'a' ? a : b).replacePolicies(v1);
    for (let i = 0; i < 4; i++) tick();
    return { admitted, before, after: b.estimate('p', 'k') };
  }

  it("the peer's counts made while versions differed arrive at once, not at the next anti-entropy", () => {
    const r = matchAgain('b');
    expect(r.before).toBe(0); // another version: not merged
    expect(r.after).toBe(r.admitted);
  });

  it('the same when the peer moves to our version', () => {
    const r = matchAgain('a');
    expect(r.after).toBe(r.admitted);
  });
});

describe('relay mode asks for no repairs', () => {
  it('after answering a sync, a relaying node neither asks for nor makes repairs every tick', () => {
    const policies = [{ name: 'p', limit: 1000, windowMs: 10_000, buckets: 10 }];
    const clock = new ManualClock(T0);
    const a = new Engine({ policies, clock, nodeId: 'a', relayHops: 3 });
    const b = new Engine({ policies, clock, nodeId: 'b', relayHops: 3 });
    for (let k = 0; k < 50; k++) b.check('p', `k${k}`);
    for (let i = 0; i < 3; i++) {
      b.receiveGossip('a', a.buildGossip());
      a.receiveGossip('b', b.buildGossip());
      clock.advance(100);
    }
    a.answerSync('b', b.buildSyncRequest());
    let entries = 0;
    for (let i = 0; i < 40; i++) {
      clock.advance(100);
      const ma = a.buildGossip();
      b.receiveGossip('a', ma);
      const mb = b.buildGossip();
      a.receiveGossip('b', mb);
      expect(gossip(ma).nacks.length).toBe(0);
      if (i >= 10) entries += gossip(mb).entries.length;
    }
    // b's 50 keys were sent whole while recent; past that, nothing is resent on request
    expect(entries).toBe(0);
  });
});
