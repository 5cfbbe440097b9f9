import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine, type EngineOptions } from '../../src/decision/engine.js';
import type { PolicySpec } from '../../src/types.js';
import { gossip, spend, T0 } from './helpers.js';

const L = 90;
/** These drills run at g = 10 ms, d = 10 ms: stale after 3g + 2d = 50 ms. */
const G = 10;

function mesh(n: number, spec: Partial<PolicySpec> = {}, opts: Partial<EngineOptions> = {}) {
  const clock = new ManualClock(T0);
  const policies: PolicySpec[] = [{ name: 'p', limit: L, windowMs: 1000, buckets: 10, ...spec }];
  const es = Array.from(
    { length: n },
    (_, i) => new Engine({ policies, clock, nodeId: `n${i}`, gossipIntervalMs: G, ...opts }),
  );
  /** Everyone in `live` gossips to everyone else, `times` times, `everyMs` apart. */
  const rounds = (live: Engine[], times = 1, everyMs = 10) => {
    for (let r = 0; r < times; r++) {
      for (const from of live) gossip(from, ...es.filter((e) => e !== from));
      clock.advance(everyMs);
    }
  };
  return { es, clock, rounds };
}

describe('staleness and fallback', () => {
  it('defaults: stale after 3g + 2d: 50 ms at g = 10, 320 ms at the default g = 100 (the mesh default too)', () => {
    const { es } = mesh(1);
    expect(es[0]!.staleAfterMs).toBe(50);
    const dflt = new Engine({ policies: [{ name: 'p', limit: L, windowMs: 1000 }] });
    expect(dflt.gossipIntervalMs).toBe(100);
    expect(dflt.expectedDelayMs).toBe(10);
    expect(dflt.staleAfterMs).toBe(320);
  });

  it('every peer silent longer than staleAfterMs: fallback to floor(L/N) on own counts, then back to global', () => {
    const { es, clock, rounds } = mesh(3);
    const [a, b, c] = es as [Engine, Engine, Engine];
    rounds(es, 3);
    expect(a.stats()).toMatchObject({ livePeers: 2, stalePeers: 0, members: 3, fallback: false });
    expect(spend(a, 'p', 'k', 10)).toBe(10); // own counts in the window: 10
    gossip(a, b, c);
    clock.advance(51);
    expect(a.fallbackActive).toBe(true);
    expect(a.stats()).toMatchObject({ livePeers: 0, stalePeers: 2, members: 3, fallback: true });
    const d = a.check('p', 'k');
    expect(d).toMatchObject({ allowed: true, mode: 'fallback', remaining: 30 - 11 });
    expect(spend(a, 'p', 'k', 100)).toBe(30 - 11);
    const denied = a.check('p', 'k');
    expect(denied).toMatchObject({ allowed: false, mode: 'fallback', rule: 'fallback-share', remaining: 0 });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(a.estimate('p', 'k')).toBe(30);
    expect(a.stats().byMode.fallback).toBeGreaterThanOrEqual(20);
    // other keys get their own L/N
    expect(spend(a, 'p', 'other', 100)).toBe(30);
    // gossip resumes: back to the global estimate (b and c saw a's first 10 plus nothing else)
    gossip(b, a);
    gossip(c, a);
    expect(a.fallbackActive).toBe(false);
    const back = a.check('p', 'k');
    expect(back.mode).toBe('global');
    expect(a.stats().fallback).toBe(false);
  });

  it('N is the member count last known: a 2-node mesh falls back to L/2', () => {
    const { es, clock, rounds } = mesh(2);
    const a = es[0]!;
    rounds(es, 2);
    clock.advance(100);
    expect(spend(a, 'p', 'k', 100)).toBe(L / 2);
  });

  it('a node that never heard a peer is not in fallback (it is alone: the whole limit is its own)', () => {
    const { es, clock } = mesh(1);
    clock.advance(10_000);
    expect(spend(es[0]!, 'p', 'k', 200)).toBe(L);
    expect(es[0]!.stats().fallback).toBe(false);
  });

  it('partly stale: a stale peer is counted as spending at least L/N', () => {
    // naive rule, so what limits is the estimate plus the stale reserve alone
    const { es, clock, rounds } = mesh(3, { overAdmission: 'naive' });
    const [a, b] = es as [Engine, Engine, Engine];
    rounds(es, 3);
    // c goes silent; a and b keep gossiping
    for (let i = 0; i < 6; i++) rounds([a, b], 1, 10);
    clock.advance(1);
    expect(a.stats()).toMatchObject({ livePeers: 1, stalePeers: 1, members: 3, fallback: false });
    const d = a.check('p', 'k');
    expect(d.mode).toBe('global');
    expect(d.remaining).toBe(L - L / 3 - 1);
    expect(spend(a, 'p', 'k', 200)).toBe(L - L / 3 - 1);
    expect(a.check('p', 'k').rule).toBe('global-limit');
  });

  it('partly stale: a stale peer counts as what it was seen to spend plus what it may have admitted unseen', () => {
    const { es, rounds } = mesh(3, { overAdmission: 'naive' });
    const [a, b, c] = es as [Engine, Engine, Engine];
    rounds(es, 2);
    expect(spend(c, 'p', 'k', 50)).toBe(50);
    gossip(c, a, b);
    for (let i = 0; i < 6; i++) rounds([a, b], 1, 10);
    expect(a.stats().stalePeers).toBe(1);
    // c offered 50 in its key's first bucket (100 ms): a demand of 500 per window. Until its own
    // view went stale too (staleAfter + d = 60 ms after its last message) it may have admitted at
    // that rate unseen: 30 more than the 50 seen, which is more than L/N = 30 on its own.
    expect(spend(a, 'p', 'k', 200)).toBe(L - 50 - 30);
    // once that stretch and c's counts have left the window, c counts as L/N only
    rounds([a, b], 111, 10);
    expect(a.stats().stalePeers).toBe(1);
    expect(spend(a, 'p', 'k', 200)).toBe(L - L / 3);
  });

  it('controlled rule with a stale peer never admits more than the naive one', () => {
    const run = (overAdmission: 'naive' | 'controlled') => {
      const { es, rounds } = mesh(3, { overAdmission });
      const [a, b] = es as [Engine, Engine, Engine];
      rounds(es, 3);
      for (let i = 0; i < 6; i++) rounds([a, b], 1, 10);
      return spend(a, 'p', 'k', 200);
    };
    expect(run('controlled')).toBeLessThanOrEqual(run('naive'));
  });

  it('fallback: false: no L/N fallback and no stale reservation, only the (stale) estimate', () => {
    const run = (fallback: boolean) => {
      const { es, clock, rounds } = mesh(3, { fallback, overAdmission: 'naive' });
      const [a, b, c] = es as [Engine, Engine, Engine];
      rounds(es, 3);
      expect(spend(b, 'p', 'k', 10)).toBe(10);
      gossip(b, a, c);
      clock.advance(100);
      const d = a.check('p', 'k');
      expect(a.stats().fallback).toBe(true); // the view is stale all the same
      return { mode: d.mode, admitted: (d.allowed ? 1 : 0) + spend(a, 'p', 'k', 200) };
    };
    expect(run(true)).toEqual({ mode: 'fallback', admitted: L / 3 });
    expect(run(false)).toEqual({ mode: 'global', admitted: L - 10 });
  });

  it('fallback: false with some peers stale: no stale reservation either', () => {
    const { es, rounds } = mesh(3, { fallback: false, overAdmission: 'naive' });
    const [a, b] = es as [Engine, Engine, Engine];
    rounds(es, 3);
    for (let i = 0; i < 6; i++) rounds([a, b], 1, 10);
    expect(a.stats().stalePeers).toBe(1);
    expect(spend(a, 'p', 'k', 200)).toBe(L);
  });

  it('departed peers (silent > departAfterMs while others live) stop counting', () => {
    const { es, clock, rounds } = mesh(3, { overAdmission: 'naive' }, { departAfterMs: 300 });
    const [a, b] = es as [Engine, Engine, Engine];
    rounds(es, 3);
    for (let i = 0; i < 10; i++) rounds([a, b], 1, 10);
    expect(a.stats()).toMatchObject({ members: 3, stalePeers: 1 });
    for (let i = 0; i < 25; i++) rounds([a, b], 1, 10);
    expect(a.stats()).toMatchObject({ livePeers: 1, stalePeers: 0, members: 2 });
    expect(a.peerViews().map((v) => v.id)).toEqual(['n1']);
    // no stale reserve any more: the whole limit is available
    expect(spend(a, 'p', 'k', 200)).toBe(L);
    // and N for the fallback is now 2
    clock.advance(100);
    expect(spend(a, 'p', 'other', 200)).toBe(L / 2);
  });

  it('when every peer is stale nobody departs and N stays as last known', () => {
    const { es, clock, rounds } = mesh(3, {}, { departAfterMs: 300 });
    const a = es[0]!;
    rounds(es, 3);
    clock.advance(10_000);
    expect(a.stats()).toMatchObject({ members: 3, stalePeers: 2, fallback: true });
    expect(spend(a, 'p', 'k', 200)).toBe(L / 3);
  });

  it('one depart rule: with no member live, a peer departs only once its connection has been gone departAfterMs too', () => {
    const { es, clock, rounds } = mesh(3, {}, { departAfterMs: 300 });
    const a = es[0]!;
    rounds(es, 3);
    // n1 stays connected but quiet; n2's connection is gone
    a.peerConnection('n1', true);
    a.peerConnection('n2', false);
    clock.advance(200);
    a.peerConnection('n2', false); // reported on every sweep: the first report counts
    clock.advance(150);
    // both silent 350 ms > 300 and no member live: n2 has been disconnected for 350 ms, n1 not at all
    expect(a.stats()).toMatchObject({
      livePeers: 0,
      stalePeers: 1,
      members: 3,
      peersDeparted: 1,
      fallback: true,
    });
    expect(a.peerViews().map((v) => v.id)).toEqual(['n1']);
    // a reconnected peer is not departed for its silence alone
    a.peerConnection('n1', false);
    a.peerConnection('n1', true);
    clock.advance(1000);
    expect(a.stats()).toMatchObject({ stalePeers: 1, peersDeparted: 1 });
    // gone for departAfterMs: it departs too, and the survivor decides alone
    a.peerConnection('n1', false);
    clock.advance(301);
    expect(a.stats()).toMatchObject({ livePeers: 0, stalePeers: 0, peersDeparted: 2, fallback: false });
    expect(a.check('p', 'k').mode).toBe('global');
  });

  it('peerDeparted (the transport saw it leave) removes a member at once', () => {
    const { es, rounds } = mesh(3);
    const a = es[0]!;
    rounds(es, 3);
    a.peerDeparted('n2');
    a.peerDeparted('unknown');
    expect(a.stats()).toMatchObject({ livePeers: 1, members: 2 });
  });

  it('a peer silent longer than a window strands nothing: its counts age out', () => {
    const { es, clock, rounds } = mesh(2, { overAdmission: 'naive' }, { departAfterMs: 300 });
    const [a, b] = es as [Engine, Engine];
    rounds(es, 2);
    expect(spend(b, 'p', 'k', 60)).toBe(60);
    gossip(b, a);
    expect(a.estimate('p', 'k')).toBe(60);
    clock.advance(1200);
    expect(a.estimate('p', 'k')).toBe(0);
  });
});

describe('a node that expects peers (restart)', () => {
  it('enforces L/N with N = expectedMembers until it hears a peer, then decides globally', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    const fresh = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'fresh', expectedMembers: 4 });
    let admitted = 0;
    for (let i = 0; i < 100; i++) {
      const d = fresh.check('p', 'k');
      if (d.allowed) admitted++;
      else expect(d).toMatchObject({ mode: 'fallback', rule: 'fallback-share' });
    }
    expect(admitted).toBe(25);
    const peers = ['p1', 'p2', 'p3'].map(
      (id) => new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: id, expectedMembers: 4 }),
    );
    expect(fresh.receiveGossip('p1', peers[0]!.buildGossip())).toEqual({ ok: true });
    // one of three expected peers heard: the others' shares are unseen, still L/N
    expect(fresh.check('p', 'k').mode).toBe('fallback');
    fresh.receiveGossip('p2', peers[1]!.buildGossip());
    fresh.receiveGossip('p3', peers[2]!.buildGossip());
    // global now, but each peer said it heard no one: still starting, on its own L/N. Each is a
    // sharer whose share of the headroom (a quarter of it, no demand heard) covers its L/N, so no
    // reserve beyond it (the narrow-view excess); our 25 fallback admissions fill our quarter
    const starting = fresh.check('p', 'k');
    expect(starting).toMatchObject({ allowed: false, mode: 'global', rule: 'headroom-share' });
    expect(fresh.explain('p', 'k').reserves?.narrowView).toBe(0);
    // a peer that had admitted its L/N already is seen (no more to reserve); one whose share is
    // smaller than what its start-up share leaves it is reserved the rest, off our allowance
    // whole (test/decision/narrow.test.ts)
    // they hear each other and fresh: no reserve; until its own demand has gone out in a tick, it
    // claims only 1/N of the headroom, and its 25 fallback admissions already fill that
    const all = [fresh, ...peers];
    const msgs = all.map((e) => e.buildGossip());
    for (let i = 0; i < all.length; i++)
      for (let j = 0; j < all.length; j++) if (i !== j) all[j]!.receiveGossip(all[i]!.nodeId, msgs[i]!);
    for (let i = 1; i < all.length; i++) fresh.receiveGossip(all[i]!.nodeId, all[i]!.buildGossip());
    expect(fresh.explain('p', 'k').reserves?.narrowView).toBe(0);
    expect(fresh.check('p', 'k')).toMatchObject({ allowed: false, mode: 'global', rule: 'headroom-share' });
    fresh.buildGossip(); // its demand is out, but no peer can hold it yet: still its part of the room
    expect(fresh.check('p', 'k')).toMatchObject({ allowed: false, mode: 'global', rule: 'headroom-share' });
  });

  it('a bootstrap name found to resolve to more members raises the start-up N while starting, and only then', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    // one DNS name in the bootstrap list: 1 + 1 expected until discovery resolves it to 4 others
    const fresh = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'fresh', expectedMembers: 2 });
    fresh.expectMembers(5);
    fresh.expectMembers(3); // never lowered
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (fresh.check('p', 'k').allowed) admitted++;
    expect(admitted).toBe(20);
    // once the start is over (every expected peer heard) it changes nothing
    const peers = ['p1', 'p2', 'p3', 'p4'].map(
      (id) => new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: id, expectedMembers: 5 }),
    );
    for (const p of peers) fresh.receiveGossip(p.nodeId, p.buildGossip());
    expect(fresh.stats().members).toBe(5);
    fresh.expectMembers(9);
    expect(fresh.check('p', 'k').mode).toBe('global');
  });

  it('in fallback, counts it already holds still bound it by L: a restarted node that pulled a full window admits only what is left', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    const busy = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'busy' });
    let spent = 0;
    for (let i = 0; i < 90; i++) if (busy.check('p', 'k').allowed) spent++;
    expect(spent).toBe(90);
    const fresh = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'fresh', expectedMembers: 4 });
    // it hears one of three expected peers (carrying 'busy''s window): still in L/N fallback
    expect(fresh.receiveGossip('busy', busy.buildGossip())).toEqual({ ok: true });
    let admitted = 0;
    let last = fresh.check('p', 'k');
    for (let i = 0; i < 100; i++) {
      const d = i === 0 ? last : fresh.check('p', 'k');
      last = d;
      expect(d.mode).toBe('fallback');
      if (d.allowed) admitted++;
    }
    // L/N would be 25; what the view holds leaves 100 - 90 = 10
    expect(admitted).toBe(10);
    expect(last).toMatchObject({ allowed: false, rule: 'global-limit', mode: 'fallback', remaining: 0 });
    expect(last.retryAfterMs).toBeGreaterThan(0);
  });

  it('gives up waiting for missing expected peers one staleness period after the first contact', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    const opts = { policies, clock, gossipIntervalMs: 10, expectedDelayMs: 10 };
    const fresh = new Engine({ ...opts, nodeId: 'fresh', expectedMembers: 4 });
    const peer = new Engine({ ...opts, nodeId: 'peer' });
    fresh.receiveGossip('peer', peer.buildGossip());
    expect(fresh.check('p', 'k').mode).toBe('fallback');
    for (let t = 0; t < 6; t++) {
      clock.advance(10);
      fresh.receiveGossip('peer', peer.buildGossip());
    }
    // staleAfter = 3g + 2d = 50 ms after the first contact
    expect(fresh.check('p', 'k').mode).toBe('global');
  });

  it('a sync answer counts as hearing the responder', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    const fresh = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'fresh', expectedMembers: 2 });
    const peer = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'peer' });
    expect(fresh.check('p', 'k').mode).toBe('fallback');
    const answer = peer.answerSync('fresh', fresh.buildSyncRequest());
    expect(answer).toBeInstanceOf(Uint8Array);
    expect(fresh.receiveSyncResponse('peer', answer as Uint8Array)).toEqual({ ok: true });
    expect(fresh.check('p', 'k').mode).toBe('global');
  });

  it('rejects a bad expectedMembers', () => {
    expect(
      () =>
        new Engine({
          gossipIntervalMs: 10,
          policies: [{ name: 'p', limit: 1, windowMs: 1000 }],
          expectedMembers: 0,
        }),
    ).toThrow(/expectedMembers/);
  });
});

describe('a peer claiming old send times', () => {
  it('cannot switch over-admission control off by stretching the unseen horizon', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    const self = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'self' });
    // a rogue clock 10 s behind: every message looks 10 s old when it arrives
    const rogueClock = { now: () => clock.now() - 10_000 };
    const rogue = new Engine({ gossipIntervalMs: 10, policies, clock: rogueClock, nodeId: 'rogue' });
    for (let i = 0; i < 40; i++) rogue.check('p', 'k');
    expect(self.receiveGossip('rogue', rogue.buildGossip())).toEqual({ ok: true });
    // its clock is 10 s off, past maxClockOffsetMs: it counts as stale, so we fall back to L/N
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (self.check('p', 'k').allowed) admitted++;
    const rules = new Set<string>();
    for (let i = 0; i < 5; i++) rules.add(self.check('p', 'k').rule);
    expect(rules).toEqual(new Set(['fallback-share']));
    expect(admitted).toBe(50);
    expect(self.peerViews()[0]).toMatchObject({ id: 'rogue', stale: true, skewed: true });
  });

  it('a rogue 900 ms behind (within maxClockOffsetMs) is placed by its offset: the control stays on', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    const self = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'self' });
    const rogueClock = { now: () => clock.now() - 900 };
    const rogue = new Engine({ gossipIntervalMs: 10, policies, clock: rogueClock, nodeId: 'rogue' });
    for (let i = 0; i < 40; i++) rogue.check('p', 'k');
    expect(self.receiveGossip('rogue', rogue.buildGossip())).toEqual({ ok: true });
    // its 40 are in our window, and it demands as much as we do: about half the headroom is ours
    expect(self.estimate('p', 'k')).toBe(40);
    let admitted = 0;
    for (let i = 0; i < 100; i++) if (self.check('p', 'k').allowed) admitted++;
    const rules = new Set<string>();
    for (let i = 0; i < 5; i++) rules.add(self.check('p', 'k').rule);
    expect(rules.has('headroom-share')).toBe(true);
    expect(admitted).toBeLessThan(60);
  });
});

describe('a departed peer leaves the table and its slot is reused clean', () => {
  it('after its counts left every window, a new peer takes its slot without inheriting its counts or demand', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
    const self = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'self', departAfterMs: 200 });
    const keep = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'keep' });
    const old = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'old' });
    for (let i = 0; i < 30; i++) old.check('p', 'k');
    self.receiveGossip('old', old.buildGossip());
    expect(self.estimate('p', 'k')).toBe(30);
    // keep talks, old is silent: it departs after 200 ms, is forgotten once W + 2 buckets have passed
    for (let t = 0; t < 1400; t += 10) {
      clock.advance(10);
      self.receiveGossip('keep', keep.buildGossip());
    }
    const s = self.stats();
    expect(s.peerTable).toBe(1);
    expect(s.peersForgotten).toBe(1);
    const fresh = new Engine({ gossipIntervalMs: 10, policies, clock, nodeId: 'fresh' });
    fresh.check('p', 'k');
    self.receiveGossip('fresh', fresh.buildGossip());
    expect(self.estimate('p', 'k')).toBe(1);
    expect(
      self
        .peerViews()
        .map((v) => v.id)
        .sort(),
    ).toEqual(['fresh', 'keep']);
  });
});
