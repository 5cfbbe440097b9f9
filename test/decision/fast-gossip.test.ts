import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decodeMessage, TYPE_GOSSIP } from '../../src/crdt/codec.js';
import { Engine } from '../../src/decision/engine.js';
import { isRateMeshError } from '../../src/errors.js';
import { fastGossipIntervalMs, fastTickLateness } from '../../src/mesh/auto-relay.js';
import { parseOptions } from '../../src/mesh/options.js';
import { Prng } from '../../src/sim/prng.js';
import { Simulator } from '../../src/sim/simulator.js';
import type { PolicySpec } from '../../src/types.js';
import { gossip, T0 } from './helpers.js';

const L = 100;
const P: PolicySpec[] = [{ name: 'p', limit: L, windowMs: 1000, buckets: 10 }];

/** Two engines at g = 100 ms that hear each other, on one clock (`delayMs`: their expected delay). */
function pair(delayMs?: number): { a: Engine; b: Engine; clock: ManualClock } {
  const clock = new ManualClock(T0);
  const d = delayMs === undefined ? {} : { expectedDelayMs: delayMs };
  const a = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'a', ...d });
  const b = new Engine({ gossipIntervalMs: 100, policies: P, clock, nodeId: 'b', ...d });
  for (let i = 0; i < 2; i++) {
    gossip(a, b);
    gossip(b, a);
    clock.advance(10);
  }
  expect(a.stats().livePeers).toBe(1);
  return { a, b, clock };
}

/**
 * `rate` checks a second of key `k` on `a` for `ms`, evenly spaced, both engines gossiping every
 * 100 ms (b stays live); returns how many were allowed and denied.
 */
function steady(
  a: Engine,
  b: Engine,
  clock: ManualClock,
  k: string,
  rate: number,
  ms: number,
): { allowed: number; denied: number } {
  let allowed = 0;
  let denied = 0;
  const gap = 1000 / rate;
  let next = 0;
  for (let t = 0; t < ms; t++) {
    if (t % 100 === 0) {
      gossip(a, b);
      gossip(b, a);
    }
    while (next <= t) {
      if (a.check('p', k).allowed) allowed++;
      else denied++;
      next += gap;
    }
    clock.advance(1);
  }
  return { allowed, denied };
}

describe('fast gossip while a key is tight (Engine.wantsFastGossip)', () => {
  it('not asked for a key well under its share', () => {
    const { a, b, clock } = pair();
    expect(steady(a, b, clock, 'k', 20, 1500)).toEqual({ allowed: 30, denied: 0 });
    expect(a.wantsFastGossip()).toBe(false);
  });

  it('asked where traffic keeps a key near its share, for two intervals after', () => {
    const { a, b, clock } = pair();
    // 80 a second of L = 100: the window's average over two horizons (220 ms: 18) takes half of
    // a's allowance (half of the headroom) and more
    steady(a, b, clock, 'k', 80, 1500);
    expect(a.wantsFastGossip()).toBe(true);
    // two intervals after the last tight evaluation (time moves with the engine's calls): no longer
    clock.advance(2 * 100 + 100);
    a.buildGossip();
    expect(a.wantsFastGossip()).toBe(false);
    // tight again: asked again
    steady(a, b, clock, 'k', 80, 1000);
    expect(a.wantsFastGossip()).toBe(true);
  });

  it('judged by the average rate over the window, not the last two horizons: a lull in steady traffic still asks at its next request', () => {
    const { a, b, clock } = pair();
    steady(a, b, clock, 'k', 80, 1500);
    // 250 ms without a request (gossip goes on): no count in the last two horizons (220 ms), and
    // no longer asked (two intervals after the last request)
    for (let t = 0; t < 250; t += 50) {
      clock.advance(50);
      gossip(a, b);
      gossip(b, a);
    }
    expect(a.wantsFastGossip()).toBe(false);
    const x = a.explain('p', 'k');
    expect(x.share!.ownRecent).toBe(0);
    // the window's own counts at their average rate still take half the allowance over 220 ms
    expect(x.seen!.own * 0.22).toBeGreaterThanOrEqual(0.5 * x.share!.allowance);
    expect(a.check('p', 'k').allowed).toBe(true);
    expect(a.wantsFastGossip()).toBe(true);
  });
  it('not asked after a burst at one instant (it has passed: faster gossip would not have changed it)', () => {
    const { a } = pair();
    let ok = 0;
    for (let i = 0; i < 30; i++) if (a.check('p', 'k').allowed) ok++;
    expect(ok).toBe(30);
    expect(a.wantsFastGossip()).toBe(false);
  });

  it('asked where requests are denied by the share under steady traffic', () => {
    const { a, b, clock } = pair();
    const r = steady(a, b, clock, 'k', 150, 1500);
    expect(r.denied).toBeGreaterThan(0);
    expect(a.wantsFastGossip()).toBe(true);
  });

  it('explain reads the terms and asks for nothing; the same request checked does', () => {
    // a delay of 500 ms: two horizons (1.2 s) hold the whole window, and outlast the two
    // intervals (200 ms) the request is held for
    const { a, b, clock } = pair(500);
    steady(a, b, clock, 'k', 80, 1500);
    expect(a.wantsFastGossip()).toBe(true);
    clock.advance(250);
    gossip(b, a);
    expect(a.wantsFastGossip()).toBe(false);
    for (let i = 0; i < 3; i++) expect(a.explain('p', 'k').share).toBeDefined();
    expect(a.wantsFastGossip()).toBe(false);
    a.check('p', 'k');
    expect(a.wantsFastGossip()).toBe(true);
  });

  it('the interval auto picks: the broadcast budget of 1,000 messages a second, no faster than d, off past half of g', () => {
    expect(fastGossipIntervalMs(2, 100, 10)).toBe(10);
    expect(fastGossipIntervalMs(8, 100, 10)).toBe(10);
    expect(fastGossipIntervalMs(32, 100, 10)).toBe(31);
    expect(fastGossipIntervalMs(51, 100, 10)).toBe(50);
    expect(fastGossipIntervalMs(52, 100, 10)).toBe(0);
    expect(fastGossipIntervalMs(2, 100, 0)).toBe(1);
    expect(fastGossipIntervalMs(8, 10, 10)).toBe(0);
  });
});

describe('a key offered within the last interval sends its demand at every tick', () => {
  /** The keys of a's next message that carry a demand. */
  function demandKeys(a: Engine): string[] {
    const m = decodeMessage(a.buildGossip());
    if (!m.ok || m.message.type !== TYPE_GOSSIP) throw new Error('expected a gossip message');
    return m.message.entries.filter((e) => e.demand > 0).map((e) => e.key);
  }

  it('at ticks 10 ms apart: again 10 and 60 ms after its last request, not once g (100 ms) has passed', () => {
    const { a, clock } = pair();
    a.check('p', 'k');
    expect(demandKeys(a)).toEqual(['k']);
    // no request since: peers would age its demand by these messages without it (a tight key's
    // fast ticks), so it goes again while the key was offered within g
    clock.advance(10);
    expect(demandKeys(a)).toEqual(['k']);
    clock.advance(50);
    expect(demandKeys(a)).toEqual(['k']);
    clock.advance(60);
    expect(demandKeys(a)).toEqual([]);
  });
});

describe('fast ticks held off where they run late (short of CPU)', () => {
  it('a tick late now and then passes; late by half the interval on average, held', () => {
    let avg = 0;
    // 10 ms ticks, every fourth 12 ms late (a busy moment): the average stays under 5
    for (let i = 0; i < 40; i++) {
      avg = fastTickLateness(avg, i % 4 === 0 ? 12 : 0, 10);
      expect(avg).toBeGreaterThanOrEqual(0);
    }
    // late by 8 ms every tick (the cores saturated): held within a few ticks
    avg = 0;
    let ticks = 0;
    for (; ticks < 10; ticks++) {
      avg = fastTickLateness(avg, 8, 10);
      if (avg < 0) break;
    }
    expect(ticks).toBeLessThan(10);
    expect(ticks).toBeGreaterThan(0);
    // early ticks count as on time
    expect(fastTickLateness(0, -5, 10)).toBe(0);
  });
});

describe('the mesh option fastGossipIntervalMs', () => {
  const base = { policies: P, listen: ['/ip4/127.0.0.1/tcp/0'], gossipIntervalMs: 100 };
  it("'auto' by default; 0 and whole ms up to gossipIntervalMs are taken", () => {
    expect(parseOptions(base).fastGossipIntervalMs).toBe('auto');
    expect(parseOptions({ ...base, fastGossipIntervalMs: 0 }).fastGossipIntervalMs).toBe(0);
    expect(parseOptions({ ...base, fastGossipIntervalMs: 20 }).fastGossipIntervalMs).toBe(20);
    expect(parseOptions({ ...base, fastGossipIntervalMs: 100 }).fastGossipIntervalMs).toBe(100);
  });

  it.each([['fast'], [101], [1.5], [-1], [null]])('refuses %j with the field named', (v) => {
    let err: unknown;
    try {
      parseOptions({ ...base, fastGossipIntervalMs: v as never });
    } catch (e) {
      err = e;
    }
    expect(isRateMeshError(err)).toBe(true);
    if (isRateMeshError(err)) {
      expect(err.field).toBe('fastGossipIntervalMs');
      expect(err.message).toMatch(/'auto', 0 \(off\) or whole ms from 1 to gossipIntervalMs \(100\)/);
    }
  });
});

describe('fast gossip in the simulator: the global key near L on 8 nodes', () => {
  /** 900/s (or `rate`) over 4 s from 2 s, nodes drawn uniformly; denials, worst 1 s window, fast ticks. */
  function run(fastMs: number, rate: number): { denied: number; worst: number; fastTicks: number } {
    const policy = { name: 'g', limit: 1000, windowMs: 1000 };
    const sim = new Simulator({
      nodes: 8,
      gossipIntervalMs: 100,
      delayMs: 10,
      tickLateMs: 2,
      jitterMs: 1,
      seed: 7,
      engine: { expectedMembers: 8 },
      policies: [policy],
      fastGossipMs: fastMs,
    });
    const prng = new Prng(11);
    const times: number[] = [];
    let denied = 0;
    const n = rate * 4;
    for (let i = 0; i < n; i++) {
      const t = 2000 + (i * 1000) / rate;
      sim.runUntil(t);
      if (sim.request(Math.floor(prng.next() * 8), 'g', 'k').allowed) times.push(t);
      else denied++;
    }
    let worst = 0;
    let lo = 0;
    for (let hi = 0; hi < times.length; hi++) {
      while (times[lo]! <= times[hi]! - 1000) lo++;
      worst = Math.max(worst, hi - lo + 1);
    }
    return { denied, worst, fastTicks: sim.fastTicks };
  }

  it('at 0.9 L (an exact limiter denies none): far fewer denials with fast ticks while tight, never past L', () => {
    const off = run(0, 900);
    const on = run(10, 900);
    expect(off.fastTicks).toBe(0);
    expect(on.fastTicks).toBeGreaterThan(0);
    expect(off.denied).toBeGreaterThan(40);
    expect(on.denied * 5).toBeLessThan(off.denied);
    expect(on.worst).toBeLessThanOrEqual(1000);
    expect(off.worst).toBeLessThanOrEqual(1000);
  });

  it('at 0.5 L no key is tight: no fast tick, nothing denied', () => {
    const on = run(10, 500);
    expect(on.fastTicks).toBe(0);
    expect(on.denied).toBe(0);
  });

  it('at 2 L: never past L either way', () => {
    expect(run(10, 2000).worst).toBeLessThanOrEqual(1000);
    expect(run(0, 2000).worst).toBeLessThanOrEqual(1000);
  });
});
