/**
 * Clock offsets are applied as lower bounds, never as the round-trip midpoint: a slow, lopsided
 * sync round trip (a starved process) must not move a peer's counts earlier than they were
 * admitted. Found by the Docker partition drill under two CPU burners (worst 1 s 583, L = 500).
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { engine, spend, T0 } from './helpers.js';

const P = [{ name: 'p', limit: 100, windowMs: 1000, buckets: 50 }];

describe('clock offset from a lopsided round trip', () => {
  it("keeps a peer's counts in the window as long as they were admitted in it", () => {
    // Both clocks agree. The sync request takes 400 ms to reach b, the answer 10 ms to come back:
    // the midpoint says b runs 195 ms ahead, which would move its counts 195 ms early.
    const ca = new ManualClock(T0);
    const cb = new ManualClock(T0);
    const a = engine(P, { nodeId: 'a', expectedDelayMs: 10 }, ca).e;
    const b = engine(P, { nodeId: 'b', expectedDelayMs: 10 }, cb).e;
    // a hears b (a few messages, 5 ms each) so it counts b as a live member
    for (let i = 0; i < 4; i++) {
      cb.advance(20);
      ca.set(cb.now() + 5);
      expect(a.receiveGossip('b', b.buildGossip()).ok).toBe(true);
    }
    const req = a.buildSyncRequest();
    cb.set(ca.now() + 400);
    const res = b.answerSync('a', req);
    expect(res).toBeInstanceOf(Uint8Array);
    ca.set(cb.now() + 10);
    expect(a.receiveSyncResponse('b', res as Uint8Array)).toEqual({ ok: true });
    // b counts the asker a member from its request on; here a leaves b's view (its link closed),
    // so b decides alone: then b admits the whole limit at T0 + 500 and gossips it (5 ms, as before)
    b.peerDeparted('a');
    cb.set(T0 + 500);
    expect(spend(b, 'p', 'k', 100)).toBe(100);
    for (let i = 0; i < 4; i++) {
      cb.advance(20);
      ca.set(cb.now() + 5);
      expect(a.receiveGossip('b', b.buildGossip()).ok).toBe(true);
    }
    // 100 ms before b's admissions leave the window, a must still count all of them
    ca.set(T0 + 500 + 1000 - 100);
    expect(a.estimate('p', 'k')).toBeGreaterThanOrEqual(100);
    expect(a.check('p', 'k').allowed).toBe(false);
    // once they have left, the limit opens again
    ca.set(T0 + 500 + 1000 + 60);
    expect(a.check('p', 'k').allowed).toBe(true);
  });

  it('a round trip of seconds does not set the offset: the peer is not marked skewed for good', () => {
    // Both clocks agree. The request takes 2,900 ms to reach b (a starved process), the answer
    // 100 ms: the midpoint says b runs 1,400 ms ahead, past maxClockOffsetMs (1 s). Trusted, it
    // marked b skewed (stale, its counts not merged) until it reconnected; gossip never corrected it.
    const ca = new ManualClock(T0);
    const cb = new ManualClock(T0);
    const a = engine(P, { nodeId: 'a', expectedDelayMs: 10 }, ca).e;
    const b = engine(P, { nodeId: 'b', expectedDelayMs: 10 }, cb).e;
    const req = a.buildSyncRequest();
    cb.set(T0 + 2900);
    const res = b.answerSync('a', req);
    ca.set(T0 + 3000);
    expect(a.receiveSyncResponse('b', res as Uint8Array)).toEqual({ ok: true });
    for (let i = 0; i < 4; i++) {
      cb.advance(20);
      ca.set(cb.now() + 5);
      expect(a.receiveGossip('b', b.buildGossip()).ok).toBe(true);
    }
    const v = a.peerViews().find((p) => p.id === 'b')!;
    expect(v.skewed).toBe(false);
    expect(v.stale).toBe(false);
    expect(Math.abs(v.clockOffsetMs)).toBeLessThanOrEqual(10);
    expect(a.stats().skewedPeers).toBe(0);
  });
});
