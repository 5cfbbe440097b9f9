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

describe('a node that expects peers (restart): the start gate', () => {
  const policies = [{ name: 'p', limit: 100, windowMs: 1000 }];
  const opts = { policies, gossipIntervalMs: 10, expectedDelayMs: 10 };

  it('decides nothing until every member expected is heard and each has sent since our message reached it (D after)', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 4 });
    const peers = ['p1', 'p2', 'p3'].map(
      (id) => new Engine({ ...opts, clock, nodeId: id, expectedMembers: 4 }),
    );
    // a running mesh would keep nothing for a member it has not heard: nothing is admitted
    expect(spend(fresh, 'p', 'k', 10)).toBe(0);
    const first = fresh.check('p', 'k');
    expect(first).toMatchObject({ allowed: false, mode: 'fallback', rule: 'starting' });
    expect(first.retryAfterMs).toBe(20); // a round: g + D
    expect(fresh.explain('p', 'k').starting).toEqual({ heard: 1, expected: 4, waitingMs: 20 });
    expect(fresh.starting()).toBe(true);
    fresh.receiveGossip('p1', peers[0]!.buildGossip());
    expect(fresh.explain('p', 'k').starting).toMatchObject({ heard: 2, expected: 4 });
    fresh.receiveGossip('p2', peers[1]!.buildGossip());
    fresh.receiveGossip('p3', peers[2]!.buildGossip());
    // every member heard; none has heard us yet
    expect(fresh.check('p', 'k').rule).toBe('starting');
    const ours = fresh.buildGossip();
    for (const p of peers) p.receiveGossip('fresh', ours);
    // their answers, placed at their arrival less their delay (D at most), sent less than D after
    // ours: ours (D old at most when it arrives) may not have reached them
    clock.advance(19);
    for (const p of peers) fresh.receiveGossip(p.nodeId, p.buildGossip());
    expect(fresh.check('p', 'k').rule).toBe('starting');
    clock.advance(1);
    fresh.receiveGossip('p1', peers[0]!.buildGossip());
    fresh.receiveGossip('p2', peers[1]!.buildGossip());
    expect(fresh.check('p', 'k').rule).toBe('starting'); // p3's newest is still too early
    fresh.receiveGossip('p3', peers[2]!.buildGossip());
    const open = fresh.check('p', 'k');
    expect(open).toMatchObject({ allowed: true, mode: 'global' });
    expect(fresh.starting()).toBe(false);
    // open for good: a member going quiet later is staleness, not the start
    clock.advance(200);
    expect(fresh.check('p', 'k').rule).not.toBe('starting');
  });

  it('a message of ours built before the member was heard proves nothing (it may have gone before it listened)', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 2 });
    const peer = new Engine({ ...opts, clock, nodeId: 'peer' });
    fresh.buildGossip(); // lost: nobody heard yet
    clock.advance(50);
    fresh.receiveGossip('peer', peer.buildGossip()); // sent 50 ms after our first message
    expect(fresh.check('p', 'k').rule).toBe('starting');
    peer.receiveGossip('fresh', fresh.buildGossip());
    clock.advance(20);
    fresh.receiveGossip('peer', peer.buildGossip());
    expect(fresh.check('p', 'k')).toMatchObject({ allowed: true, mode: 'global' });
  });

  it('none heard: L/N (as a node cut off) once the mesh says it joined, or the join wait after its first message', () => {
    const clock = new ManualClock(1_700_000_000_000);
    // one DNS name in the bootstrap list: 1 + 1 expected until discovery resolves it to 4 others
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 2 });
    fresh.expectMembers(5);
    fresh.expectMembers(3); // never lowered
    expect(fresh.check('p', 'k').rule).toBe('starting');
    // hearing no member, the time after which it decides if nothing arrives: the mesh's join wait
    expect(fresh.check('p', 'k').retryAfterMs).toBe(20); // not told when it ends: a round (g + D)
    fresh.joinWaitEnds(clock.now() + 10_000);
    clock.advance(2_500);
    expect(fresh.check('p', 'k')).toMatchObject({ rule: 'starting', retryAfterMs: 7_500 });
    fresh.joined(); // the mesh's join rule: the first pod, or its join timeout
    expect(spend(fresh, 'p', 'k', 100)).toBe(20); // L/5
    expect(fresh.check('p', 'k')).toMatchObject({ allowed: false, mode: 'fallback', rule: 'fallback-share' });
    // without the mesh: joinTimeoutMs (default the staleness period, 50 ms here) after its first message
    const alone = new Engine({ ...opts, clock, nodeId: 'alone', expectedMembers: 4, joinTimeoutMs: 30 });
    clock.advance(100);
    expect(alone.check('p', 'k').rule).toBe('starting'); // no message yet: the wait has not begun
    alone.buildGossip();
    clock.advance(29);
    expect(alone.check('p', 'k').rule).toBe('starting');
    expect(alone.check('p', 'k').retryAfterMs).toBe(1);
    clock.advance(1);
    expect(spend(alone, 'p', 'k', 100)).toBe(25);
    // once the start is over it changes nothing
    const peers = ['p1', 'p2', 'p3', 'p4'].map(
      (id) => new Engine({ ...opts, clock, nodeId: id, expectedMembers: 5 }),
    );
    for (const p of peers) fresh.receiveGossip(p.nodeId, p.buildGossip());
    expect(fresh.stats().members).toBe(5);
    fresh.expectMembers(9);
    expect(fresh.check('p', 'k').mode).toBe('global');
  });

  it('alone by discovery (its name resolved to itself alone for a join wait, no peer ever heard): the whole of L; nothing once a peer was heard', () => {
    const clock = new ManualClock(1_700_000_000_000);
    // a single replica: its bootstrap name counted as one more member until then, L/2
    const solo = new Engine({ ...opts, clock, nodeId: 'solo', expectedMembers: 2 });
    solo.joined();
    expect(spend(solo, 'p', 'k', 100)).toBe(50);
    expect(solo.check('p', 'k')).toMatchObject({ allowed: false, mode: 'fallback', rule: 'fallback-share' });
    solo.alone();
    expect(solo.stats()).toMatchObject({ fallback: false, members: 1, starting: false });
    expect(spend(solo, 'p', 'k', 100)).toBe(50); // the rest of L = 100
    expect(solo.check('p', 'k')).toMatchObject({ allowed: false, mode: 'global', rule: 'global-limit' });
    // a peer heard first: alone changes nothing (it stays on its start-up rule)
    const other = new Engine({ ...opts, clock, nodeId: 'other', expectedMembers: 3 });
    const peer = new Engine({ ...opts, clock, nodeId: 'peer', expectedMembers: 3 });
    other.receiveGossip(peer.nodeId, peer.buildGossip());
    other.alone();
    expect(other.stats().members).toBe(3);
    expect(other.check('p', 'k').mode).not.toBe('global');
  });

  it('cut off at the start, counts it already holds still bound it by L: a restarted node that loaded a full window admits only what is left', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const busy = new Engine({ ...opts, clock, nodeId: 'busy' });
    expect(spend(busy, 'p', 'k', 90)).toBe(90);
    const fresh = new Engine({ ...opts, clock, nodeId: 'busy', expectedMembers: 4 });
    fresh.restoreSnapshot(busy.snapshot());
    fresh.joined();
    let last = fresh.check('p', 'k');
    let admitted = 0;
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

  it('stops waiting for missing expected members one staleness period after the first contact, once the members heard have heard it', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 4 });
    const peer = new Engine({ ...opts, clock, nodeId: 'peer' });
    fresh.receiveGossip('peer', peer.buildGossip());
    // staleAfter = 3g + 2d = 50 ms after the first contact; the peer has heard us from 20 ms on
    for (let t = 0; t < 5; t++) {
      clock.advance(10);
      peer.receiveGossip('fresh', fresh.buildGossip());
      fresh.receiveGossip('peer', peer.buildGossip());
      expect(fresh.check('p', 'k').rule).toBe('starting');
    }
    clock.advance(10);
    fresh.receiveGossip('peer', peer.buildGossip());
    expect(fresh.check('p', 'k')).toMatchObject({ allowed: true, mode: 'global' });
  });

  it('a member heard later must hear us too: its own first message is no proof', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 2 });
    const [a, b] = ['a', 'b'].map((id) => new Engine({ ...opts, clock, nodeId: id }));
    fresh.receiveGossip('a', a!.buildGossip());
    a!.receiveGossip('fresh', fresh.buildGossip());
    clock.advance(20);
    // b, heard only now (it never had a message of ours), and a, which has heard us
    fresh.receiveGossip('a', a!.buildGossip());
    fresh.receiveGossip('b', b!.buildGossip());
    expect(fresh.check('p', 'k').rule).toBe('starting');
    b!.receiveGossip('fresh', fresh.buildGossip());
    clock.advance(20);
    fresh.receiveGossip('b', b!.buildGossip());
    expect(fresh.check('p', 'k').mode).toBe('global');
  });

  it('a member that hears more members than we do keeps the gate shut (one we cannot hear yet has not heard us)', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 2, joinTimeoutMs: 10_000 });
    const [a, b] = ['a', 'b'].map((id) => new Engine({ ...opts, clock, nodeId: id }));
    a!.receiveGossip('b', b!.buildGossip());
    // a's answer names fresh; its gossip says it hears 3 members (b, fresh, itself), we hear 2
    fresh.receiveSyncResponse('a', a!.answerSync('fresh', fresh.buildSyncRequest()) as Uint8Array);
    fresh.receiveGossip('a', a!.buildGossip());
    expect(fresh.check('p', 'k').rule).toBe('starting');
    // past the late sync's hold for the members named: the count a reports still holds it
    for (let t = 0; t < 20; t++) {
      clock.advance(10);
      a!.receiveGossip('b', b!.buildGossip());
      a!.receiveGossip('fresh', fresh.buildGossip());
      fresh.receiveGossip('a', a!.buildGossip());
      expect(fresh.check('p', 'k').rule).toBe('starting');
    }
    // b heard, and it hears us
    fresh.receiveGossip('b', b!.buildGossip());
    b!.receiveGossip('fresh', fresh.buildGossip());
    clock.advance(20);
    a!.receiveGossip('b', b!.buildGossip());
    fresh.receiveGossip('a', a!.buildGossip());
    fresh.receiveGossip('b', b!.buildGossip());
    expect(fresh.check('p', 'k').mode).toBe('global');
  });

  it('a sync answer counts as hearing the responder, and names the asker it has heard', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 2 });
    const peer = new Engine({ ...opts, clock, nodeId: 'peer' });
    expect(fresh.explain('p', 'k').starting).toMatchObject({ heard: 1, expected: 2 });
    // the answerer counts the asker a member from its request on, and its answer names it
    const answer = peer.answerSync('fresh', fresh.buildSyncRequest());
    expect(answer).toBeInstanceOf(Uint8Array);
    expect(peer.peerViews().map((v) => [v.id, v.stale])).toEqual([['fresh', false]]);
    expect(fresh.receiveSyncResponse('peer', answer as Uint8Array)).toEqual({ ok: true });
    expect(fresh.check('p', 'k')).toMatchObject({ allowed: true, mode: 'global' });
    // a member's standing is left as it is by its request: only its gossip says how fresh it is
    clock.advance(100);
    expect(peer.peerViews()[0]!.stale).toBe(true);
    peer.answerSync('fresh', fresh.buildSyncRequest());
    expect(peer.peerViews()[0]!.stale).toBe(true);
  });

  it('an answer that does not name the asker proves nothing: the gate waits for gossip', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const fresh = new Engine({ ...opts, clock, nodeId: 'fresh', expectedMembers: 2 });
    const peer = new Engine({ ...opts, clock, nodeId: 'peer' });
    // answered for another id (an answerer that did not take the asker in): fresh is not named
    const answer = peer.answerSync('someone-else', fresh.buildSyncRequest());
    peer.peerDeparted('someone-else');
    expect(fresh.receiveSyncResponse('peer', answer as Uint8Array)).toEqual({ ok: true });
    // past the late sync's hold for the member the answer named; the peer's gossip alone is no proof
    for (let t = 0; t < 15; t++) {
      clock.advance(10);
      fresh.receiveGossip('peer', peer.buildGossip());
      expect(fresh.check('p', 'k').rule).toBe('starting');
    }
    peer.receiveGossip('fresh', fresh.buildGossip());
    clock.advance(20);
    fresh.receiveGossip('peer', peer.buildGossip());
    expect(fresh.check('p', 'k').mode).toBe('global');
  });

  it('an engine rebuilt in place (its peers hear the node already) decides at once', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const e = new Engine({ ...opts, clock, nodeId: 'n', expectedMembers: 4, rebuilt: true });
    expect(e.starting()).toBe(false);
    expect(e.check('p', 'k')).toMatchObject({ allowed: true, mode: 'fallback' });
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
