import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';

const policies = [{ name: 'p', limit: 100, windowMs: 1_000 }];

/** Two engines gossiping in aligned rounds by hand: each sends at k·100 − 10, takes the other's at k·100. */
function pair(roundLeadMs: number | undefined) {
  const clock = new ManualClock(1.7e12);
  const opts = { clock, policies, gossipIntervalMs: 100, expectedDelayMs: 10, expectedMembers: 2 };
  const a = new Engine({ ...opts, nodeId: 'a', ...(roundLeadMs === undefined ? {} : { roundLeadMs }) });
  const b = new Engine({ ...opts, nodeId: 'b', ...(roundLeadMs === undefined ? {} : { roundLeadMs }) });
  /** To the next round: both send at its −10 ms, both take the other's at it. */
  const round = () => {
    clock.advance(90);
    const ma = a.buildGossip();
    const mb = b.buildGossip();
    clock.advance(10);
    b.receiveGossip('a', ma);
    a.receiveGossip('b', mb);
  };
  return { clock, a, b, round };
}

describe('aligned rounds: own counts recent from our message of the round before (Rule, ownFrom)', () => {
  /**
   * 6 admissions mid-round, our message of the next round, 4 admissions after it, the round's
   * messages taken in, 80 ms on, then the next round's messages taken in: own recent counts.
   */
  function ownRecentLateInRound(roundLeadMs: number | undefined): number[] {
    const { clock, a, b, round } = pair(roundLeadMs);
    round();
    round();
    clock.advance(30);
    for (let i = 0; i < 6; i++) expect(a.check('p', 'k').allowed).toBe(true);
    clock.advance(60); // k·100 − 10: both send
    const ma = a.buildGossip();
    const mb = b.buildGossip();
    clock.advance(5);
    for (let i = 0; i < 4; i++) expect(a.check('p', 'k').allowed).toBe(true);
    const before = a.explain('p', 'k').share!.ownRecent;
    clock.advance(5); // the round: each takes in the other's message
    b.receiveGossip('a', ma);
    a.receiveGossip('b', mb);
    const at = a.explain('p', 'k').share!.ownRecent;
    clock.advance(80);
    const late = a.explain('p', 'k').share!.ownRecent;
    round();
    return [before, at, late, a.explain('p', 'k').share!.ownRecent];
  }

  it('what our message of a round carried is old once the next round is in; until then all 10 are recent', () => {
    // the peer admitted between its message of the round and taking ours in without our 6: its
    // counts of then reach us with its next round's message, and until they do our 6 stay recent
    // (counted old at the round itself, an adversary bursting after the round's messages left
    // passed L by 25 % with buckets of 200-500 ms; test/sim/rounds-adversary.test.ts). The next
    // round in, the 6 are old and the 4 after our message recent.
    expect(ownRecentLateInRound(10)).toEqual([10, 10, 10, 4]);
  });

  it('without aligned rounds our counts stay recent back to the horizon bucket’s start (or two horizons)', () => {
    // late in the round the horizon has grown, and the 6 count again
    expect(ownRecentLateInRound(undefined).slice(0, 3)).toEqual([10, 4, 10]);
  });

  it('never publishes out of round', () => {
    const { a, b, round } = pair(10);
    round();
    for (let i = 0; i < 20; i++) a.check('p', 'k');
    expect(a.wantsEarlyPublish()).toBe(false);
    const spread = pair(undefined);
    spread.round();
    for (let i = 0; i < 20; i++) spread.a.check('p', 'k');
    expect(spread.a.wantsEarlyPublish()).toBe(true);
    expect(b.wantsEarlyPublish()).toBe(false);
  });

  it('a key a full message left out counts from the last message that carried it', () => {
    const clock = new ManualClock(1.7e12);
    const opts = {
      clock,
      policies,
      gossipIntervalMs: 100,
      expectedDelayMs: 10,
      expectedMembers: 2,
      roundLeadMs: 10,
    };
    const a = new Engine({ ...opts, nodeId: 'a', maxKeysPerMessage: 1 });
    const b = new Engine({ ...opts, nodeId: 'b' });
    const round = () => {
      clock.advance(90);
      const ma = a.buildGossip();
      const mb = b.buildGossip();
      clock.advance(10);
      b.receiveGossip('a', ma);
      a.receiveGossip('b', mb);
    };
    round();
    round();
    clock.advance(30);
    // two keys admitted before the round's message: it carries one of them
    for (let i = 0; i < 3; i++) a.check('p', 'x');
    for (let i = 0; i < 3; i++) a.check('p', 'y');
    round();
    // a round on (ours of the round before is the line): the key carried counts none recent; the
    // one left out all three (peers have not had them)
    round();
    const own = ['x', 'y'].map((k) => a.explain('p', k).share?.ownRecent);
    expect(own.sort()).toEqual([0, 3]);
  });
});

describe('aligned rounds: the mesh’s clock (Engine.roundOffsetMs)', () => {
  it('is the median over the members of their clock offsets, this node at 0', () => {
    const clock = new ManualClock(1.7e12);
    const e = new Engine({ nodeId: 'me', clock, policies, gossipIntervalMs: 100, expectedDelayMs: 10 });
    expect(e.roundOffsetMs()).toBe(0);
    // three peers whose clocks read 250 ms behind ours: the mesh's clock is theirs
    for (const id of ['p1', 'p2', 'p3']) {
      const pc = new ManualClock(1.7e12 - 250);
      const p = new Engine({ nodeId: id, clock: pc, policies, gossipIntervalMs: 100, expectedDelayMs: 10 });
      clock.advance(10);
      pc.advance(10);
      e.receiveGossip(id, p.buildGossip(), undefined, false);
    }
    expect(Math.round(e.roundOffsetMs())).toBe(-240);
  });
});
