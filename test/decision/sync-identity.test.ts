import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decodeMessage, encodeSyncResponse, TYPE_GOSSIP, type WireEntry } from '../../src/crdt/codec.js';
import { Engine } from '../../src/decision/engine.js';
import type { PolicySpec } from '../../src/types.js';
import { spend, T0 } from './helpers.js';

const L = 100;
const P: PolicySpec[] = [{ name: 'p', limit: L, windowMs: 1000, buckets: 10, overAdmission: 'naive' }];

function response(to: Engine, origins: string[], entries: Partial<WireEntry>[]): Uint8Array {
  const base = Math.floor(T0 / 100) - 10;
  return encodeSyncResponse({
    policies: to.policyTable(),
    t0: T0,
    t1: T0,
    origins,
    entries: entries.map((e) => ({ origin: 0, policy: 0, key: 'k', base, counts: [0], demand: 0, ...e })),
  });
}

describe('sync is tied to identity', () => {
  it('a sync response claiming to be the receiving node is dropped and counted, never throws', () => {
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock: new ManualClock(T0), nodeId: 'b' });
    const forged = response(b, ['b'], [{ counts: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50] }]);
    // at 459ce28 (before this work): TypeError (Cannot set properties of undefined)
    expect(b.receiveSyncResponse('b', forged)).toEqual({ ok: false, reason: 'sync-self' });
    expect(b.stats().dropped).toEqual({ 'sync-self': 1 });
    expect(b.estimate('p', 'k')).toBe(0);
  });

  it('third-party origins are members gone at the responder: their own slot (no member, not shown), at most 2L of them per key in one answer', () => {
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock: new ManualClock(T0), nodeId: 'b' });
    b.buildSyncRequest();
    const full = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40];
    const res = response(
      b,
      ['a', 'c', 'd'],
      [
        { origin: 0, counts: full },
        { origin: 1, counts: full.map(() => 2000) },
        { origin: 2, counts: full },
      ],
    );
    expect(b.receiveSyncResponse('a', res)).toEqual({ ok: true });
    // at 459ce28: 280 (a 40, c capped at 2L = 200, d 40, c and d each given a peer slot as members);
    // until this stop 40 (third parties skipped): now a 40 and d 40, c past 2L and dropped
    expect(b.estimate('p', 'k')).toBe(80);
    expect(b.stats().dropped).toEqual({ 'sync-gone-over-limit': 1 });
    expect(b.stats().goneSynced).toBe(1);
    expect(b.stats().peerTable).toBe(2);
    expect(b.stats().members).toBe(2);
    expect(b.peerViews().map((v) => v.id)).toEqual(['a']);
  });

  it('what a responder says this node admitted counts here (bounded, as an unattributed floor) but is never gossiped as its own', () => {
    const clock = new ManualClock(T0);
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'b' });
    b.buildSyncRequest();
    const res = response(b, ['a', 'b'], [{ origin: 1, counts: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2000] }]);
    expect(b.receiveSyncResponse('a', res)).toEqual({ ok: true });
    // capped at L in a bucket (at 459ce28 it gossiped these 100 as its own counts: laundered under its signature)
    expect(b.estimate('p', 'k')).toBe(L);
    spend(b, 'p', 'k', 1);
    const dec = decodeMessage(b.buildGossip());
    if (!dec.ok || dec.message.type !== TYPE_GOSSIP) throw new Error('no gossip');
    expect(dec.message.entries.reduce((a, e) => a + e.counts.reduce((x, y) => x + y, 0), 0)).toBe(0);
  });

  it('254 fake origins in one response take at most a quarter of the table: a new honest member is still heard', () => {
    const clock = new ManualClock(T0);
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'b', maxPeers: 64 });
    b.buildSyncRequest();
    const origins = ['a', ...Array.from({ length: 254 }, (_, i) => `fake-${i}`)];
    const entries = origins.map((_, i) => ({ origin: i, counts: [1] }));
    expect(b.receiveSyncResponse('a', response(b, origins, entries))).toEqual({ ok: true });
    // 16 slots for members gone at maxPeers 64 (a quarter, at least 16): the rest dropped, counted
    expect(b.stats().peerTable).toBe(17);
    expect(b.stats().goneSynced).toBe(16);
    expect(b.stats().dropped).toEqual({ 'sync-gone-no-room': 238 });
    const honest = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'honest' });
    spend(honest, 'p', 'k', 3);
    expect(b.receiveGossip('honest', honest.buildGossip())).toEqual({ ok: true });
    expect(b.stats().peerTable).toBe(18);
  });

  it('only an answer to a request of ours is merged, once: unsolicited and replayed answers are dropped', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'a' });
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'b' });
    spend(a, 'p', 'k', 7);
    const unsolicited = a.answerSync(
      'b',
      new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'z' }).buildSyncRequest(),
    );
    expect(b.receiveSyncResponse('a', unsolicited as Uint8Array)).toEqual({
      ok: false,
      reason: 'sync-unsolicited',
    });
    expect(b.estimate('p', 'k')).toBe(0);
    const res = a.answerSync('b', b.buildSyncRequest()) as Uint8Array;
    expect(b.receiveSyncResponse('a', res)).toEqual({ ok: true });
    expect(b.receiveSyncResponse('a', res)).toEqual({ ok: false, reason: 'sync-unsolicited' });
    expect(b.estimate('p', 'k')).toBe(7);
    expect(b.stats().dropped).toEqual({ 'sync-unsolicited': 2 });
  });

  it('an honest answer carries the responder, the asker, the members gone with their counts, and the live ones by name only', () => {
    const clock = new ManualClock(T0);
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(
      (id) => new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: id }),
    ) as [Engine, Engine, Engine, Engine];
    spend(b, 'p', 'k', 5);
    spend(c, 'p', 'k', 7);
    spend(d, 'p', 'k', 2);
    spend(a, 'p', 'k', 1);
    a.receiveGossip('b', b.buildGossip());
    a.receiveGossip('c', c.buildGossip());
    a.receiveGossip('d', d.buildGossip());
    // d falls silent: stale at a once its data is past staleAfterMs (50 ms here), while b and c go on
    for (let t = 10; t <= 80; t += 10) {
      clock.set(T0 + t);
      a.receiveGossip('b', b.buildGossip());
      a.receiveGossip('c', c.buildGossip());
    }
    const ans = a.answerSync('b', b.buildSyncRequest()) as Uint8Array;
    const dec = decodeMessage(ans);
    if (!dec.ok || dec.message.type !== 3) throw new Error('no answer');
    expect(dec.message.origins).toEqual(['a', 'b', 'd', 'c']);
    expect(dec.message.entries.map((e) => [e.origin, e.counts.reduce((x, y) => x + y, 0)])).toEqual([
      [0, 1],
      [1, 5],
      [2, 2],
    ]);
  });
});
