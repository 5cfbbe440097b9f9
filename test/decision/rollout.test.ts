import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { ErrorCodes, isRateMeshError } from '../../src/errors.js';
import type { PolicySpec } from '../../src/types.js';
import { expectCode, gossip, spend, T0 } from './helpers.js';

const A: PolicySpec = { name: 'a', limit: 100, windowMs: 1000, buckets: 10 };
const B_OLD: PolicySpec = { name: 'b', limit: 100, windowMs: 1000, buckets: 10 };
const B_NEW: PolicySpec = { ...B_OLD, limit: 150 };

/** The most admitted in any rolling window of `w` ms (times ascending). */
function worstRolling(times: number[], w = 1000): number {
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < times.length; hi++) {
    while (times[hi]! - times[lo]! >= w) lo++;
    if (hi - lo + 1 > best) best = hi - lo + 1;
  }
  return best;
}

/**
 * N engines on one virtual clock, each offered one request per policy every
 * N ms (N × L per second in total, far over the limits), gossiping every 10 ms
 * to every other with no delay. `at` runs callbacks at given virtual times
 * (a node's config change). Returns the admitted times per policy.
 */
function run(
  policiesOf: (i: number) => PolicySpec[],
  ms: number,
  at: Record<number, (es: Engine[]) => void> = {},
  n = 4,
): { es: Engine[]; admitted: Record<string, number[]> } {
  const clock = new ManualClock(T0);
  const es = Array.from(
    { length: n },
    (_, i) =>
      new Engine({
        gossipIntervalMs: 10,
        policies: policiesOf(i),
        clock,
        nodeId: `n${i}`,
        expectedMembers: n,
        sketchSeed: 1,
      }),
  );
  const admitted: Record<string, number[]> = { a: [], b: [] };
  for (let t = 0; t < ms; t++) {
    clock.set(T0 + t);
    at[t]?.(es);
    const e = es[t % n]!;
    for (const p of ['a', 'b']) if (e.check(p, 'k').allowed) admitted[p]!.push(t);
    if (t % 10 === 0) for (const x of es) gossip(x, ...es.filter((y) => y !== x));
  }
  return { es, admitted };
}

describe('per-policy versions: a changed policy does not split the others', () => {
  it('two groups on different versions of b: a (unchanged) merges across both and holds L; b holds near max(L_old, L_new)', () => {
    const { es, admitted } = run((i) => [A, i < 2 ? B_OLD : B_NEW], 6000);
    const worstA = worstRolling(admitted.a!);
    const worstB = worstRolling(admitted.b!);
    // one membership: a's counts merge over all four nodes (two split halves would admit ~2 L)
    expect(worstA).toBeLessThanOrEqual(A.limit * 1.02);
    expect(worstA).toBeGreaterThanOrEqual(A.limit * 0.9);
    // b: each group admits its L times its share of the members (2/4): 50 + 75
    expect(worstB).toBeLessThanOrEqual(Math.max(B_OLD.limit, B_NEW.limit) * 1.02);
    expect(worstB).toBeGreaterThanOrEqual(110);
    // every node sees the other group's two members on another version of b, none for a
    for (const e of es) {
      expect(e.stats().foreignVersion).toEqual({ b: 2 });
      expect(e.stats().livePeers).toBe(3);
    }
    expect(es[0]!.stats().foreignEntries).toBeGreaterThan(0);
  });

  it('without the L/N reservation the same split would pass max(L): the test can fail', () => {
    // the same run where the new group has b under another name: nothing ties the two, each spends its L
    const renamed: PolicySpec = { ...B_NEW, name: 'b2' };
    const clock = new ManualClock(T0);
    const es = [0, 1, 2, 3].map(
      (i) =>
        new Engine({
          gossipIntervalMs: 10,
          policies: [A, i < 2 ? B_OLD : renamed],
          clock,
          nodeId: `n${i}`,
          expectedMembers: 4,
        }),
    );
    const times: number[] = [];
    for (let t = 0; t < 4000; t++) {
      clock.set(T0 + t);
      const e = es[t % 4]!;
      if (e.check(t % 4 < 2 ? 'b' : 'b2', 'k').allowed) times.push(t);
      if (t % 10 === 0) for (const x of es) gossip(x, ...es.filter((y) => y !== x));
    }
    expect(worstRolling(times)).toBeGreaterThan(B_NEW.limit * 1.02);
  });

  it('a rolling change in place (one node a second): a holds L, b holds max(L_old, L_new) throughout and ends at L_new', () => {
    const at: Record<number, (es: Engine[]) => void> = {};
    for (let i = 0; i < 4; i++) at[2000 + 1000 * i] = (es) => es[i]!.replacePolicies([A, B_NEW]);
    const { es, admitted } = run(() => [A, B_OLD], 9000, at);
    expect(worstRolling(admitted.a!)).toBeLessThanOrEqual(A.limit * 1.02);
    expect(worstRolling(admitted.b!)).toBeLessThanOrEqual(B_NEW.limit * 1.02);
    // a kept merging through every change: its last seconds still at L
    const lastA = admitted.a!.filter((t) => t >= 7000 && t < 8000).length;
    expect(lastA).toBeGreaterThanOrEqual(A.limit * 0.9);
    const lastB = admitted.b!.filter((t) => t >= 7000 && t < 8000).length;
    expect(lastB).toBeGreaterThanOrEqual(B_NEW.limit * 0.9);
    for (const e of es) expect(e.stats().foreignVersion).toEqual({});
  });

  it('a rolling decrease in place: b stays within the old (larger) limit and ends at the new one', () => {
    const big: PolicySpec = { ...B_OLD, limit: 200 };
    const at: Record<number, (es: Engine[]) => void> = {};
    for (let i = 0; i < 4; i++) at[2000 + 1000 * i] = (es) => es[i]!.replacePolicies([A, B_OLD]);
    const { admitted } = run(() => [A, big], 9000, at);
    expect(worstRolling(admitted.b!)).toBeLessThanOrEqual(big.limit * 1.02);
    expect(worstRolling(admitted.a!)).toBeLessThanOrEqual(A.limit * 1.02);
    const lastB = admitted.b!.filter((t) => t >= 7500 && t < 8500).length;
    expect(lastB).toBeLessThanOrEqual(B_OLD.limit * 1.02);
  });

  it('a foreign-version mark lasts while the member keeps saying so, and expires like staleness', () => {
    const clock = new ManualClock(T0);
    // naive admission: the figures are the limit less the reservations, nothing else
    const naive = (p: PolicySpec): PolicySpec => ({ ...p, overAdmission: 'naive' });
    const y = new Engine({
      gossipIntervalMs: 10,
      policies: [naive(A), naive(B_NEW)],
      clock,
      nodeId: 'y',
      staleAfterMs: 50,
    });
    const x = new Engine({
      gossipIntervalMs: 10,
      policies: [naive(A), naive(B_OLD)],
      clock,
      nodeId: 'x',
      staleAfterMs: 50,
    });
    gossip(x, y);
    expect(y.stats().foreignVersion).toEqual({ b: 1 });
    // y reserves L/N = 150/2 of b for x; a is unaffected
    expect(spend(y, 'b', 'k', 200)).toBe(75);
    expect(spend(y, 'a', 'k', 200)).toBe(100);
    clock.advance(40);
    gossip(x, y);
    clock.advance(40);
    expect(y.stats().foreignVersion).toEqual({ b: 1 });
    clock.advance(40);
    // x has been silent past staleAfter: the mark is gone (x is stale now and counted as such)
    expect(y.stats().foreignVersion).toEqual({});
    expect(y.stats().stalePeers).toBe(1);
    // x moves to y's version: its next message clears the mark and its b counts merge
    x.replacePolicies([naive(A), naive(B_NEW)]);
    spend(x, 'b', 'j', 5);
    gossip(x, y);
    expect(y.stats().foreignVersion).toEqual({});
    expect(y.estimate('b', 'j')).toBe(5);
  });
});

describe('Engine.replacePolicies', () => {
  const LOC: PolicySpec = {
    name: 'loc',
    scope: 'local',
    algorithm: 'fixed-window',
    limit: 5,
    windowMs: 1000,
  };

  it('keeps unchanged policies (counts, local states, gossip), moves a changed one to its new version, adds and removes', () => {
    const clock = new ManualClock(T0);
    const e = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD, LOC], clock, nodeId: 'e' });
    const peer = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD], clock, nodeId: 'p' });
    expect(spend(e, 'a', 'k', 30)).toBe(30);
    expect(spend(e, 'b', 'k', 20)).toBe(20);
    expect(spend(e, 'loc', 'k', 3)).toBe(3);
    spend(peer, 'a', 'k', 7);
    // both ways: the peer knows e is live (a peer of a narrower view is reserved L/N, not shared with)
    gossip(e, peer);
    gossip(peer, e);
    const before = e.policyVersions();
    const C: PolicySpec = { name: 'c', limit: 10, windowMs: 1000 };
    // another order: a moves from position 0 to 2
    const r = e.replacePolicies([C, B_NEW, A, LOC]);
    expect(r.kept.sort()).toEqual(['a', 'loc']);
    expect(r.changed).toEqual(['b']);
    expect(r.added).toEqual(['c']);
    expect(r.removed).toEqual([]);
    expect(r.version).toBe(e.version);
    expect(e.policyVersions().a).toBe(before.a);
    expect(e.policyVersions().b).not.toBe(before.b);
    expect(e.estimate('a', 'k')).toBe(37); // own 30 + the peer's 7, kept
    // changed (only its limit): under its new version, with the admitted counts of its window carried over
    expect(e.estimate('b', 'k')).toBe(20);
    expect(e.check('b', 'k').limit).toBe(150);
    expect(spend(e, 'loc', 'k', 5)).toBe(2); // 3 of 5 were used: kept
    // controlled mode: shared with the live peer until demands are gossiped (the peer lacks c: after a tick it is all e's)
    expect(spend(e, 'c', 'k', 20)).toBe(5);
    // gossip still carries a's own counts under a's row
    const other = new Engine({ gossipIntervalMs: 10, policies: [A], clock, nodeId: 'o' });
    gossip(e, other);
    expect(other.estimate('a', 'k')).toBe(30);
    expect(e.stats().policyReplacements).toBe(1);
  });

  it('a changed window or bucket count starts the policy fresh (its counts are in other buckets)', () => {
    const clock = new ManualClock(T0);
    const e = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD], clock, nodeId: 'e' });
    spend(e, 'b', 'k', 20);
    spend(e, 'a', 'k', 5);
    const keys = e.stats().keys;
    expect(e.replacePolicies([A, { ...B_OLD, windowMs: 2000 }]).changed).toEqual(['b']);
    expect(e.estimate('b', 'k')).toBe(0);
    expect(e.estimate('a', 'k')).toBe(5);
    expect(e.stats().keys).toBe(keys - 1);
    expect(e.replacePolicies([A, { ...B_OLD, windowMs: 2000, buckets: 20 }]).changed).toEqual(['b']);
  });

  it('a removed policy is dropped: unknown to checks, its keys freed', () => {
    const clock = new ManualClock(T0);
    const e = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD], clock, nodeId: 'e' });
    spend(e, 'a', 'k', 3);
    for (let i = 0; i < 10; i++) spend(e, 'b', `k${i}`, 1);
    expect(e.stats().keys).toBe(11);
    const r = e.replacePolicies([A]);
    expect(r.removed).toEqual(['b']);
    expectCode(() => e.check('b', 'k'), ErrorCodes.POLICY_UNKNOWN);
    expect(e.stats().keys).toBe(1);
    expect(e.estimate('a', 'k')).toBe(3);
    expect(e.policyTable().map((x) => x.name)).toEqual(['a']);
  });

  it('an invalid set is refused and changes nothing', () => {
    const clock = new ManualClock(T0);
    const e = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD], clock, nodeId: 'e' });
    spend(e, 'a', 'k', 30);
    const v = e.version;
    let err: unknown;
    try {
      e.replacePolicies([A, { ...B_OLD, limit: -1 }]);
    } catch (x) {
      err = x;
    }
    expect(isRateMeshError(err) && err.field).toBe('policies[1].limit');
    expect(e.version).toBe(v);
    expect(e.estimate('a', 'k')).toBe(30);
    expect(e.check('b', 'k').limit).toBe(100);
    expect(e.stats().policyReplacements).toBe(0);
  });

  it('a snapshot restores only the policies at the version they were saved under', () => {
    const clock = new ManualClock(T0);
    const a = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD], clock, nodeId: 'a' });
    spend(a, 'a', 'k', 5);
    spend(a, 'b', 'k', 6);
    const b = new Engine({ gossipIntervalMs: 10, policies: [A, B_NEW], clock, nodeId: 'b' });
    expect(b.restoreSnapshot(a.snapshot())).toEqual({ ok: true, restored: 1 });
    expect(b.estimate('a', 'k')).toBe(5);
    expect(b.estimate('b', 'k')).toBe(0);
  });

  it('members last heard on the old version of a changed policy count as on another version at once', () => {
    const clock = new ManualClock(T0);
    const x = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD], clock, nodeId: 'x' });
    const y = new Engine({ gossipIntervalMs: 10, policies: [A, B_OLD], clock, nodeId: 'y' });
    gossip(x, y);
    expect(y.stats().foreignVersion).toEqual({});
    y.replacePolicies([A, B_NEW]);
    // before x says anything more: it ran the old b, so y reserves L/N of b for it
    expect(y.stats().foreignVersion).toEqual({ b: 1 });
    expect(spend(y, 'b', 'k', 200)).toBe(75);
  });
});
