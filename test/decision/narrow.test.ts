import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';

const policies = [{ name: 'p', limit: 90, windowMs: 1_000 }];

/**
 * A live peer of a narrower view (its newest message names fewer members than we hear) may be
 * deciding on its start-up share, L/N of its own counts, whatever share of the headroom we leave
 * it: what that leaves it beyond its share is reserved off our allowance whole (Rule.narrowExcess).
 */
describe('narrow-view peers: their start-up share beyond their share of the headroom (issue 26)', () => {
  function mesh() {
    const clock = new ManualClock(1.7e12);
    const opts = { clock, policies, gossipIntervalMs: 100, expectedDelayMs: 10 };
    const me = new Engine({ ...opts, nodeId: 'me' });
    const busy = new Engine({ ...opts, nodeId: 'busy' });
    // fresh expects 3 members and heard none when its join wait ended (cut off: L/N of its own counts)
    const fresh = new Engine({ ...opts, nodeId: 'fresh', expectedMembers: 3 });
    fresh.joined();
    return { clock, me, busy, fresh };
  }

  it('a peer whose share of the headroom is smaller than its start-up share is reserved the rest', () => {
    const { clock, me, busy, fresh } = mesh();
    // busy hears everyone and is offered 80 of L = 90: its demand takes most of the headroom
    busy.receiveGossip('me', me.buildGossip());
    busy.receiveGossip('fresh', fresh.buildGossip());
    for (let i = 0; i < 80; i++) busy.check('p', 'k');
    clock.advance(100);
    me.receiveGossip('busy', busy.buildGossip());
    // fresh's first message names only itself: it may be on L/N = 30 of its own counts
    me.receiveGossip('fresh', fresh.buildGossip());
    const x = me.explain('p', 'k');
    const s = x.share!;
    expect(x.members?.live).toBe(2);
    // fresh's share of the headroom is small (busy's demand fills most of L): the rest of its 30 is reserved
    expect(x.reserves!.narrowView).toBeGreaterThan(15);
    expect(s.allowance).toBeCloseTo(s.share * s.headroom - x.reserves!.narrowView, 9);
    // once fresh names every member it decides on its share: nothing reserved
    fresh.receiveGossip('me', me.buildGossip());
    fresh.receiveGossip('busy', busy.buildGossip());
    clock.advance(100);
    me.receiveGossip('fresh', fresh.buildGossip());
    expect(me.explain('p', 'k').reserves!.narrowView).toBe(0);
  });

  it('a narrow peer whose share covers its start-up share, or that has spent it, is reserved nothing', () => {
    const { clock, me, busy, fresh } = mesh();
    // busy (here idle) hears everyone; fresh's first message names only itself
    busy.receiveGossip('me', me.buildGossip());
    busy.receiveGossip('fresh', fresh.buildGossip());
    me.receiveGossip('busy', busy.buildGossip());
    me.receiveGossip('fresh', fresh.buildGossip());
    // no demand anywhere: each of the 3 sharers holds a third of the room, 30 of 90 = L/N
    expect(me.explain('p', 'k').reserves!.narrowView).toBe(0);
    // fresh admits its 30 on its own view, then says so: seen, nothing left to reserve
    for (let i = 0; i < 40; i++) fresh.check('p', 'k');
    clock.advance(100);
    me.receiveGossip('fresh', fresh.buildGossip());
    expect(me.explain('p', 'k').reserves!.narrowView).toBe(0);
  });
});
