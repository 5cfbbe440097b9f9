import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/decision/engine.js';
import { worstRolling } from '../../src/sim/metrics.js';
import { replayTrace, type SimOptions, Simulator } from '../../src/sim/simulator.js';
import { seedTrace } from '../../src/sim/trace.js';
import type { PolicySpec } from '../../src/types.js';

const POLICY: PolicySpec[] = [{ name: 'seed', limit: 1000, windowMs: 1000, buckets: 50 }];
const base: SimOptions = { nodes: 8, policies: POLICY, gossipIntervalMs: 10, delayMs: 10 };

describe('Simulator mechanics', () => {
  it('runs the production Engine on every node, on a virtual clock starting at the epoch', () => {
    const sim = new Simulator({ ...base, nodes: 3 });
    expect(sim.engines.every((e) => e instanceof Engine)).toBe(true);
    expect(sim.ids).toEqual(['node-0', 'node-1', 'node-2']);
    expect(sim.now).toBe(0);
    sim.runUntil(1000);
    expect(sim.now).toBe(1000);
    // every node ticks every g ms (phases spread over g): 100 ticks each in [0, 1000]
    expect(sim.messages).toBeGreaterThanOrEqual(300);
    expect(sim.messages).toBeLessThanOrEqual(303);
    // every engine heard both others
    for (const e of sim.engines)
      expect(e.stats()).toMatchObject({ livePeers: 2, members: 3, fallback: false });
  });

  it('gossip carries counts with the link delay', () => {
    const sim = new Simulator({ ...base, nodes: 2, delayMs: 25, earlyPublish: false });
    sim.runUntil(100);
    for (let i = 0; i < 10; i++) expect(sim.request(0, 'seed', 'k').allowed).toBe(true);
    // node 0 ticks at 110; node 1 hears it at 135
    sim.runUntil(134);
    expect(sim.engines[1]!.estimate('seed', 'k')).toBe(0);
    sim.runUntil(135);
    expect(sim.engines[1]!.estimate('seed', 'k')).toBe(10);
  });

  it('early publish: a node that spends 5 % of L publishes at once', () => {
    const run = (earlyPublish: boolean) => {
      const sim = new Simulator({ ...base, nodes: 2, gossipIntervalMs: 100, earlyPublish });
      sim.runUntil(1);
      const before = sim.messages;
      for (let i = 0; i < 50; i++) sim.request(0, 'seed', 'k');
      return sim.messages - before;
    };
    expect(run(true)).toBe(1);
    expect(run(false)).toBe(0);
  });

  it('refuses aligned rounds, removed (every node ticks on its own phase)', () => {
    expect(() => new Simulator({ ...base, nodes: 2, rounds: 'aligned' } as never)).toThrow(/was removed/);
  });

  it('loss 1.0 delivers nothing: every node stays alone', () => {
    const sim = new Simulator({ ...base, nodes: 3, loss: 1 });
    sim.runUntil(500);
    expect(sim.delivered).toBe(0);
    expect(sim.lost).toBe(sim.messages * 2);
    for (const e of sim.engines) expect(e.stats().livePeers + e.stats().stalePeers).toBe(0);
  });

  it('loss p loses about p of the deliveries, and delivered + lost accounts for every copy', () => {
    const sim = new Simulator({ ...base, nodes: 4, loss: 0.2, seed: 7 });
    sim.runUntil(2000);
    sim.runUntil(2000 + 20); // let in-flight copies land
    const copies = sim.delivered + sim.lost;
    expect(Math.abs(sim.lost / copies - 0.2)).toBeLessThan(0.03);
    expect(copies).toBeLessThanOrEqual(sim.messages * 3);
    expect(copies).toBeGreaterThanOrEqual(sim.messages * 3 - 12);
  });

  it('a cut node hears nothing and is heard by nobody during the cut, then catches up', () => {
    const sim = new Simulator({ ...base, nodes: 3, cuts: [{ node: 0, fromMs: 100, toMs: 400 }] });
    sim.runUntil(99);
    expect(sim.engines[0]!.stats().livePeers).toBe(2);
    sim.runUntil(200);
    expect(sim.isCut(0, 200)).toBe(true);
    expect(sim.isCut(0, 400)).toBe(false);
    expect(sim.isCut(1, 200)).toBe(false);
    expect(sim.engines[0]!.stats()).toMatchObject({ livePeers: 0, fallback: true, members: 3 });
    expect(sim.engines[1]!.stats()).toMatchObject({ livePeers: 1, stalePeers: 1 });
    for (let i = 0; i < 5; i++) sim.request(1, 'seed', 'k');
    sim.runUntil(300);
    expect(sim.engines[0]!.estimate('seed', 'k')).toBe(0);
    expect(sim.request(0, 'seed', 'k').mode).toBe('fallback');
    sim.runUntil(450);
    expect(sim.engines[0]!.stats()).toMatchObject({ livePeers: 2, fallback: false });
    // the copies sent during the cut were lost; anti-entropy (every 50 ticks = 500 ms) repairs them
    // while the counts are still in the window
    sim.runUntil(1050);
    expect(sim.engines[0]!.estimate('seed', 'k')).toBe(6);
    expect(sim.engines[1]!.estimate('seed', 'k')).toBe(6);
    expect(sim.engines[2]!.estimate('seed', 'k')).toBe(6);
  });

  it('at(t, fn) runs callbacks in time order on the virtual clock', () => {
    const sim = new Simulator({ ...base, nodes: 1 });
    const seen: number[] = [];
    sim.at(30, () => seen.push(sim.now));
    sim.at(10, () => seen.push(sim.now));
    sim.at(10, () => seen.push(sim.now + 0.5));
    sim.runUntil(25);
    expect(seen).toEqual([10, 10.5]);
    sim.runUntil(30);
    expect(seen).toEqual([10, 10.5, 30]);
  });

  it('is deterministic: the same seed gives the identical result; another seed another loss pattern', () => {
    const trace = seedTrace(6000);
    const opts: SimOptions = { ...base, loss: 0.1, jitterMs: 5, seed: 3 };
    const a = replayTrace(trace, opts, 'seed');
    const b = replayTrace(trace, opts, 'seed');
    expect(b.admitted).toEqual(a.admitted);
    expect(b.admittedByNode).toEqual(a.admittedByNode);
    expect([b.messages, b.bytes, b.sim.delivered, b.sim.lost]).toEqual([
      a.messages,
      a.bytes,
      a.sim.delivered,
      a.sim.lost,
    ]);
    const c = replayTrace(trace, { ...opts, seed: 4 }, 'seed');
    expect(c.admitted).not.toEqual(a.admitted);
    expect(c.sim.delivered).not.toBe(a.sim.delivered);
  });

  it('replayTrace reports per node and the duration; the onRequest hook sees every decision', () => {
    const trace = seedTrace(2000);
    let calls = 0;
    const r = replayTrace(trace, base, 'seed', 'global', (_i, node, d) => {
      calls++;
      expect(node).toBeLessThan(8);
      expect(d.policy).toBe('seed');
    });
    expect(calls).toBe(2000);
    expect(r.offeredByNode.reduce((s, x) => s + x, 0)).toBe(2000);
    expect(r.admittedByNode.reduce((s, x) => s + x, 0)).toBe(r.admitted.length);
    expect(r.durationMs).toBe(999.5 + 0.5);
    // 2000 requests in the first second against 1000 per second
    expect(r.admitted.length).toBeLessThanOrEqual(1010);
    expect(worstRolling(r.admitted, 1000)).toBe(r.admitted.length);
  });
});
