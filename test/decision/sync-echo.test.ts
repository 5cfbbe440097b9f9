import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import type { PolicySpec } from '../../src/types.js';
import { spend, T0 } from './helpers.js';

const L = 100;
const P: PolicySpec[] = [{ name: 'p', limit: L, windowMs: 60_000, buckets: 10, overAdmission: 'naive' }];

describe("a sync answer's echo of this node's own counts", () => {
  it('what this run admitted and the responder already holds is not counted twice (a CI flake of test/mesh/replaced.test.ts: 70 admitted, 140 counted, the farewell refused)', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'a' });
    const c = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'c' });
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

  it('what a previous run under the same id admitted still counts (a restart), beside what this run admits', () => {
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
    // 40 of the previous run (unattributed) and its own 10
    expect(c.estimate('p', 'k')).toBe(50);
    expect(spend(c, 'p', 'k', 100)).toBe(50);
  });
});
