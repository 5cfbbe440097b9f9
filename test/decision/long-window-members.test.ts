import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { compilePolicy } from '../../src/policy/index.js';
import type { PolicySpec } from '../../src/types.js';
import { gossip, spend, T0 } from './helpers.js';

const DAY = 86_400_000;
const YEAR: PolicySpec = { name: 'y', limit: 100, windowMs: 365 * DAY, buckets: 52 };

describe('windows up to 366 days (envoyproxy/ratelimit week, month, year)', () => {
  it('a year-long policy compiles; one past 366 days is refused with the bound', () => {
    expect(compilePolicy(YEAR).windowMs).toBe(365 * DAY);
    expect(compilePolicy({ ...YEAR, windowMs: 366 * DAY }).windowMs).toBe(366 * DAY);
    expect(() => compilePolicy({ ...YEAR, windowMs: 367 * DAY })).toThrow(/31622400000/);
  });

  it('admits L over the year, then denies until counts leave the window: Retry-After and reset in days', () => {
    const clock = new ManualClock(T0);
    const e = new Engine({ gossipIntervalMs: 100, policies: [YEAR], clock, nodeId: 'a' });
    expect(spend(e, 'y', 'k', 60)).toBe(60);
    clock.advance(30 * DAY);
    expect(spend(e, 'y', 'k', 60)).toBe(40);
    const d = e.check('y', 'k');
    expect(d.allowed).toBe(false);
    // the first 60 leave when their week-long bucket leaves the window: about 335 days from now
    expect(d.retryAfterMs).toBeGreaterThan(320 * DAY);
    expect(d.retryAfterMs).toBeLessThanOrEqual(336 * DAY);
    expect(d.resetMs).toBeGreaterThan(d.retryAfterMs);
    clock.advance(300 * DAY);
    expect(e.check('y', 'k').allowed).toBe(false);
    clock.advance(40 * DAY);
    expect(e.check('y', 'k').allowed).toBe(true);
  });

  it('a departed peer leaves the table after 10 minutes; its counts stay counted until they leave the window', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 100, policies: [YEAR], clock, nodeId: 'a' });
    const b = new Engine({ gossipIntervalMs: 100, policies: [YEAR], clock, nodeId: 'b' });
    const c = new Engine({ gossipIntervalMs: 100, policies: [YEAR], clock, nodeId: 'c' });
    expect(spend(b, 'y', 'k', 70)).toBe(70);
    // a hears b and c; then b stops (a pod replaced), c stays
    for (let i = 0; i < 5; i++) {
      gossip(b, a);
      gossip(c, a);
      clock.advance(100);
    }
    expect(a.estimate('y', 'k')).toBe(70);
    for (let t = 0; t < 11 * 60_000; t += 1000) {
      gossip(c, a);
      clock.advance(1000);
    }
    const s = a.stats();
    expect(s.peersDeparted).toBe(1);
    expect(s.peersForgotten).toBe(1);
    expect(s.peerTable).toBe(1);
    // b's 70 are still in the year: a admits the 30 left, not 100
    expect(a.estimate('y', 'k')).toBe(70);
    expect(spend(a, 'y', 'k', 100)).toBe(30);
  });

  it('churn through a year-long window: the table stays bounded by live members, the limit holds', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 100, policies: [YEAR], clock, nodeId: 'a', maxPeers: 8 });
    let admitted = 0;
    // 40 short-lived peers (5 times the table), each admitting 2 and then leaving
    for (let i = 0; i < 40; i++) {
      const p = new Engine({ gossipIntervalMs: 100, policies: [YEAR], clock, nodeId: `p${i}` });
      admitted += spend(p, 'y', 'k', 2);
      for (let j = 0; j < 3; j++) {
        gossip(p, a);
        clock.advance(100);
      }
      clock.advance(11 * 60_000);
      a.check('y', 'other'); // time moves on: departed peers are forgotten
    }
    const s = a.stats();
    expect(admitted).toBe(80);
    expect(s.dropped['too-many-peers'] ?? 0).toBe(0);
    expect(s.peerTable).toBeLessThanOrEqual(1);
    expect(s.peersForgotten).toBeGreaterThanOrEqual(39);
    expect(a.estimate('y', 'k')).toBe(80);
    expect(spend(a, 'y', 'k', 100)).toBe(20);
  });
});

describe('1,024 members by default (issue 13)', () => {
  it('hears 1,024 peers; the next is refused as too-many-peers', () => {
    const clock = new ManualClock(T0);
    const P: PolicySpec = { name: 'p', limit: 10_000, windowMs: 1000, buckets: 10 };
    const src = new Engine({ gossipIntervalMs: 100, policies: [P], clock, nodeId: 'src' });
    src.check('p', 'k');
    const bytes = src.buildGossip();
    const e = new Engine({ gossipIntervalMs: 100, policies: [P], clock, nodeId: 'n' });
    for (let i = 0; i < 1024; i++) expect(e.receiveGossip(`peer-${i}`, bytes).ok).toBe(true);
    expect(e.stats().livePeers).toBe(1024);
    expect(e.estimate('p', 'k')).toBe(1024);
    expect(e.receiveGossip('peer-1024', bytes)).toEqual({ ok: false, reason: 'too-many-peers' });
  });
});
