import { generateKeyPair, publicKeyToProtobuf } from '@libp2p/crypto/keys';
import type { Message, TopicValidatorFn } from '@libp2p/gossipsub';
import { TopicValidatorResult } from '@libp2p/gossipsub';
import type { PrivateKey, Stream } from '@libp2p/interface';
import { multiaddr } from '@multiformats/multiaddr';
import { afterEach, describe, expect, it } from 'vitest';
import { type DirectGossip, GOSSIP_PROTOCOL } from '../../src/mesh/direct-gossip.js';
import { FrameDecoder, writeVarint } from '../../src/mesh/frame-decoder.js';
import { linkTuningStats } from '../../src/mesh/link-tuning.js';
import { createMeshNode, directGossipOf, type GossipTransport, type MeshNode } from '../../src/mesh/node.js';
import { SeqWindow } from '../../src/mesh/seq-window.js';
import { waitFor } from './helpers.js';

const TOPIC = 'ratemesh/test';

/** A length-prefixed frame around `body`. */
function frame(body: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + body.byteLength);
  const off = writeVarint(out, 0, body.byteLength);
  out.set(body, off);
  return out.subarray(0, off + body.byteLength);
}

const concat = (...parts: Uint8Array[]): Uint8Array => new Uint8Array(Buffer.concat(parts));

describe('FrameDecoder', () => {
  it('yields whole frames however the bytes are cut, and buffers only a split frame', () => {
    const frames = [new Uint8Array([1, 2, 3]), new Uint8Array(300).fill(7), new Uint8Array([9])];
    const wire = concat(...frames.map(frame));
    for (let cut = 0; cut <= wire.byteLength; cut++) {
      const d = new FrameDecoder(1024);
      const got: number[][] = [];
      for (const part of [wire.subarray(0, cut), wire.subarray(cut)]) {
        const r = d.push(part);
        if (r instanceof Error) throw r;
        for (const f of r) got.push([...f]);
      }
      expect(got).toEqual(frames.map((f) => [...f]));
      expect(d.buffered).toBe(0);
    }
  });

  it('refuses a frame over the cap and a runaway length', () => {
    expect(new FrameDecoder(10).push(frame(new Uint8Array(11)))).toBeInstanceOf(Error);
    expect(new FrameDecoder(10).push(new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff]))).toBeInstanceOf(Error);
  });
});

describe('SeqWindow', () => {
  it('accepts each number once, in any order within 32, and starts over after a restart', () => {
    const w = new SeqWindow();
    const base = 1_700_000_000_000_000;
    expect(w.accept(base + 5, 0)).toBe(true);
    expect(w.accept(base + 5, 0)).toBe(false);
    expect(w.accept(base + 3, 0)).toBe(true); // late relayed copy of an older message
    expect(w.seen(base + 3)).toBe(true);
    expect(w.seen(base + 4)).toBe(false);
    expect(w.accept(base + 40, 0)).toBe(true);
    expect(w.accept(base + 5, 0)).toBe(false); // too old to tell: counted as seen
    expect(w.accept(base + 9, 0)).toBe(true); // within 31 of 40
    // the origin restarted with its clock behind: a gap no run can make
    expect(w.accept(base - 5_000_000, 0)).toBe(true);
    expect(w.accept(base - 5_000_000, 0)).toBe(false);
    expect(w.accept(base - 4_999_999, 0)).toBe(true);
  });
});

interface Peer {
  node: MeshNode;
  key: PrivateKey;
  direct: DirectGossip;
  got: Message[];
  id: string;
}

describe('direct gossip transport (live, loopback)', () => {
  const nodes: MeshNode[] = [];
  afterEach(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    nodes.length = 0;
  });

  async function peer(
    opts: { relay?: boolean; transport?: GossipTransport } = {},
  ): Promise<Peer & { node: MeshNode }> {
    const key = await generateKeyPair('Ed25519');
    const node = await createMeshNode({
      listen: ['/ip4/127.0.0.1/tcp/0'],
      privateKey: key,
      degree: { D: 3, Dlo: 2, Dhi: 4 },
      heartbeatMs: 200,
      maxRpcBytes: 64 * 1024,
      inboundConnectionThreshold: 100,
      maxConnections: 16,
      dialTimeoutMs: 2_000,
      transport: opts.transport ?? 'direct',
    });
    nodes.push(node);
    const got: Message[] = [];
    const validate: TopicValidatorFn = (_peer, msg) => {
      got.push({ ...msg, data: msg.data.slice() });
      return opts.relay === true ? TopicValidatorResult.Accept : TopicValidatorResult.Ignore;
    };
    node.services.pubsub.topicValidators.set(TOPIC, validate);
    await node.start();
    node.services.pubsub.subscribe(TOPIC);
    const direct = directGossipOf(node);
    return { node, key, direct: direct as DirectGossip, got, id: node.peerId.toString() };
  }

  const addr = (p: Peer) => p.node.getMultiaddrs()[0]!;
  const from = (p: Peer, origin: Peer) =>
    p.got.filter((m) => m.type === 'signed' && m.from.toString() === origin.id);

  it('delivers each message once over the direct stream, credited to the authenticated peer, unsigned', async () => {
    const a = await peer();
    const b = await peer();
    await a.node.dial(addr(b));
    await waitFor('a reaches b directly', () => a.direct.directPeers(TOPIC).length === 1);
    const before = a.direct.stats.fallbackPublishes;
    for (let i = 0; i < 5; i++) await a.node.services.pubsub.publish(TOPIC, new Uint8Array([i]));
    await waitFor('b got five', () => from(b, a).length >= 5);
    const msgs = from(b, a);
    expect(msgs.map((m) => m.data[0])).toEqual([0, 1, 2, 3, 4]);
    for (const m of msgs) if (m.type === 'signed') expect(m.signature.byteLength).toBe(0);
    expect(a.direct.stats.fallbackPublishes).toBe(before);
    expect(a.direct.stats.signedOut).toBe(0);
    // the transport's fixes applied to these connections, and found the shapes they expect
    expect(linkTuningStats.noiseTuned).toBeGreaterThan(0);
    expect(linkTuningStats.windowTuned).toBeGreaterThan(0);
    expect(linkTuningStats.noiseSkipped).toBe(0);
    expect(linkTuningStats.windowSkipped).toBe(0);
  });

  it('relays through a middle node with the origin signature, after asking the origin to sign (A - S - B)', async () => {
    const a = await peer();
    const s = await peer({ relay: true });
    const b = await peer();
    await a.node.dial(addr(s));
    await b.node.dial(addr(s));
    await waitFor('s reaches a and b', () => s.direct.directPeers(TOPIC).length === 2);
    await waitFor('a reaches s', () => a.direct.directPeers(TOPIC).length === 1);
    let i = 0;
    await waitFor('b hears a through s', () => {
      void a.node.services.pubsub.publish(TOPIC, new Uint8Array([i++ & 0xff]));
      return from(b, a).length >= 3;
    });
    expect(s.direct.stats.signatureRequests).toBeGreaterThanOrEqual(1);
    expect(a.direct.stats.signedOut).toBeGreaterThan(0);
    expect(b.direct.stats.relayedIn).toBeGreaterThanOrEqual(3);
    for (const m of from(b, a)) if (m.type === 'signed') expect(m.signature.byteLength).toBe(64);
    expect(b.node.getConnections(a.node.peerId)).toEqual([]);
  });

  it('never credits a frame to anyone but the authenticated peer or a verified signer', async () => {
    const victim = await peer();
    const b = await peer();
    const forger = await peer();
    await forger.node.dial(addr(b));
    await waitFor('b knows the forger', () => b.node.getConnections(forger.node.peerId).length > 0);
    // a raw stream from the forger, speaking the protocol by hand
    const stream: Stream = await forger.node.dialProtocol(b.node.peerId, GOSSIP_PROTOCOL);
    const topic = new TextEncoder().encode(TOPIC);
    stream.send(frame(concat(new Uint8Array([1, 1, topic.byteLength]), topic)));
    const seq = new Uint8Array(8);
    seq[7] = 1;
    // an own frame (kind 2) is the forger's, whatever it carries
    stream.send(frame(concat(new Uint8Array([2, 0]), seq, new Uint8Array([42]))));
    // a relayed frame (kind 3) in the victim's name with a bad signature is dropped
    const vkey = publicKeyToProtobuf(victim.key.publicKey);
    seq[7] = 2;
    stream.send(
      frame(
        concat(
          new Uint8Array([3, 0]),
          seq,
          new Uint8Array(64).fill(1),
          new Uint8Array([vkey.byteLength]),
          vkey,
          new Uint8Array([43]),
        ),
      ),
    );
    // and so is one signed by the forger for the victim's key
    seq[7] = 3;
    const forged = await forger.key.sign(new Uint8Array([43]));
    stream.send(
      frame(
        concat(
          new Uint8Array([3, 0]),
          seq,
          forged,
          new Uint8Array([vkey.byteLength]),
          vkey,
          new Uint8Array([44]),
        ),
      ),
    );
    await waitFor('b counted two bad signatures', () => (b.direct.stats.dropped['bad-signature'] ?? 0) >= 2);
    expect(from(b, forger).map((m) => m.data[0])).toEqual([42]);
    expect(from(b, victim)).toEqual([]);
  });

  it('closes a stream whose frame is over the cap', async () => {
    const a = await peer();
    const b = await peer();
    await a.node.dial(addr(b));
    const stream: Stream = await a.node.dialProtocol(b.node.peerId, GOSSIP_PROTOCOL);
    stream.send(frame(new Uint8Array(64 * 1024 + 1)));
    await waitFor('b dropped it', () => (b.direct.stats.dropped['bad-frame'] ?? 0) >= 1);
    await waitFor('the stream is closed', () => stream.status !== 'open');
  });

  it('reaches a gossipsub-only node (an older version) through gossipsub, both ways', async () => {
    const fresh = await peer();
    const old = await peer({ transport: 'gossipsub' });
    expect(directGossipOf(old.node)).toBeUndefined();
    await fresh.node.dial(multiaddr(addr(old).toString()));
    await waitFor('both see the other subscribed', () => {
      return (
        fresh.node.services.pubsub.getSubscribers(TOPIC).length === 1 &&
        old.node.services.pubsub.getSubscribers(TOPIC).length === 1
      );
    });
    let i = 0;
    await waitFor('each hears the other', () => {
      void fresh.node.services.pubsub.publish(TOPIC, new Uint8Array([i & 0xff]));
      void old.node.services.pubsub.publish(TOPIC, new Uint8Array([i++ & 0xff]));
      return from(old, fresh).length > 0 && from(fresh, old).length > 0;
    });
    expect(fresh.direct.stats.fallbackPublishes).toBeGreaterThan(0);
    expect(fresh.direct.stats.framesOut).toBe(0);
  });
});
