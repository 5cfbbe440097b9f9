import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import { OWNER_BELOW_UNITS, score } from '../../src/decision/owner.js';
import type { PolicySpec } from '../../src/types.js';

const T0 = 1.7e12;

/** Two engines that have heard each other (gossip both ways, a few ticks). */
function pair(policies: PolicySpec[]): { a: Engine; b: Engine; clock: ManualClock } {
  const clock = new ManualClock(T0);
  const a = new Engine({ nodeId: 'a', clock, policies, gossipIntervalMs: 10, expectedDelayMs: 1 });
  const b = new Engine({ nodeId: 'b', clock, policies, gossipIntervalMs: 10, expectedDelayMs: 1 });
  a.enableOwnerPlacement();
  b.enableOwnerPlacement();
  for (let i = 0; i < 100; i++) {
    clock.advance(10);
    b.receiveGossip('a', a.buildGossip());
    a.receiveGossip('b', b.buildGossip());
  }
  return { a, b, clock };
}

/** Advance `ms`, gossiping both ways every 10 ms (the peers stay live). */
function run(a: Engine, b: Engine, clock: ManualClock, ms: number): void {
  for (let t = 0; t < ms; t += 10) {
    clock.advance(Math.min(10, ms - t));
    b.receiveGossip('a', a.buildGossip());
    a.receiveGossip('b', b.buildGossip());
  }
}

function ownedBy(e: Engine, other: string, policy: string): string {
  for (let u = 0; u < 1_000; u++) if (e.remoteOwner(policy, `k${u}`) === other) return `k${u}`;
  throw new Error('no key owned by the other');
}

describe('owner placement in the engine (issue 27)', () => {
  it('auto puts a policy on owners while L < 4 N, and keeps it local from there', () => {
    expect(OWNER_BELOW_UNITS).toBe(4);
    const { a } = pair([
      { name: 'thin', limit: 7, windowMs: 60_000 },
      { name: 'dense', limit: 8, windowMs: 60_000 },
      { name: 'forced', limit: 1_000, windowMs: 1_000, placement: 'owner' },
      { name: 'never', limit: 1, windowMs: 1_000, placement: 'local' },
    ]);
    // N = 2: 7 < 8 is thin, 8 is not
    const thin = new Set<string | undefined>();
    const dense = new Set<string | undefined>();
    const forced = new Set<string | undefined>();
    const never = new Set<string | undefined>();
    for (let u = 0; u < 50; u++) {
      thin.add(a.remoteOwner('thin', `k${u}`));
      dense.add(a.remoteOwner('dense', `k${u}`));
      forced.add(a.remoteOwner('forced', `k${u}`));
      never.add(a.remoteOwner('never', `k${u}`));
    }
    expect(thin).toEqual(new Set([undefined, 'b']));
    expect(forced).toEqual(new Set([undefined, 'b']));
    expect(dense).toEqual(new Set([undefined]));
    expect(never).toEqual(new Set([undefined]));
    expect(a.check('dense', 'k1').owner).toBeUndefined();
  });

  it('both nodes agree on every owner; the split is about even', () => {
    const { a, b } = pair([{ name: 'login', limit: 5, windowMs: 60_000 }]);
    let onA = 0;
    for (let u = 0; u < 2_000; u++) {
      const k = `user:${u}`;
      const ofA = a.remoteOwner('login', k) ?? 'a';
      const ofB = b.remoteOwner('login', k) ?? 'b';
      expect(ofA).toBe(ofB);
      if (ofA === 'a') onA++;
    }
    expect(onA).toBeGreaterThan(850);
    expect(onA).toBeLessThan(1_150);
  });

  it('off unless enabled: a plain engine decides every key by the local rule, as before', () => {
    const clock = new ManualClock(T0);
    const e = new Engine({ nodeId: 'x', clock, policies: [{ name: 'login', limit: 5, windowMs: 60_000 }] });
    expect(e.remoteOwner('login', 'u')).toBeUndefined();
    expect(e.check('login', 'u').owner).toBeUndefined();
  });

  it('the settled owner decides exactly: L admitted, the next denied with the time its first leaves', () => {
    const { a, b, clock } = pair([{ name: 'login', limit: 5, windowMs: 60_000 }]);
    let key = '';
    for (let u = 0; u < 1_000; u++)
      if (a.remoteOwner('login', `own${u}`) === undefined) {
        key = `own${u}`;
        break;
      }
    const first = clock.now();
    for (let i = 0; i < 5; i++) {
      const d = a.check('login', key);
      expect(d.allowed).toBe(true);
      expect(d.owner).toEqual({ id: 'a', decidedBy: 'owner' });
      run(a, b, clock, 1_000);
    }
    const d = a.check('login', key);
    expect(d.allowed).toBe(false);
    expect(d.rule).toBe('global-limit');
    // exact: the first attempt leaves the window 60 s after it was made
    expect(d.retryAfterMs).toBe(first + 60_000 - clock.now());
    run(a, b, clock, d.retryAfterMs - 1);
    expect(a.check('login', key).allowed).toBe(false);
    run(a, b, clock, 1);
    expect(a.check('login', key).allowed).toBe(true);
  });

  it('a member joining: the owner decides by the local rule until the joiner names every member, then exactly; a key the joiner decided alone is shared until its demand fades', () => {
    // gossip every 1 s, so the hold after a view gains a member (a staleness period, the data's
    // age and an interval) lasts seconds; messages below are delivered by hand, within it
    const clock = new ManualClock(T0);
    const policies: PolicySpec[] = [{ name: 'login', limit: 5, windowMs: 60_000 }];
    const mk = (id: string) => {
      const e = new Engine({ nodeId: id, clock, policies, gossipIntervalMs: 1_000, expectedDelayMs: 1 });
      e.enableOwnerPlacement();
      return e;
    };
    const a = mk('a');
    const b = mk('b');
    const c = mk('c');
    const send = (from: Engine, to: Engine) => {
      const r = to.receiveGossip(from.nodeId, from.buildGossip());
      expect(r.ok).toBe(true);
    };
    // a and b formed long ago
    for (let i = 0; i < 20; i++) {
      clock.advance(1_000);
      send(a, b);
      send(b, a);
    }
    // two keys a owns with b, and with b and c
    const keys: string[] = [];
    for (let u = 0; u < 1_000 && keys.length < 2; u++) {
      const k = `user:${u}`;
      if (a.remoteOwner('login', k) === undefined && b.remoteOwner('login', k) === 'a') keys.push(k);
    }
    const [quiet, busy] = keys as [string, string];
    // c, alone (no peers: the local rule, L = 5 >= 4 N keeps it local), admits 3 of `busy`
    for (let i = 0; i < 3; i++) expect(c.check('login', busy).allowed).toBe(true);
    clock.advance(10);
    // c and a hear each other; c has not heard b: its message names 2 members, a hears 3
    send(a, c);
    send(c, a);
    expect(a.remoteOwner('login', quiet)).toBeUndefined();
    expect(a.remoteOwner('login', busy)).toBeUndefined();
    expect(a.peerViews().find((p) => p.id === 'c')?.members).toBe(2);
    expect(a.check('login', quiet).owner).toEqual({ id: 'a', decidedBy: 'local', reason: 'settling' });
    // c hears b, then names 3: every view agrees, well within the hold
    clock.advance(10);
    send(b, c);
    send(c, b);
    send(b, a);
    send(c, a);
    expect(a.peerViews().every((p) => p.members === 3)).toBe(true);
    const exact = a.check('login', quiet);
    expect(exact.owner).toEqual({ id: 'a', decidedBy: 'owner' });
    expect(exact.allowed).toBe(true);
    // `busy`: c decided it alone lately (its demand is in its gossip), so the owner shares it by
    // the local rule; the window holds c's 3, and no attempt anywhere passes L
    expect(a.estimate('login', busy)).toBe(3);
    let admitted = 3;
    for (let i = 0; i < 10; i++) {
      const d = a.check('login', busy);
      expect(d.owner).toEqual({ id: 'a', decidedBy: 'local', reason: 'shared' });
      if (d.allowed) admitted++;
      if (b.check('login', busy).allowed) admitted++;
      if (c.check('login', busy).allowed) admitted++;
    }
    expect(admitted).toBeLessThanOrEqual(5);
  });

  it('a starting node decides nothing as owner: it neither decides its keys exactly nor answers asks', () => {
    const clock = new ManualClock(T0);
    const policies: PolicySpec[] = [{ name: 'o', limit: 20, windowMs: 10_000, placement: 'owner' }];
    const base = { clock, policies, gossipIntervalMs: 10, expectedDelayMs: 1 };
    const { a: m, b: p } = pair(policies);
    // x joins: both answer its sync (it is a member at each from its request on) and it hears both
    const x = new Engine({ ...base, nodeId: 'x', expectedMembers: 3 });
    x.enableOwnerPlacement();
    m.answerSync('x', x.buildSyncRequest());
    p.answerSync('x', x.buildSyncRequest());
    clock.advance(5);
    x.receiveGossip('a', m.buildGossip());
    x.receiveGossip('b', p.buildGossip());
    expect(x.starting()).toBe(true);
    const own = Array.from({ length: 200 }, (_, u) => `k${u}`).find(
      (k) => x.remoteOwner('o', k) === undefined,
    )!;
    const d = x.check('o', own);
    expect(d).toMatchObject({ allowed: false, rule: 'starting' });
    expect(d.owner?.decidedBy).not.toBe('owner');
    expect(x.answerAsk('a', 'o', own, 1)).toEqual({ refused: 'starting' });
  });

  it('answers asks only as the owner, from a live member, with valid input; counts each refusal', () => {
    const { a, b } = pair([{ name: 'login', limit: 5, windowMs: 60_000 }]);
    const onB = ownedBy(a, 'b', 'login');
    const onA = ownedBy(b, 'a', 'login');
    const ok = b.answerAsk('a', 'login', onB, 1);
    expect('refused' in ok).toBe(false);
    if (!('refused' in ok)) expect(ok.owner).toEqual({ id: 'b', decidedBy: 'owner' });
    expect(b.answerAsk('a', 'login', onA, 1)).toEqual({ refused: 'not-owner' });
    expect(b.answerAsk('mallory', 'login', onB, 1)).toEqual({ refused: 'not-member' });
    expect(b.answerAsk('a', 'nope', onB, 1)).toEqual({ refused: 'bad-policy' });
    expect(b.answerAsk('a', 'login', '', 1)).toEqual({ refused: 'bad-key' });
    expect(b.answerAsk('a', 'login', 'x'.repeat(600), 1)).toEqual({ refused: 'bad-key' });
    expect(b.answerAsk('a', 'login', onB, 1.5)).toEqual({ refused: 'bad-cost' });
    expect(b.answerAsk('a', 'login', onB, -1)).toEqual({ refused: 'bad-cost' });
    expect(b.answerAsk('a', 'login', onB, 6)).toEqual({ refused: 'bad-cost' });
    expect(b.ownerStats().refused).toEqual({
      'not-owner': 1,
      'not-member': 1,
      'bad-policy': 1,
      'bad-key': 2,
      'bad-cost': 3,
    });
    // a look (cost 0) spends nothing
    const peek = b.answerAsk('a', 'login', onB, 0);
    expect('refused' in peek).toBe(false);
    expect(b.estimate('login', onB)).toBe(1);
  });

  it('a sync check of a key owned elsewhere says it could not ask: decided by the local rule', () => {
    const { a } = pair([{ name: 'login', limit: 5, windowMs: 60_000 }]);
    const onB = ownedBy(a, 'b', 'login');
    const d = a.check('login', onB);
    expect(d.owner).toEqual({ id: 'b', decidedBy: 'local', reason: 'sync-check' });
  });

  it('a key owned elsewhere whose full buckets already fill L is denied here without asking, reporting no demand; asks resume once they leave', () => {
    const { a, b, clock } = pair([{ name: 'login', limit: 5, windowMs: 60_000 }]);
    const onB = ownedBy(a, 'b', 'login');
    // b, the owner, admits L (asks from a), a hears it
    const firstAt = clock.now();
    for (let i = 0; i < 5; i++) {
      const d = b.answerAsk('a', 'login', onB, 1);
      expect('refused' in d ? d.refused : d.allowed).toBe(true);
      run(a, b, clock, 500);
    }
    expect(a.remoteOwner('login', onB)).toBeUndefined();
    const d = a.check('login', onB);
    expect(d.allowed).toBe(false);
    expect(d.rule).toBe('global-limit');
    expect(d.owner).toEqual({ id: 'b', decidedBy: 'local', reason: 'full' });
    // Retry-After: when the bucket of the first admissions has left the full-weight buckets
    const bw = 6_000;
    expect(d.retryAfterMs).toBe((Math.floor(firstAt / bw) + 10) * bw - clock.now());
    expect(a.explain('login', onB).reason).toContain('without asking');
    expect(a.ownerStats().deniedFull).toBe(1);
    // no demand reported for the key: the owner keeps deciding alone, exactly
    run(a, b, clock, 1_000);
    const again = b.answerAsk('a', 'login', onB, 1);
    expect('refused' in again ? undefined : again.owner).toEqual({ id: 'b', decidedBy: 'owner' });
    // a look (cost 0) still goes to the owner; so does every request once the buckets leave
    expect(a.remoteOwner('login', onB, undefined, 0)).toBe('b');
    run(a, b, clock, d.retryAfterMs - 1_000 - 10);
    expect(a.remoteOwner('login', onB)).toBeUndefined();
    run(a, b, clock, 20);
    expect(a.remoteOwner('login', onB)).toBe('b');
  });

  it('the psk keys the hash: the same members own keys differently with and without it', () => {
    const { a, b } = pair([{ name: 'login', limit: 5, windowMs: 60_000 }]);
    const before = Array.from({ length: 64 }, (_, u) => a.remoteOwner('login', `u${u}`) ?? 'a');
    a.setOwnerSecret(new Uint8Array([1, 2, 3]));
    b.setOwnerSecret(new Uint8Array([1, 2, 3]));
    const after = Array.from({ length: 64 }, (_, u) => a.remoteOwner('login', `u${u}`) ?? 'a');
    const afterB = Array.from({ length: 64 }, (_, u) => b.remoteOwner('login', `u${u}`) ?? 'b');
    expect(after).toEqual(afterB);
    expect(after).not.toEqual(before);
  });

  it('rendezvous scores spread: each of 8 members wins about an eighth of keys', () => {
    const members = Array.from({ length: 8 }, (_, i) => (Math.imul(i + 1, 0x9e3779b1) ^ 0x5bd1e995) >>> 0);
    const wins = new Array<number>(8).fill(0);
    for (let k = 0; k < 8_000; k++) {
      const h = Math.imul(k + 17, 0x85ebca6b) >>> 0;
      let best = -1;
      let at = 0;
      members.forEach((m, i) => {
        const s = score(h, m);
        if (s > best) {
          best = s;
          at = i;
        }
      });
      wins[at]!++;
    }
    for (const w of wins) {
      expect(w).toBeGreaterThan(800);
      expect(w).toBeLessThan(1_200);
    }
  });
});
