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
  it("the peer's counts made while versions differed arrive at once, not at the next anti-entropy", () => {
    const pa = [{ name: 'p', limit: 100, windowMs: 60_000, buckets: 10 }];
    const pb = [{ name: 'p', limit: 200, windowMs: 60_000, buckets: 10 }];
    const clock = new ManualClock(T0);
    const a = new Engine({ policies: pa, clock, nodeId: 'a' });
    const b = new Engine({ policies: pb, clock, nodeId: 'b' });
    const tick = () => {
      b.receiveGossip('a', a.buildGossip());
      a.receiveGossip('b', b.buildGossip());
      clock.advance(100);
    };
    for (let i = 0; i < 3; i++) tick();
    let admitted = 0;
    for (let i = 0; i < 60; i++) if (a.check('p', 'k').allowed) admitted++;
    for (let i = 0; i < 3; i++) tick();
    expect(b.estimate('p', 'k')).toBe(0); // another version: not merged
    b.replacePolicies(pa);
    for (let i = 0; i < 4; i++) tick();
    expect(b.estimate('p', 'k')).toBe(admitted);
  });

  it('the same when the peer moves to our version', () => {
    const pa = [{ name: 'p', limit: 100, windowMs: 60_000, buckets: 10 }];
    const pb = [{ name: 'p', limit: 200, windowMs: 60_000, buckets: 10 }];
    const clock = new ManualClock(T0);
    const a = new Engine({ policies: pb, clock, nodeId: 'a' });
    const b = new Engine({ policies: pa, clock, nodeId: 'b' });
    const tick = () => {
      b.receiveGossip('a', a.buildGossip());
      a.receiveGossip('b', b.buildGossip());
      clock.advance(100);
    };
    for (let i = 0; i < 3; i++) tick();
    let admitted = 0;
    for (let i = 0; i < 60; i++) if (a.check('p', 'k').allowed) admitted++;
    for (let i = 0; i < 3; i++) tick();
    a.replacePolicies(pa);
    for (let i = 0; i < 4; i++) tick();
    expect(b.estimate('p', 'k')).toBe(admitted);
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
