import type { Message } from '@libp2p/gossipsub';
import type { PeerId } from '@libp2p/interface';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import type { MeshEngine } from '../../src/mesh/engine-port.js';
import { GossipIn, type GossipInHost } from '../../src/mesh/gossip-in.js';
import type { MeshConfig } from '../../src/mesh/options.js';

/** A peer id as gossip-in uses it: a string form and equality. */
function peer(id: string): PeerId {
  return { toString: () => id, equals: (o: PeerId) => o.toString() === id } as unknown as PeerId;
}

/** A GossipIn on a manual clock whose engine records when (and how long held) each message reached it. */
function setup(lead: number | undefined, offset = 0) {
  const clock = new ManualClock(1.7e12);
  const got: { from: string; at: number; heldMs: number }[] = [];
  const engine = {
    receiveGossip: (from: string, _b: Uint8Array, now?: number, _r?: boolean, heldMs = 0) => {
      got.push({ from, at: (now ?? clock.now()) - 1.7e12, heldMs });
      return { ok: true };
    },
    roundOffsetMs: () => offset,
    memberCount: () => 3,
    gossipReach: () => 3,
  } as unknown as MeshEngine;
  const host: GossipInHost = {
    cfg: {
      clock,
      gossipIntervalMs: 100,
      injectSeed: 1,
      injectLoss: 0,
      injectDelayMs: 0,
      maxMessageBytes: 1 << 20,
      relay: 'auto',
    } as unknown as MeshConfig,
    engine,
    links: { heard: () => {} } as unknown as GossipInHost['links'],
    peerId: 'me',
    topic: 't',
    timers: new Set(),
    counters: {
      gossip: { msgsIn: 0, bytesIn: 0, relayedIn: 0, dropped: {}, relayed: 0, notRelayed: 0 },
      dropped: {},
      injected: { dropped: 0, delayed: 0 },
    } as unknown as GossipInHost['counters'],
    running: () => true,
    relayFanout: () => 0,
    isolated: () => false,
    roundLeadMs: () => lead,
  };
  const g = new GossipIn(host);
  const send = (from: string) =>
    g.validate(peer(from), {
      type: 'signed',
      topic: 't',
      from: peer(from),
      data: new Uint8Array([1]),
    } as unknown as Message);
  /** Move the clock and the timers together. */
  const advance = (ms: number) => {
    clock.advance(ms);
    vi.advanceTimersByTime(ms);
  };
  return { got, send, advance };
}

describe('aligned rounds: a message is handed to the engine at its round (GossipIn hold)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('within the lead before k·g it waits for k·g; the round’s messages go in together, in order', () => {
    vi.useFakeTimers();
    const { got, send, advance } = setup(10);
    advance(93);
    send('a');
    advance(4);
    send('b');
    expect(got).toEqual([]);
    advance(3);
    expect(got).toEqual([
      { from: 'a', at: 100, heldMs: 7 },
      { from: 'b', at: 100, heldMs: 3 },
    ]);
  });

  it('a late message, one out of round and every one without aligned rounds go in at once', () => {
    vi.useFakeTimers();
    const aligned = setup(10);
    aligned.advance(105);
    aligned.send('late');
    aligned.advance(30);
    aligned.send('mid');
    expect(aligned.got.map((m) => [m.from, m.at, m.heldMs])).toEqual([
      ['late', 105, 0],
      ['mid', 135, 0],
    ]);
    const spread = setup(undefined);
    spread.advance(95);
    spread.send('x');
    expect(spread.got.map((m) => [m.from, m.at])).toEqual([['x', 95]]);
  });

  it('rounds on the mesh’s clock: a node 250 ms ahead of its peers holds until their round', () => {
    vi.useFakeTimers();
    // our clock reads 250 ms more than the mesh's: at our 45 the mesh reads −205, i.e. 95 into a round
    const { got, send, advance } = setup(10, -250);
    advance(45);
    send('a');
    expect(got).toEqual([]);
    advance(5);
    expect(got).toEqual([{ from: 'a', at: 50, heldMs: 5 }]);
  });
});
