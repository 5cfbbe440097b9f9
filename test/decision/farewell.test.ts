import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decodeMessage, TYPE_GOSSIP } from '../../src/crdt/codec.js';
import { Engine, type EngineOptions } from '../../src/decision/engine.js';
import type { PolicySpec } from '../../src/types.js';
import { spend, T0 } from './helpers.js';

const L = 100;
const W = 10_000;
const NAIVE: PolicySpec[] = [{ name: 'p', limit: L, windowMs: W, buckets: 10, overAdmission: 'naive' }];
const CONTROLLED: PolicySpec[] = [
  { name: 'p', limit: L, windowMs: W, buckets: 10, overAdmission: 'controlled', fallback: true },
  { name: 'local', limit: 5, windowMs: 1_000, scope: 'local' },
];

/** Engines `ids` on one clock, gossiping every 10 ms (stale after 50 ms). */
function mesh(
  ids: string[],
  policies: readonly PolicySpec[] = NAIVE,
  opts: Partial<EngineOptions> = {},
  clock = new ManualClock(T0),
): { nodes: Engine[]; clock: ManualClock } {
  return {
    nodes: ids.map((id) => new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: id, ...opts })),
    clock,
  };
}

/** Every node of `from` gossips to every other node of `to`. */
function round(from: Engine[], to: Engine[]): void {
  for (const f of from) {
    const bytes = f.buildGossip();
    for (const t of to) if (t !== f) t.receiveGossip(f.nodeId, bytes);
  }
}

/** Advances `clock` by `ms` in gossip rounds of 10 ms among `nodes`. */
function run(clock: ManualClock, ms: number, nodes: Engine[]): void {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(10);
    round(nodes, nodes);
  }
}

describe('a graceful stop: the farewell', () => {
  it('is a message of 0 members with the whole window of every key the node admitted', () => {
    const { nodes } = mesh(['a', 'b']);
    const [a, b] = nodes as [Engine, Engine];
    round(nodes, nodes);
    expect(spend(b, 'p', 'k1', 7)).toBe(7);
    expect(spend(b, 'p', 'k2', 3)).toBe(3);
    round([b], [a]);
    const bye = b.farewell();
    expect(bye).toBeInstanceOf(Uint8Array);
    const dec = decodeMessage(bye!);
    expect(dec.ok).toBe(true);
    if (!dec.ok || dec.message.type !== TYPE_GOSSIP) return;
    expect(dec.message.members).toBe(0);
    expect(dec.message.nacks).toEqual([]);
    const byKey = Object.fromEntries(dec.message.entries.map((e) => [e.key, e]));
    // whole windows (every count, not only what changed since the last message), and the demand
    // as it was (peers fade it over a window)
    expect(byKey.k1!.counts.reduce((s, x) => s + x, 0)).toBe(7);
    expect(byKey.k2!.counts.reduce((s, x) => s + x, 0)).toBe(3);
    expect(byKey.k1!.demand).toBeGreaterThan(0);
    expect(b.left).toBe(true);
    // every later message is a farewell again (a heartbeat would make the peers count it live)
    const again = decodeMessage(b.buildGossip());
    expect(again.ok && again.message.type === TYPE_GOSSIP && again.message.members).toBe(0);
  });

  /** a, b and c on a controlled policy; c admits `spent` of the key, then stops (with its farewell or killed). */
  function cStops(spent: number, farewell: boolean) {
    const { nodes, clock } = mesh(['a', 'b', 'c'], CONTROLLED);
    const [a, b, c] = nodes as [Engine, Engine, Engine];
    run(clock, 50, nodes);
    expect(spend(c, 'p', 'k', spent)).toBe(spent);
    round([c], [a, b]);
    if (farewell) {
      const bye = c.farewell()!;
      for (const n of [a, b]) expect(n.receiveGossip('c', bye)).toEqual({ ok: true });
    }
    return { a, b, clock };
  }

  /** a and b offer the key a request each every 5 ms for 2 s, gossiping between; what they admit. */
  function abSpend(a: Engine, b: Engine, clock: ManualClock): number {
    let admitted = 0;
    for (let i = 0; i < 400; i++) {
      clock.advance(5);
      admitted += spend(a, 'p', 'k', 1) + spend(b, 'p', 'k', 1);
      round([a, b], [a, b]);
    }
    return admitted;
  }

  it('makes the peers count the node departed at once, keeping its counts until they age out', () => {
    const { a, b, clock } = cStops(5, true);
    for (const n of [a, b]) {
      const s = n.stats();
      expect(s.peersLeft).toBe(1);
      expect(s.peersDeparted).toBe(1);
      expect(s.members).toBe(2);
      expect(s.stalePeers).toBe(0);
      expect(n.estimate('p', 'k')).toBe(5);
    }
    // a and b share the rest of L: no share is kept for c (killed, below: at most 67); c's last
    // demand fades from the shares over a window
    const admitted = abSpend(a, b, clock);
    expect(admitted).toBeGreaterThanOrEqual(85);
    expect(admitted).toBeLessThanOrEqual(95);
    expect(a.estimate('p', 'k')).toBeLessThanOrEqual(100);
    // c's 5 leave the window with time, as any count does
    run(clock, W + 1_000, [a, b]);
    expect(a.estimate('p', 'k')).toBe(0);
  });

  it('without one (killed) the node is kept a share, L/N, until it departs: the difference a farewell makes', () => {
    const { a, b, clock } = cStops(5, false);
    // c, stale, counts as spending at least L/N = 33: a and b admit at most 100 - 33
    const admitted = abSpend(a, b, clock);
    expect(admitted).toBeLessThanOrEqual(67);
    expect(admitted).toBeGreaterThan(50);
    expect(a.stats().peersLeft).toBe(0);
    expect(a.stats().stalePeers).toBe(1);
  });

  it('said again (a left node that still ticks) leaves its sender no member, counted once', () => {
    const { nodes } = mesh(['a', 'b']);
    const [a, b] = nodes as [Engine, Engine];
    round(nodes, nodes);
    expect(spend(b, 'p', 'k', 4)).toBe(4);
    expect(a.receiveGossip('b', b.farewell()!)).toEqual({ ok: true });
    for (let i = 0; i < 3; i++) expect(a.receiveGossip('b', b.buildGossip())).toEqual({ ok: true });
    expect(a.stats().peersLeft).toBe(1);
    expect(a.stats().members).toBe(1);
    expect(a.estimate('p', 'k')).toBe(4);
  });

  it('repairs what a peer missed: the farewell alone carries every count', () => {
    const { nodes } = mesh(['a', 'b']);
    const [a, b] = nodes as [Engine, Engine];
    round(nodes, nodes);
    expect(spend(b, 'p', 'k', 30)).toBe(30);
    b.buildGossip(); // lost on its way to a
    expect(spend(b, 'p', 'k2', 5)).toBe(5);
    b.buildGossip(); // lost too
    expect(a.estimate('p', 'k')).toBe(0);
    expect(a.receiveGossip('b', b.farewell()!)).toEqual({ ok: true });
    expect(a.estimate('p', 'k')).toBe(30);
    expect(a.estimate('p', 'k2')).toBe(5);
    expect(a.stats().peersLeft).toBe(1);
  });

  it('after it the engine decides no global policy; local ones go on', () => {
    const { nodes } = mesh(['a', 'b'], CONTROLLED);
    const [, b] = nodes as [Engine, Engine];
    expect(b.check('p', 'k').allowed).toBe(true);
    b.farewell();
    const d = b.check('p', 'k');
    expect(d).toMatchObject({ allowed: false, rule: 'left-mesh', mode: 'fallback', retryAfterMs: -1 });
    expect(b.check('local', 'k').allowed).toBe(true);
  });

  it('is not made when the keys do not fit one message: the node then stops deciding and its peers see it stale', () => {
    const { nodes, clock } = mesh(['a', 'b'], NAIVE, { maxKeysPerMessage: 4 });
    const [a, b] = nodes as [Engine, Engine];
    round(nodes, nodes);
    for (let i = 0; i < 5; i++) expect(spend(b, 'p', `k${i}`, 1)).toBe(1);
    expect(b.farewell()).toBeUndefined();
    expect(b.left).toBe(true);
    expect(b.check('p', 'k0').allowed).toBe(false);
    // its ticks still go out as plain messages (past the cap, in parts): a counts it live, then stale
    for (let i = 0; i < 3; i++) round([b], [a]);
    expect(a.stats().peersLeft).toBe(0);
    expect(a.stats().members).toBe(2);
    clock.advance(200);
    round([a], [a]);
    expect(a.stats().stalePeers).toBe(1);
  });

  it('from a peer whose clock is too far off (its counts not merged) departs nothing: it turns stale as before', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({
      gossipIntervalMs: 10,
      policies: NAIVE,
      clock,
      nodeId: 'a',
      maxClockOffsetMs: 1_000,
    });
    const skewed = new ManualClock(T0 + 5_000);
    const b = new Engine({ gossipIntervalMs: 10, policies: NAIVE, clock: skewed, nodeId: 'b' });
    a.receiveGossip('b', b.buildGossip());
    expect(spend(b, 'p', 'k', 10)).toBe(10);
    expect(a.receiveGossip('b', b.farewell()!)).toEqual({ ok: true });
    expect(a.stats().peersLeft).toBe(0);
    expect(a.stats().skewedPeers).toBe(1);
  });

  it('from a peer on another version of a policy: it departs, and is still counted as spending L/N of that policy for a window', () => {
    const clock = new ManualClock(T0);
    const two = (limit: number): PolicySpec[] => [
      { name: 'p', limit, windowMs: W, buckets: 10, overAdmission: 'naive' },
      { name: 'q', limit: 100, windowMs: W, buckets: 10, overAdmission: 'naive' },
    ];
    const a = new Engine({ gossipIntervalMs: 10, policies: two(90), clock, nodeId: 'a' });
    const c = new Engine({ gossipIntervalMs: 10, policies: two(90), clock, nodeId: 'c' });
    const b = new Engine({ gossipIntervalMs: 10, policies: two(100), clock, nodeId: 'b' });
    round([a, b, c], [a, b, c]);
    // b admits 30 of p at its version (a and c on theirs count as spending L/N each): they never merge them
    expect(spend(b, 'p', 'k', 30)).toBe(30);
    const bye = b.farewell()!;
    expect(a.receiveGossip('b', bye)).toEqual({ ok: true });
    expect(a.stats().peersLeft).toBe(1);
    expect(a.stats().members).toBe(2);
    // q (same version): no share kept for b; p: b still counts as spending L/N = 30 of it (N: a, c
    // and b, whose counts are still in a window), as it would stale: a admits 60, and with b's 30
    // unseen that is L
    expect(a.stats().foreignVersion).toEqual({ p: 1 });
    expect(spend(a, 'q', 'k', 100)).toBe(100);
    expect(spend(a, 'p', 'k', 90)).toBe(60);
    // for the longest window after b's last message, then no more
    clock.advance(W + 100);
    round([a, c], [a, c]);
    expect(a.stats().foreignVersion).toEqual({});
  });

  it('from a peer that moved to our version of a policy within the window departs nothing: what it admitted of the old one is in no window here', () => {
    const clock = new ManualClock(T0);
    const v2: PolicySpec[] = [{ ...NAIVE[0]!, limit: 90 }];
    const a = new Engine({ gossipIntervalMs: 10, policies: v2, clock, nodeId: 'a' });
    const b = new Engine({ gossipIntervalMs: 10, policies: NAIVE, clock, nodeId: 'b' });
    a.receiveGossip('b', b.buildGossip());
    expect(spend(b, 'p', 'k', 20)).toBe(20);
    a.receiveGossip('b', b.buildGossip());
    // b reloads to our version, then stops at once: the 20 it admitted of the old one are in no window of a's
    b.replacePolicies(v2);
    clock.advance(10);
    expect(a.receiveGossip('b', b.buildGossip())).toEqual({ ok: true });
    expect(a.receiveGossip('b', b.farewell()!)).toEqual({ ok: true });
    expect(a.stats().peersLeft).toBe(0);
    expect(a.stats().members).toBe(2);
    // a window later its farewell (a restart, same id) departs it
    clock.advance(W + 100);
    const b2 = new Engine({ gossipIntervalMs: 10, policies: v2, clock, nodeId: 'b' });
    expect(a.receiveGossip('b', b2.buildGossip())).toEqual({ ok: true });
    expect(a.receiveGossip('b', b2.farewell()!)).toEqual({ ok: true });
    expect(a.stats().peersLeft).toBe(1);
  });

  it('an older copy arriving after it (a relay) does not bring the node back; a restart does', () => {
    const { nodes, clock } = mesh(['a', 'b']);
    const [a, b] = nodes as [Engine, Engine];
    round(nodes, nodes);
    expect(spend(b, 'p', 'k', 10)).toBe(10);
    const older = b.buildGossip();
    clock.advance(10);
    expect(a.receiveGossip('b', b.farewell()!)).toEqual({ ok: true });
    expect(a.receiveGossip('b', older, undefined, true)).toEqual({ ok: false, reason: 'duplicate' });
    expect(a.stats().members).toBe(1);
    // b restarts with the same id: a new life, heard again, is a member again
    clock.advance(100);
    const b2 = new Engine({ gossipIntervalMs: 10, policies: NAIVE, clock, nodeId: 'b' });
    expect(a.receiveGossip('b', b2.buildGossip())).toEqual({ ok: true });
    expect(a.stats().members).toBe(2);
    // what b admitted before stays counted
    expect(a.estimate('p', 'k')).toBe(10);
  });

  it('a pod that replaces one gone by a farewell gets its counts from the sync answers at once', () => {
    const { nodes, clock } = mesh(['a', 'b', 'd']);
    const [a, b, d] = nodes as [Engine, Engine, Engine];
    round(nodes, nodes);
    expect(spend(d, 'p', 'k', 9)).toBe(9);
    round([d], [a, b]);
    const bye = d.farewell()!;
    a.receiveGossip('d', bye);
    b.receiveGossip('d', bye);
    // its successor joins the same moment: no stale period to wait for
    const s = new Engine({ gossipIntervalMs: 10, policies: NAIVE, clock, nodeId: 's' });
    for (const f of [a, b]) {
      const res = f.answerSync('s', s.buildSyncRequest());
      if (!(res instanceof Uint8Array)) throw new Error('no answer');
      expect(s.receiveSyncResponse(f.nodeId, res)).toEqual({ ok: true });
    }
    expect(s.estimate('p', 'k')).toBe(9);
    expect(s.stats().goneSynced).toBeGreaterThan(0);
    // d is no member of s: N is a, b and s
    expect(s.stats().members).toBe(3);
    expect(spend(s, 'p', 'k', L)).toBe(L - 9);
  });
});
