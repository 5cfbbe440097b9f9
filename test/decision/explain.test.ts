import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { Simulator } from '../../src/sim/simulator.js';

const T0 = 1_700_000_000_000;

/** Three nodes gossiping for 2 s, a fresh key of L = 50 per 10 s. */
function mesh(): Simulator {
  const sim = new Simulator({
    nodes: 3,
    policies: [{ name: 'p', limit: 50, windowMs: 10_000 }],
    gossipIntervalMs: 100,
    delayMs: 10,
  });
  sim.runUntil(2_000);
  return sim;
}

describe('Engine.explain: every term of a decision, changing nothing', () => {
  it('a key not tracked stays untracked, and the check that follows decides as explained', () => {
    const sim = mesh();
    const e = sim.engines[0]!;
    const x = e.explain('p', 'fresh');
    expect(x).toMatchObject({ allowed: true, rule: 'allow', mode: 'global', limit: 50, remaining: 49 });
    expect(x.seen).toEqual({ total: 0, own: 0, peers: 0, unattributed: 0 });
    expect(x.members).toMatchObject({ live: 2, stale: 0, n: 3 });
    // a fresh key: no demand anywhere, so each of the three holds an equal part of the headroom
    expect(x.share?.share).toBeCloseTo(1 / 3, 9);
    expect(x.share?.allowance).toBeCloseTo(50 / 3, 9);
    expect(e.estimate('p', 'fresh')).toBe(0);
    expect(e.stats().keys).toBe(0);
    // explaining twice changes nothing either: no demand was counted
    expect(e.explain('p', 'fresh')).toEqual(x);
    expect(sim.request(0, 'p', 'fresh')).toMatchObject({ allowed: true, remaining: 49 });
  });

  it('a burst spread over the nodes is denied by the share, with the numbers and a Retry-After that holds', () => {
    const sim = mesh();
    // 150 requests at once, round robin: each node spends its part of L = 50, no more
    let admitted = 0;
    for (let i = 0; i < 150; i++) if (sim.request(i % 3, 'p', 'k').allowed) admitted++;
    expect(admitted).toBeLessThanOrEqual(50);
    const e = sim.engines[0]!;
    const x = e.explain('p', 'k');
    expect(x).toMatchObject({ allowed: false, rule: 'headroom-share', mode: 'global' });
    const s = x.share!;
    expect(s.ownRecent + 1).toBeGreaterThan(s.allowance);
    expect(s.allowance).toBeCloseTo(s.share * s.headroom, 9);
    expect(x.reason).toContain("this node's share of the headroom");
    expect(x.retryAfterMs).toBeGreaterThan(0);
    // the same decision check makes
    const d = sim.request(0, 'p', 'k');
    expect(d).toMatchObject({ allowed: false, rule: 'headroom-share', retryAfterMs: x.retryAfterMs });
    // Once the peers' counts of the burst have reached it, nothing else arrives (gossip goes on):
    // denied until its Retry-After, admitted from then on
    sim.runUntil(sim.now + 500);
    const y = e.explain('p', 'k');
    expect(y.seen?.total).toBe(admitted);
    expect(y.retryAfterMs).toBeGreaterThan(0);
    const at = sim.now;
    sim.runUntil(at + y.retryAfterMs - 1);
    expect(e.explain('p', 'k').allowed).toBe(false);
    sim.runUntil(at + y.retryAfterMs);
    expect(sim.request(0, 'p', 'k').allowed).toBe(true);
  });

  it('each place that denies has its own rule name', () => {
    const clock = new ManualClock(T0);
    const policies = [
      { name: 'g', limit: 10, windowMs: 1000 },
      {
        name: 'front',
        limit: 100,
        windowMs: 1000,
        local: { algorithm: 'token-bucket' as const, limit: 2, windowMs: 1000 },
      },
      { name: 'loc', scope: 'local' as const, limit: 1, windowMs: 1000 },
    ];
    const a = new Engine({ policies, clock, nodeId: 'a', gossipIntervalMs: 100 });
    for (let i = 0; i < 10; i++) a.check('g', 'k');
    expect(a.explain('g', 'k')).toMatchObject({ rule: 'global-limit', allowed: false });
    expect(a.explain('g', 'k').reason).toContain('pass the limit 10');
    a.check('front', 'k');
    a.check('front', 'k');
    expect(a.explain('front', 'k')).toMatchObject({ rule: 'local-limit', allowed: false });
    a.check('loc', 'k');
    expect(a.explain('loc', 'k')).toMatchObject({ rule: 'local-limit', mode: 'local' });
    // a node that expects peers decides nothing until they have heard it (the start gate)
    const b = new Engine({ policies, clock, nodeId: 'b', gossipIntervalMs: 100, expectedMembers: 5 });
    const s = b.explain('g', 'k');
    expect(s).toMatchObject({ rule: 'starting', mode: 'fallback', starting: { heard: 1, expected: 5 } });
    expect(s.reason).toContain('no member of the 5 expected heard yet');
    expect(b.check('g', 'k').rule).toBe('starting');
    // then, cut off (none heard once the mesh said it joined), it keeps its own counts within L/N
    b.joined();
    b.check('g', 'k');
    b.check('g', 'k');
    const f = b.explain('g', 'k');
    expect(f).toMatchObject({ rule: 'fallback-share', mode: 'fallback', fallback: { share: 2, own: 2 } });
    // after its farewell a node decides no global policy
    a.farewell();
    expect(a.explain('g', 'other')).toMatchObject({ rule: 'left-mesh', retryAfterMs: -1 });
    expect(a.check('g', 'other').rule).toBe('left-mesh');
  });

  it('counts the decisions it limits by rule (stats().limitedByRule), explain changing nothing', () => {
    const clock = new ManualClock(T0);
    const policies = [
      { name: 'g', limit: 2, windowMs: 1000, maxCost: 5 },
      { name: 'sh', limit: 1, windowMs: 1000, shadow: true },
    ];
    const e = new Engine({ policies, clock, nodeId: 'a', gossipIntervalMs: 100 });
    for (let i = 0; i < 5; i++) e.check('g', 'k');
    e.check('g', 'k', 3);
    e.explain('g', 'k');
    e.check('sh', 'k');
    e.check('sh', 'k');
    const s = e.stats();
    expect(s.limitedByRule).toMatchObject({ 'global-limit': 4, 'cost-exceeds-limit': 1, starting: 0 });
    expect(s.limited + s.shadowLimited).toBe(5);
    expect(Object.values(s.limitedByRule).reduce((a, b) => a + b, 0)).toBe(5);
    // a copy: the caller's object does not move with the engine
    e.check('g', 'k');
    expect(s.limitedByRule['global-limit']).toBe(4);
    expect(e.stats().limitedByRule['global-limit']).toBe(5);
  });
});
