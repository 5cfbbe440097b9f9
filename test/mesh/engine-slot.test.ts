import { describe, expect, it } from 'vitest';
import { defaultStaleAfterMs } from '../../src/decision/constants.js';
import { Engine } from '../../src/decision/engine.js';
import { EngineSlot } from '../../src/mesh/engine-slot.js';

const policies = [{ name: 'api', limit: 10_000, windowMs: 60_000 }];

/** Two nodes on a manual clock, each engine in a slot, gossip handed over by hand. */
function pair() {
  const clock = { t: 1.7e12, now: () => clock.t };
  const mk = (id: string) =>
    new EngineSlot((init) => new Engine(init), {
      policies,
      nodeId: id,
      clock,
      gossipIntervalMs: 50,
      expectedDelayMs: 10,
      departAfterMs: 5_000,
      expectedMembers: 2,
    });
  const a = mk('a');
  const b = mk('b');
  const tick = () => {
    clock.t += 50;
    const ga = a.buildGossip(clock.t, 2);
    const gb = b.buildGossip(clock.t, 2);
    clock.t += 5;
    expect(b.receiveGossip('a', ga, clock.t).ok).toBe(true);
    expect(a.receiveGossip('b', gb, clock.t).ok).toBe(true);
  };
  const est = () => [a, b].map((s) => Math.round((s.engine as Engine).estimate('api', 'k')));
  return { clock, a, b, tick, est };
}

describe('EngineSlot: an engine rebuilt with other relayHops keeps what the old one held', () => {
  it('a second switch keeps what the first put on the floor: own counts of earlier buckets survive every rebuild', () => {
    const { clock, a, b, tick, est } = pair();
    for (let i = 0; i < 3; i++) tick();
    for (let i = 0; i < 10; i++) a.check('api', 'k');
    // past the current bucket (6 s): the 10 are in an earlier bucket at the switch, handed over on the floor
    for (let i = 0; i < 140; i++) tick();
    a.rebuild(3, clock.t);
    b.rebuild(3, clock.t);
    for (let i = 0; i < 5; i++) a.check('api', 'k');
    for (let i = 0; i < 140; i++) tick();
    expect(est()).toEqual([15, 15]);
    // the second switch: the 10 on the floor go with it (they were lost: 5 left here, and the
    // peer kept 15 only from its own copy)
    a.rebuild(0, clock.t);
    b.rebuild(0, clock.t);
    expect(est()).toEqual([15, 15]);
    for (let i = 0; i < 3; i++) tick();
    expect(est()).toEqual([15, 15]);
  });

  it("hands over both nodes' counts, and a node's next admissions in the same bucket still reach its peer", () => {
    const { clock, a, b, tick, est } = pair();
    for (let i = 0; i < 3; i++) tick();
    for (let i = 0; i < 10; i++) a.check('api', 'k');
    for (let i = 0; i < 20; i++) b.check('api', 'k');
    for (let i = 0; i < 3; i++) tick();
    expect(est()).toEqual([30, 30]);
    const before = a.engine;
    // both switch to relay (as the members of a mesh that grew do, about at once)
    expect(a.rebuild(3, clock.t)).toBe(1);
    expect(b.rebuild(3, clock.t)).toBe(1);
    expect(a.engine).not.toBe(before);
    expect([a.relayHops, b.relayHops]).toEqual([3, 3]);
    expect(a.engine.stats(clock.t).members).toBe(2);
    expect((a.engine as Engine).staleAfterMs).toBe(defaultStaleAfterMs(50, 10, 3));
    expect(est()).toEqual([30, 30]);
    // the current bucket (6 s long here) holds the counts of before the switch: the next
    // admissions land in it too, and the peer, which merges a bucket as the larger copy, sees them
    for (let i = 0; i < 5; i++) a.check('api', 'k');
    for (let i = 0; i < 3; i++) tick();
    expect(est()).toEqual([35, 35]);
    // and back to broadcast
    a.rebuild(0, clock.t);
    b.rebuild(0, clock.t);
    expect(a.relayHops).toBe(0);
    for (let i = 0; i < 7; i++) b.check('api', 'k');
    for (let i = 0; i < 3; i++) tick();
    expect(est()).toEqual([42, 42]);
    expect(a.rebuilds).toBe(2);
  });

  it("a sync answer after a switch does not count the node's own admissions twice", () => {
    const { clock, a, b, tick, est } = pair();
    for (let i = 0; i < 3; i++) tick();
    for (let i = 0; i < 10; i++) a.check('api', 'k');
    for (let i = 0; i < 3; i++) tick();
    a.rebuild(2, clock.t);
    // a pulls b's state: b's answer holds b's copy of a's 10
    const res = b.answerSync('a', a.buildSyncRequest(clock.t), clock.t);
    expect(res).toBeInstanceOf(Uint8Array);
    expect(a.receiveSyncResponse('b', res as Uint8Array, clock.t).ok).toBe(true);
    expect(est()).toEqual([10, 10]);
  });

  it("a node that joins after the switch learns every member's counts from before it, earlier buckets included", () => {
    const { clock, a, b, tick, est } = pair();
    for (let i = 0; i < 3; i++) tick();
    for (let i = 0; i < 10; i++) a.check('api', 'k');
    for (let i = 0; i < 20; i++) b.check('api', 'k');
    // past the current bucket (6 s): the counts are in earlier buckets at the switch
    for (let i = 0; i < 140; i++) tick();
    a.rebuild(3, clock.t);
    b.rebuild(3, clock.t);
    expect(est()).toEqual([30, 30]);
    // a fresh node (relaying, as the switched ones) pulls each member's state: each answer
    // carries the member's own counts
    const joiner = (nodeId: string) =>
      new Engine({ policies, nodeId, clock, gossipIntervalMs: 50, expectedDelayMs: 10, relayHops: 3 });
    const c = joiner('c');
    for (const [id, s] of [
      ['a', a],
      ['b', b],
    ] as const) {
      const res = s.answerSync('c', c.buildSyncRequest(clock.t), clock.t);
      expect(res).toBeInstanceOf(Uint8Array);
      expect(c.receiveSyncResponse(id, res as Uint8Array, clock.t).ok).toBe(true);
    }
    expect(Math.round(c.estimate('api', 'k'))).toBe(30);
    // and the counts of before the switch go in the switched engines' gossip as their own
    const g = a.buildGossip(clock.t, 3);
    const d = joiner('d');
    expect(d.receiveGossip('a', g, clock.t).ok).toBe(true);
    expect(Math.round(d.estimate('api', 'k'))).toBe(10);
  });

  it('policies replaced at run time carry over', () => {
    const { clock, a } = pair();
    a.replacePolicies([...policies, { name: 'login', limit: 5, windowMs: 60_000 }], clock.t);
    a.rebuild(2, clock.t);
    expect(a.policy('login')?.limit).toBe(5);
  });
});

describe('EngineSlot: rebuilt while its node starts', () => {
  it('keeps the start gate as it was: the handover proves no member heard the node', () => {
    const clock = { t: 1.7e12, now: () => clock.t };
    const base = { policies, clock, gossipIntervalMs: 10, expectedDelayMs: 10, departAfterMs: 5_000 };
    const peer = new Engine({ ...base, nodeId: 'peer' });
    const fresh = new EngineSlot((init) => new Engine(init), {
      ...base,
      nodeId: 'fresh',
      expectedMembers: 2,
    });
    // fresh hears peer; peer has not heard fresh
    fresh.receiveGossip('peer', peer.buildGossip(clock.t, 1), clock.t);
    expect(fresh.check('api', 'k').rule).toBe('starting');
    fresh.rebuild(2, clock.t);
    expect(fresh.starting()).toBe(true);
    expect(fresh.check('api', 'k').rule).toBe('starting');
    // the gate opens as it would have: peer hears fresh, and sends D after (D = 10 + 2 hops x 15 ms)
    peer.receiveGossip('fresh', fresh.buildGossip(clock.t, 2), clock.t);
    clock.t += 39;
    fresh.receiveGossip('peer', peer.buildGossip(clock.t, 2), clock.t);
    expect(fresh.check('api', 'k').rule).toBe('starting');
    clock.t += 1;
    fresh.receiveGossip('peer', peer.buildGossip(clock.t, 2), clock.t);
    expect(fresh.check('api', 'k').allowed).toBe(true);
    // once open, a rebuild keeps it open
    fresh.rebuild(3, clock.t);
    expect(fresh.starting()).toBe(false);
  });

  it("hearing no member, keeps the mesh's join wait: its denials' Retry-After is what is left of it", () => {
    const clock = { t: 1.7e12, now: () => clock.t };
    const base = { policies, clock, gossipIntervalMs: 10, expectedDelayMs: 10, departAfterMs: 5_000 };
    const fresh = new EngineSlot((init) => new Engine(init), {
      ...base,
      nodeId: 'fresh',
      expectedMembers: 3,
    });
    fresh.joinWaitEnds(clock.t + 10_000);
    clock.t += 1_000;
    expect(fresh.check('api', 'k')).toMatchObject({ rule: 'starting', retryAfterMs: 9_000 });
    fresh.rebuild(2, clock.t);
    clock.t += 500;
    expect(fresh.check('api', 'k')).toMatchObject({ rule: 'starting', retryAfterMs: 8_500 });
    // nothing arriving, it decides then: at the time its Retry-After said, not a tick later
    clock.t += 8_499;
    expect(fresh.check('api', 'k')).toMatchObject({ rule: 'starting', retryAfterMs: 1 });
    clock.t += 1;
    expect(fresh.check('api', 'k')).toMatchObject({ allowed: true, mode: 'fallback' });
  });
});
