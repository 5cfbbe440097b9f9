import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decodeMessage, encodeGossip, TYPE_GOSSIP, type WireEntry } from '../../src/crdt/codec.js';
import { Engine } from '../../src/decision/engine.js';
import type { PolicySpec } from '../../src/types.js';
import { gossip, spend, T0 } from './helpers.js';

const L = 100;
const P: PolicySpec[] = [{ name: 'p', limit: L, windowMs: 1000, buckets: 10, overAdmission: 'naive' }];

function msg(to: Engine, seq: number, entries: Partial<WireEntry>[], sentAt = T0): Uint8Array {
  return encodeGossip({
    policies: to.policyTable(),
    seq,
    sentAt,
    members: 2,
    reach: 2,
    entries: entries.map((e) => ({ origin: 0, policy: 0, key: 'k', base: 0, counts: [0], demand: 0, ...e })),
  });
}

describe('per-origin caps across messages', () => {
  it('an origin is credited at most 2L over the ring however many messages it spreads its counts over; then it is ignored', () => {
    const clock = new ManualClock(T0);
    const warnings: object[] = [];
    const b = new Engine({
      gossipIntervalMs: 10,
      policies: P,
      clock,
      nodeId: 'b',
      ignoreMs: 5000,
      logger: { warn: (o) => warnings.push(o) },
    });
    const c = Math.floor(T0 / 100);
    // each message claims L in one bucket, within the per-message caps; 12 buckets in the ring
    const results = [];
    for (let i = 0; i < 12; i++)
      results.push(b.receiveGossip('x', msg(b, i + 1, [{ base: c + 1 - i, counts: [L] }])));
    // measured at 459ce28 (before this work): estimate 1,200 (= (k + 2) L), capped 0, never ignored
    expect(b.estimate('p', 'k')).toBeLessThanOrEqual(2 * L);
    expect(results.slice(0, 5).every((r) => r.ok)).toBe(true);
    expect(results.slice(5)).toEqual(Array(7).fill({ ok: false, reason: 'peer-ignored' }));
    const s = b.stats();
    expect(s.capped).toBe(3);
    expect(s.peersIgnored).toBe(1);
    expect(s.dropped['peer-ignored']).toBe(7);
    expect(warnings).toEqual([{ peer: 'x', ignoreMs: 5000, strikes: 3 }]);
    expect(b.peerViews().find((v) => v.id === 'x')!.ignoredMs).toBe(5000);
    // an ignored peer is put outside the mesh: the counts it sent are dropped and no share is kept
    // for it (before: it turned stale and was counted as L/N, never more than it sent)
    expect(b.estimate('p', 'k')).toBe(0);
    expect(b.memberCount()).toBe(1);
    clock.advance(100);
    expect(b.check('p', 'k')).toMatchObject({ allowed: true, remaining: L - 1 });
    // after the ignore period it is heard again
    clock.advance(5000);
    expect(b.receiveGossip('x', msg(b, 100, [], T0 + 5100)).ok).toBe(true);
    expect(b.memberCount()).toBe(2);
  });

  it('an honest peer is never capped: a full window of admissions arrives in full', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'a' });
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'b' });
    for (let t = 0; t < 3000; t += 10) {
      spend(a, 'p', 'k', 5);
      gossip(a, b);
      clock.advance(10);
    }
    expect(b.stats().capped).toBe(0);
    expect(b.estimate('p', 'k')).toBeCloseTo(a.estimate('p', 'k'), 6);
  });

  it('a message with more keys than maxKeysPerMessage is dropped whole before anything is merged', () => {
    const clock = new ManualClock(T0);
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'b', maxKeysPerMessage: 100 });
    const c = Math.floor(T0 / 100);
    const many = Array.from({ length: 101 }, (_, i) => ({ key: `k${i}`, base: c, counts: [1] }));
    expect(b.receiveGossip('x', msg(b, 1, many))).toEqual({ ok: false, reason: 'too-many-keys' });
    expect(b.stats().keys).toBe(0);
    expect(b.stats().peerTable).toBe(0);
    expect(b.receiveGossip('x', msg(b, 2, many.slice(0, 100))).ok).toBe(true);
    expect(b.stats().keys).toBe(100);
  });

  it('a sender never puts more than maxKeysPerMessage keys in a message; the rest go in the next ticks', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'a', maxKeysPerMessage: 10 });
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'b', maxKeysPerMessage: 10 });
    for (let i = 0; i < 25; i++) spend(a, 'p', `k${i}`, 1 + (i % 3));
    const sizes: number[] = [];
    for (let t = 0; t < 3; t++) {
      const bytes = a.buildGossip();
      const dec = decodeMessage(bytes);
      if (!dec.ok || dec.message.type !== TYPE_GOSSIP) throw new Error('bad gossip');
      sizes.push(dec.message.entries.length);
      expect(b.receiveGossip('a', bytes).ok).toBe(true);
      clock.advance(10);
    }
    // only what changed travels: 25 keys, then nothing more to say
    expect(sizes).toEqual([10, 10, 5]);
    for (let i = 0; i < 25; i++) expect(b.estimate('p', `k${i}`)).toBe(1 + (i % 3));
  });

  it('a sender keeps its messages under maxGossipBytes; the rest go in the next ticks', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'a', maxGossipBytes: 1024 });
    const b = new Engine({ gossipIntervalMs: 10, policies: P, clock, nodeId: 'b' });
    const key = (i: number) => `acct:${'x'.repeat(40)}:${i}`;
    for (let i = 0; i < 100; i++) spend(a, 'p', key(i), 1 + (i % 3));
    const sizes: number[] = [];
    for (let t = 0; t < 10; t++) {
      const bytes = a.buildGossip();
      sizes.push(bytes.length);
      expect(b.receiveGossip('a', bytes).ok).toBe(true);
      clock.advance(10);
    }
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1024);
    expect(sizes.filter((s) => s > 100).length).toBeGreaterThan(3);
    for (let i = 0; i < 100; i++) expect(b.estimate('p', key(i))).toBe(1 + (i % 3));
    expect(() => new Engine({ policies: P, nodeId: 'c', maxGossipBytes: 100 })).toThrow(/maxGossipBytes/);
    expect(() => new Engine({ policies: P, nodeId: 'c', maxGossipBytes: 2 << 20 })).toThrow(/maxGossipBytes/);
  });
});

describe('demand claims backed by no counts', () => {
  /** Two honest nodes, 1 request/ms each on one key (2,000/s against L = 1,000/s), g = 10 ms, for 5 s. */
  function run(attacker: boolean) {
    const clock = new ManualClock(T0);
    const pol: PolicySpec[] = [{ name: 'p', limit: 1000, windowMs: 1000, buckets: 50 }];
    const a = new Engine({ gossipIntervalMs: 10, policies: pol, clock, nodeId: 'a' });
    const b = new Engine({ gossipIntervalMs: 10, policies: pol, clock, nodeId: 'b' });
    let admitted = 0;
    let seq = 0;
    for (let ms = 0; ms < 5000; ms++) {
      if (a.check('p', 'k').allowed) admitted++;
      if (b.check('p', 'k').allowed) admitted++;
      if (ms % 10 === 0) {
        gossip(a, b);
        gossip(b, a);
        if (attacker) {
          // demand 2^40 per window for the key, not one count behind it
          const m = encodeGossip({
            policies: a.policyTable(),
            seq: ++seq,
            sentAt: T0 + ms,
            members: 3,
            reach: 3,
            entries: [
              {
                origin: 0,
                policy: 0,
                key: 'k',
                base: Math.floor((T0 + ms) / 20),
                counts: [0],
                demand: 2 ** 40,
              },
            ],
          });
          a.receiveGossip('x', m);
          b.receiveGossip('x', m);
        }
      }
      clock.advance(1);
    }
    return admitted;
  }

  it('cannot starve honest nodes: they admit at least 90 % of what they admit without it', () => {
    const honest = run(false);
    const attacked = run(true);
    // measured: 5,000 without the attacker, 4,990 with it (at 459ce28, before this work: 10 with it)
    expect(honest).toBeGreaterThanOrEqual(4900);
    expect(attacked).toBeGreaterThanOrEqual(0.9 * honest);
    expect(attacked).toBeLessThanOrEqual(honest);
  });
});
