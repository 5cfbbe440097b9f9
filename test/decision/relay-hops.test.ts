import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { decodeMessage, TYPE_GOSSIP } from '../../src/crdt/codec.js';
import { dataDelayMs, expectedRelayHops } from '../../src/decision/constants.js';
import { Engine, type EngineOptions } from '../../src/decision/engine.js';
import { ErrorCodes } from '../../src/errors.js';
import { expectCode, T0 } from './helpers.js';

const policies = [{ name: 'p', limit: 100, windowMs: 1000, buckets: 10 }];

function pair(opts: Partial<EngineOptions> = {}) {
  const clock = new ManualClock(T0);
  const self = new Engine({ policies, clock, nodeId: 'self', ...opts });
  const peer = new Engine({ policies, clock, nodeId: 'peer' });
  return { clock, self, peer };
}

describe('relayHops: data that arrives through relays', () => {
  it('defaults unchanged without relay: stale after 3g + 2d = 320 ms at g = 100, d = 10', () => {
    expect(new Engine({ policies }).staleAfterMs).toBe(320);
    expect(new Engine({ policies, relayHops: 0 }).staleAfterMs).toBe(320);
    expect(dataDelayMs(100, 10, 0)).toBe(10);
  });

  it('with hops, D = d + hops × (g/2 + d) and staleAfterMs defaults to 3g + d + D', () => {
    expect(dataDelayMs(100, 10, 7)).toBe(430);
    expect(new Engine({ policies, relayHops: 7 }).staleAfterMs).toBe(740);
    // an explicit staleAfterMs still wins
    expect(new Engine({ policies, relayHops: 7, staleAfterMs: 500 }).staleAfterMs).toBe(500);
  });

  it('expectedRelayHops grows as log_f(N) + ln(N)/f, and is 0 when nothing needs relaying', () => {
    expect(expectedRelayHops(2, 4)).toBe(0);
    expect(expectedRelayHops(5, 4)).toBe(0);
    expect(expectedRelayHops(8, 4)).toBe(3);
    expect(expectedRelayHops(64, 4)).toBe(5);
    expect(expectedRelayHops(1024, 4)).toBe(7);
    expect(expectedRelayHops(1024, 2)).toBeGreaterThan(expectedRelayHops(1024, 4));
    expect(expectedRelayHops(2 ** 40, 1)).toBe(64);
  });

  it('rejects a bad relayHops', () => {
    for (const relayHops of [-1, 1.5, 65, Number.NaN, '2' as unknown as number])
      expectCode(() => new Engine({ policies, relayHops }), ErrorCodes.CONFIG_INVALID);
  });

  it('a peer heard 300 ms late through relays turns stale when its data is staleAfterMs old, not later', () => {
    const { clock, self, peer } = pair({ relayHops: 7 });
    peer.check('p', 'k');
    const bytes = peer.buildGossip();
    clock.advance(300);
    expect(self.receiveGossip('peer', bytes, undefined, true)).toEqual({ ok: true });
    expect(self.peerViews()[0]).toMatchObject({ id: 'peer', stale: false, delayMs: 300 });
    // sent at T0: stale once T0 + 740 has passed
    clock.set(T0 + 739);
    expect(self.peerViews()[0]!.stale).toBe(false);
    clock.set(T0 + 741);
    expect(self.peerViews()[0]!.stale).toBe(true);
  });

  it('without hops the same peer stays live while its data is older than staleAfterMs (the one-hop assumption)', () => {
    const { clock, self, peer } = pair();
    const bytes = peer.buildGossip();
    clock.advance(300);
    self.receiveGossip('peer', bytes, undefined, true);
    // the measured delay counts for at most d = 10: live until T0 + 300 - 10 + 320
    clock.set(T0 + 600);
    expect(self.peerViews()[0]!.stale).toBe(false);
    clock.set(T0 + 611);
    expect(self.peerViews()[0]!.stale).toBe(true);
  });

  it('a relayed copy takes no clock-offset sample; a direct one that late does', () => {
    const relayed = pair();
    const direct = pair();
    for (const { clock, self, peer } of [relayed, direct]) {
      // three messages, each 300 ms in flight (3 samples make a gossip estimate trusted)
      for (let i = 0; i < 3; i++) {
        const bytes = peer.buildGossip();
        clock.advance(300);
        self.receiveGossip('peer', bytes, undefined, self === relayed.self);
      }
    }
    expect(relayed.self.peerViews()[0]!.clockOffsetMs).toBe(0);
    // its send time minus our receive time plus d: -290
    expect(direct.self.peerViews()[0]!.clockOffsetMs).toBe(-290);
  });
});

describe('relayHops: whole windows, no repair requests', () => {
  // A relay forwards each origin's newest message only: the messages between never arrive.
  function run(relayHops: number) {
    const clock = new ManualClock(T0);
    const a = new Engine({ policies, clock, nodeId: 'a', relayHops });
    const b = new Engine({ policies, clock, nodeId: 'b', relayHops });
    b.receiveGossip('a', a.buildGossip());
    a.receiveGossip('b', b.buildGossip());
    const sent: Uint8Array[] = [];
    for (let i = 0; i < 5; i++) {
      for (let j = 0; j < 3; j++) expect(a.check('p', 'k').allowed).toBe(true);
      sent.push(a.buildGossip());
      clock.advance(100);
    }
    // b hears only the last of the five, as after a relay that kept the newest
    b.receiveGossip('a', sent[4]!, undefined, true);
    const back = decodeMessage(b.buildGossip());
    if (!back.ok || back.message.type !== TYPE_GOSSIP) throw new Error('not gossip');
    return { view: b.estimate('p', 'k'), nacks: back.message.nacks.length };
  }

  it('with relay, the newest message alone carries every count, and a gap asks for nothing', () => {
    const r = run(3);
    expect(r.view).toBe(15);
    expect(r.nacks).toBe(0);
  });

  it('without relay, the same gap is repaired on request (deltas)', () => {
    const r = run(0);
    expect(r.view).toBeLessThan(15);
    expect(r.nacks).toBe(1);
  });
});
