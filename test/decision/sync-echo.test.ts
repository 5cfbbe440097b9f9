import { generateKeyPair, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { parseOptions } from '../../src/mesh/options.js';
import type { PolicySpec } from '../../src/types.js';
import { spend, T0 } from './helpers.js';

const L = 100;
const P: PolicySpec[] = [{ name: 'p', limit: L, windowMs: 60_000, buckets: 10, overAdmission: 'naive' }];

describe("a sync answer's echo of this node's own counts", () => {
  it('an id made at this start: what this run admitted and the responder already holds is not counted twice (a CI flake of test/mesh/replaced.test.ts: 70 admitted, 140 counted, the farewell refused)', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'a' });
    const c = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'c', freshId: true });
    // c asks as it starts; before the answer comes, it admits 70 and its gossip reaches a
    const req = c.buildSyncRequest();
    clock.advance(5);
    expect(spend(c, 'p', 'k', 70)).toBe(70);
    a.receiveGossip('c', c.buildGossip());
    clock.advance(5);
    const res = a.answerSync('c', req);
    if (!(res instanceof Uint8Array)) throw new Error('no answer');
    expect(c.receiveSyncResponse('a', res)).toEqual({ ok: true });
    expect(c.estimate('p', 'k')).toBe(70);
    expect(spend(c, 'p', 'k', 100)).toBe(30);
    // nothing unattributed: its farewell carries its whole window
    expect(c.farewell()).toBeInstanceOf(Uint8Array);
  });

  it("an id kept across a restart: what the previous run admitted counts, and the echo of this run's own counts too (twice: the safe side)", () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'a' });
    const old = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'c' });
    expect(spend(old, 'p', 'k', 40)).toBe(40);
    a.receiveGossip('c', old.buildGossip());
    // restarted a bucket later (6 s: buckets of 6 s), the same id, nothing of its own yet
    clock.advance(6_000);
    const c = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'c' });
    const req = c.buildSyncRequest();
    // it admits 10 before the answer; the responder had them too
    expect(spend(c, 'p', 'k', 10)).toBe(10);
    a.receiveGossip('c', c.buildGossip());
    const res = a.answerSync('c', req);
    if (!(res instanceof Uint8Array)) throw new Error('no answer');
    expect(c.receiveSyncResponse('a', res)).toEqual({ ok: true });
    // 40 of the previous run and the 10 echoed (unattributed), and its own 10: a node restarted under its
    // id cannot tell this run's echo from the previous run's in a bucket both admitted in, so it counts
    // the echo whole, the safe side
    expect(c.estimate('p', 'k')).toBe(60);
    expect(spend(c, 'p', 'k', 100)).toBe(40);
  });
});

describe('a mesh node tells its engine whether its id was made at its start', () => {
  it('fresh without a privateKey, not fresh with one', async () => {
    const base = { policies: P, listen: ['/ip4/127.0.0.1/tcp/0'] };
    expect(parseOptions(base).freshId).toBe(true);
    const key = privateKeyToProtobuf(await generateKeyPair('Ed25519'));
    expect(parseOptions({ ...base, privateKey: key }).freshId).toBe(false);
  });
});
