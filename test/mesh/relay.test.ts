import { publicKeyToProtobuf } from '@libp2p/crypto/keys';
import type { Message } from '@libp2p/gossipsub';
import { TopicValidatorResult } from '@libp2p/gossipsub';
import type { PrivateKey, Stream } from '@libp2p/interface';
import { multiaddr } from '@multiformats/multiaddr';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../src/decision/engine.js';
import { type DirectGossip, GOSSIP_PROTOCOL } from '../../src/mesh/direct-gossip.js';
import { writeVarint } from '../../src/mesh/frame-decoder.js';
import { generateIdentity } from '../../src/mesh/identity.js';
import { nativeSigner } from '../../src/mesh/native-ed25519.js';
import { createMeshNode, directGossipOf, type MeshNode } from '../../src/mesh/node.js';
import { parseOptions } from '../../src/mesh/options.js';
import { encodeBatch, FRAME_BATCH, pickWeighted, readBatch, writeSeq } from '../../src/mesh/relay-batch.js';
import { MAC_ENTRY_BYTES, macDigest, macList, RelayMacs } from '../../src/mesh/relay-mac.js';
import type { MeshLimiter } from '../../src/mesh/types.js';
import { Cluster, deciding, dialable, waitFor } from './helpers.js';

const POLICY = { name: 'api', limit: 1_000, windowMs: 10_000 };

describe('relay batch encoding', () => {
  it('round-trips items, defers what does not fit, and refuses malformed batches', () => {
    const items = [0, 1, 2].map((i) => ({
      key: new Uint8Array(i === 0 ? 0 : 36).fill(i),
      seq: 1_700_000_000_000_000 + i,
      sig: new Uint8Array(64).fill(9 - i),
      data: new Uint8Array(50 + i).fill(i + 1),
    }));
    const { frame, used } = encodeBatch(0, items, 10_000);
    expect(used).toBe(3);
    // frame: length varint, kind, topic index 0
    const lenBytes = frame[0]! >= 0x80 ? 2 : 1;
    expect(frame[lenBytes]).toBe(FRAME_BATCH);
    const body = frame.subarray(lenBytes);
    const got = readBatch(body, 2, 100);
    if (got instanceof Error) throw got;
    expect(got.map((g) => [g.key.byteLength, g.seq, g.sig[0], g.data.byteLength])).toEqual(
      items.map((it) => [it.key.byteLength, it.seq, it.sig[0], it.data.byteLength]),
    );
    // a cap that holds the first item and one more
    expect(encodeBatch(0, items, 300).used).toBe(2);
    // the first item goes out whatever the cap
    expect(encodeBatch(0, items, 10).used).toBe(1);
    expect(readBatch(body.subarray(0, body.byteLength - 1), 2, 100)).toBeInstanceOf(Error);
    expect(readBatch(body, 2, 2)).toBeInstanceOf(Error);
  });

  it('picks distinct peers, at most as many as there are (equal weights)', () => {
    const xs = [1, 2, 3, 4, 5];
    const even = () => 1;
    for (let i = 0; i < 20; i++) {
      const p = pickWeighted(xs, 2, even);
      expect(new Set(p).size).toBe(2);
    }
    expect(pickWeighted(xs, 9, even).sort()).toEqual(xs);
  });

  it('draws peers in proportion to their weights, distinct, all of them when asked for more', () => {
    // a seeded generator: the counts are exact for this seed
    let x = 12345;
    const rand = () => {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      return (x >>> 0) / 2 ** 32;
    };
    // one hub (weight 1/16) among leaves (1/4): with one draw, the hub 1 time in 1 + 4 * 4 = 17
    const xs = ['hub', 'a', 'b', 'c', 'd'];
    const w = (p: string) => (p === 'hub' ? 1 / 16 : 1 / 4);
    const n = 17_000;
    let hub = 0;
    for (let i = 0; i < n; i++) if (pickWeighted(xs, 1, w, rand)[0] === 'hub') hub++;
    expect(hub / n).toBeGreaterThan(0.8 / 17);
    expect(hub / n).toBeLessThan(1.2 / 17);
    for (let i = 0; i < 50; i++) expect(new Set(pickWeighted(xs, 3, w, rand)).size).toBe(3);
    expect(pickWeighted(xs, 9, w, rand).sort()).toEqual([...xs].sort());
    // weights that are no positive number count as the smallest given; all bad: uniform
    expect(pickWeighted(xs, 5, () => Number.NaN, rand)).toHaveLength(5);
    const bad = (p: string) => (p === 'a' ? 0 : 1);
    let a = 0;
    for (let i = 0; i < 5_000; i++) if (pickWeighted(xs, 1, bad, rand)[0] === 'a') a++;
    expect(a / 5_000).toBeGreaterThan(0.15);
    expect(a / 5_000).toBeLessThan(0.25);
  });

  it('validates relayFanout, dialPeers and relayMacPeers', () => {
    const base = { policies: [POLICY], listen: ['/ip4/127.0.0.1/tcp/0'] };
    expect(parseOptions(base).relayFanout).toBe(0);
    expect(parseOptions(base).dialPeers).toBe(0);
    expect(parseOptions({ ...base, relayFanout: 3 }).dialPeers).toBe(6);
    expect(parseOptions({ ...base, relayFanout: 4, dialPeers: 2 }).dialPeers).toBe(2);
    expect(() => parseOptions({ ...base, relayFanout: 1.5 })).toThrow(/relayFanout/);
    expect(() => parseOptions({ ...base, relayFanout: 17 })).toThrow(/relayFanout/);
    expect(() => parseOptions({ ...base, dialPeers: -1 })).toThrow(/dialPeers/);
    expect(parseOptions(base).relayMacPeers).toBe(64);
    expect(parseOptions({ ...base, relayFanout: 3, relayMacPeers: 0 }).relayMacPeers).toBe(0);
    expect(() => parseOptions({ ...base, relayMacPeers: 1025 })).toThrow(/relayMacPeers/);
    expect(() => parseOptions({ ...base, relayMacPeers: 2.5 })).toThrow(/relayMacPeers/);
  });
});

describe('relay mode (live, loopback)', () => {
  const cluster = new Cluster();
  afterAll(() => cluster.stopAll());

  it('5 nodes in a line, fanout 2: every engine learns every origin and its counts through relays', async () => {
    const engines: Engine[] = [];
    const heard: Array<Map<string, { direct: number; relayed: number }>> = [];
    const nodes: MeshLimiter[] = [];
    for (let i = 0; i < 5; i++) {
      const log = new Map<string, { direct: number; relayed: number }>();
      heard.push(log);
      const node = await cluster.add({
        policies: [POLICY],
        relayFanout: 2,
        // a line: each node dials only the one before it, so 0 and 4 hear each other only through three relays
        bootstrap: i === 0 ? [] : [dialable(nodes[i - 1]!)],
        dialPeers: 1,
        engineFactory: (init) => {
          const e = new Engine(init);
          if (!init.nodeId.startsWith('warm-')) {
            engines.push(e);
            const receive = e.receiveGossip.bind(e);
            e.receiveGossip = (from, bytes, now, relayed) => {
              const c = log.get(from) ?? { direct: 0, relayed: 0 };
              if (relayed === true) c.relayed++;
              else c.direct++;
              log.set(from, c);
              return receive(from, bytes, now, relayed);
            };
          }
          return e;
        },
      });
      nodes.push(node);
    }
    // every member known (and each link's state pull done) before anyone admits
    await waitFor('every node sees 4 live members', () =>
      nodes.every(
        (n) => n.peers().filter((p) => !p.stale).length === 4 && n.stats().sync.pullsOk >= 1 && deciding(n),
      ),
    );
    // node i admits 10 * (i + 1): 150 in all
    nodes.forEach((n, i) => {
      for (let j = 0; j < 10 * (i + 1); j++) expect(n.check('api', 'k').allowed).toBe(true);
    });
    await waitFor(
      'every node counts 150 on key k',
      () => engines.every((e) => Math.round(e.estimate('api', 'k')) === 150),
      20_000,
    );
    const ids = nodes.map((n) => n.peerId);
    for (let i = 0; i < 5; i++) {
      expect(
        nodes[i]!.peers()
          .map((p) => p.id)
          .sort(),
      ).toEqual(ids.filter((_, j) => j !== i).sort());
      // the line's ends and everything two hops away came only through relays
      for (let j = 0; j < 5; j++) {
        if (Math.abs(i - j) < 2) continue;
        const c = heard[i]!.get(ids[j]!);
        expect(c?.relayed ?? 0).toBeGreaterThan(0);
        expect(c?.direct ?? 0).toBe(0);
      }
      // neighbours: their own items came over the link (credited directly)
      for (const j of [i - 1, i + 1]) {
        if (j < 0 || j > 4) continue;
        expect(heard[i]!.get(ids[j]!)?.direct ?? 0).toBeGreaterThan(0);
      }
      const s = nodes[i]!.stats();
      expect(s.peers.connected).toBeLessThanOrEqual(2);
      expect(s.transport?.batchesOut).toBeGreaterThan(0);
      // a node with two links sends each batch to both; never more frames than ticks x fanout (+ hellos)
      expect(s.transport!.batchesOut).toBeLessThanOrEqual(2 * (s.gossip.ticks + s.gossip.earlyPublishes));
      if (i === 0 || i === 4) continue;
      // relayed items are checked: by the MAC their origin made for this node once it knew
      // this node, by the signature before that
      expect(s.transport!.macVerified).toBeGreaterThan(0);
      expect(s.transport!.dropped['bad-mac'] ?? 0).toBe(0);
      expect(s.transport!.dropped['bad-signature'] ?? 0).toBe(0);
    }
  }, 60_000);
});

describe('relay MACs across settings (live, loopback)', () => {
  const cluster = new Cluster();
  afterAll(() => cluster.stopAll());

  it("a line whose middle node makes and checks no MACs: it checks signatures and forwards the ends' MAC lists, which the ends check", async () => {
    const nodes: MeshLimiter[] = [];
    for (let i = 0; i < 3; i++) {
      nodes.push(
        await cluster.add({
          policies: [POLICY],
          relayFanout: 2,
          ...(i === 1 ? { relayMacPeers: 0 } : {}),
          bootstrap: i === 0 ? [] : [dialable(nodes[i - 1]!)],
          dialPeers: 1,
        }),
      );
    }
    await waitFor('every node sees 2 live members', () =>
      nodes.every((n) => n.peers().filter((p) => !p.stale).length === 2),
    );
    for (let j = 0; j < 10; j++) expect(nodes[0]!.check('api', 'k').allowed).toBe(true);
    // the ends know each other only through the middle; their MACs for each other pass it untouched
    await waitFor(
      'the far end checks MACs',
      () =>
        (nodes[2]!.stats().transport?.macVerified ?? 0) > 0 &&
        (nodes[0]!.stats().transport?.macVerified ?? 0) > 0,
      20_000,
    );
    const mid = nodes[1]!.stats().transport!;
    expect(mid.macVerified).toBe(0);
    expect(mid.macsOut).toBe(0);
    for (const n of nodes) {
      const t = n.stats().transport!;
      expect(t.dropped['bad-mac'] ?? 0).toBe(0);
      expect(t.dropped['bad-signature'] ?? 0).toBe(0);
    }
  }, 60_000);
});

describe('relay batches: bad input (live, loopback)', () => {
  const nodes: MeshNode[] = [];
  afterEach(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    nodes.length = 0;
  });

  /** A loopback node's options (broadcast; the relay nodes add relayFanout). */
  function nodeOptions(key: PrivateKey) {
    return {
      listen: ['/ip4/127.0.0.1/tcp/0'],
      privateKey: key,
      degree: { D: 3, Dlo: 2, Dhi: 4 },
      heartbeatMs: 700,
      maxRpcBytes: 64 * 1024,
      inboundConnectionThreshold: 100,
      maxConnections: 64,
      dialTimeoutMs: 5_000,
    };
  }

  async function node(key: PrivateKey): Promise<{ node: MeshNode; direct: DirectGossip; got: Message[] }> {
    const n = await createMeshNode({ ...nodeOptions(key), relayFanout: 2 });
    nodes.push(n);
    const direct = directGossipOf(n)!;
    const got: Message[] = [];
    direct.topicValidators.set('t', (_p, m) => {
      got.push(m);
      return TopicValidatorResult.Accept;
    });
    await n.start();
    direct.subscribe('t');
    return { node: n, direct, got };
  }

  const te = new TextEncoder();

  /** A bare libp2p node speaking the protocol by hand to `to`: its gossip stream, hello sent (topic 't'). */
  async function rawSender(to: MeshNode, sender: PrivateKey): Promise<Stream> {
    const raw = await createMeshNode(nodeOptions(sender));
    nodes.push(raw);
    await raw.start();
    const addr = to.getMultiaddrs().find((m) => m.toString().includes('127.0.0.1'))!;
    const conn = await raw.dial(multiaddr(addr.toString()));
    const stream: Stream = await conn.newStream(GOSSIP_PROTOCOL);
    // hello: kind 1, one topic, 't'
    const hello = new Uint8Array([1, 1, 1, 't'.charCodeAt(0)]);
    const frame = new Uint8Array(1 + hello.byteLength);
    frame.set(hello, writeVarint(frame, 0, hello.byteLength));
    stream.send(frame);
    return stream;
  }

  function seqOf(seq: number): Uint8Array {
    const s = new Uint8Array(8);
    writeSeq(s, 0, seq);
    return s;
  }

  /** `key`'s gossip signature over an item on topic 't'. */
  function signed(key: PrivateKey, seq: number, data: Uint8Array): Uint8Array {
    const bytes = Buffer.concat([
      te.encode('ratemesh-gossip/1:'),
      new Uint8Array([1]),
      te.encode('t'),
      seqOf(seq),
      data,
    ]);
    return nativeSigner(key)!.sign(new Uint8Array(bytes));
  }

  it('drops a relayed item with a bad signature or an unknown origin key (counted), credits the good ones, and after four bad signatures checks no more in the batch', async () => {
    const a = await node(generateIdentity());
    const origin = generateIdentity();
    const sender = generateIdentity();
    const stream = await rawSender(a.node, sender);
    const seq = Date.now() * 1000;
    const good = new Uint8Array([1, 2, 3]);
    const items = [
      // the sender's own item (credited to the link)
      { key: new Uint8Array(0), seq, sig: signed(sender, seq, good), data: good },
      // relayed, good signature
      {
        key: publicKeyToProtobuf(origin.publicKey),
        seq: seq + 1,
        sig: signed(origin, seq + 1, good),
        data: good,
      },
      // unknown origin: a key that is no libp2p key
      { key: new Uint8Array(36).fill(7), seq: seq + 3, sig: new Uint8Array(64), data: good },
      // relayed, bad signature (signed by the sender, claimed for another origin)
      {
        key: publicKeyToProtobuf(generateIdentity().publicKey),
        seq: seq + 2,
        sig: signed(sender, seq + 2, good),
        data: good,
      },
      // one bad signature does not stop the batch (an honest relay can forward one a MAC proved to it)
      {
        key: publicKeyToProtobuf(origin.publicKey),
        seq: seq + 4,
        sig: signed(origin, seq + 4, good),
        data: good,
      },
    ];
    stream.send(encodeBatch(0, items, 64 * 1024).frame);
    // the same batch again: every item a duplicate, no signature checked twice
    stream.send(encodeBatch(0, items, 64 * 1024).frame);
    await waitFor('two batches read', () => a.direct.stats.batchesIn >= 2, 10_000);
    expect(a.got.map((m) => (m.type === 'signed' ? m.from.toString() : ''))).toEqual([
      sender.publicKey.toString(),
      origin.publicKey.toString(),
      origin.publicKey.toString(),
    ]);
    // a bad item is not recorded: its copy in the second batch is checked (and dropped) again
    expect(a.direct.stats.dropped['bad-signature']).toBe(2);
    expect(a.direct.stats.dropped['bad-key']).toBe(2);
    expect(a.direct.stats.dropped.duplicate).toBe(3);
    expect(a.direct.stats.verified).toBe(4);
    expect(a.direct.stats.relayedIn).toBe(2);
    // a frame of bad signatures: after four, the rest of the batch gets no signature check
    const bad = [1, 2, 3, 4].map((i) => ({
      key: publicKeyToProtobuf(generateIdentity().publicKey),
      seq: seq + 10 + i,
      sig: signed(sender, seq + 10 + i, good),
      data: good,
    }));
    const after = {
      key: publicKeyToProtobuf(origin.publicKey),
      seq: seq + 5,
      sig: signed(origin, seq + 5, good),
      data: good,
    };
    stream.send(encodeBatch(0, [...bad, after], 64 * 1024).frame);
    await waitFor('three batches read', () => a.direct.stats.batchesIn >= 3, 10_000);
    expect(a.direct.stats.dropped['bad-signature']).toBe(6);
    expect(a.direct.stats.verified).toBe(8);
    expect(a.direct.stats.dropped.unchecked).toBe(1);
    expect(a.got).toHaveLength(3);
    await stream.close();
  }, 30_000);

  it('checks a relayed item by the MAC its origin made for this node (once the origin was proven) instead of the signature, by the signature when there is none, it does not match or the origin is new, and after four bad signatures reads only what a MAC proves', async () => {
    const aKey = generateIdentity();
    const a = await node(aKey);
    const stream = await rawSender(a.node, generateIdentity());
    // origin's MAC list for `members` over its item
    const macsOf = (
      origin: PrivateKey,
      members: PrivateKey[],
      seq: number,
      data: Uint8Array,
      sig: Uint8Array,
    ): Uint8Array => {
      const m = RelayMacs.of(origin)!;
      const d = macDigest(publicKeyToProtobuf(origin.publicKey), te.encode('t'), seqOf(seq), sig, data);
      return macList(
        members.map((k) => m.peer(k.publicKey)!),
        members.length,
        d,
      );
    };
    const ids = Array.from({ length: 10 }, () => generateIdentity());
    const [o1, o2, o3, o5, o6, o7, o8, b1, b2, b3] = ids as [
      PrivateKey,
      PrivateKey,
      PrivateKey,
      PrivateKey,
      PrivateKey,
      PrivateKey,
      PrivateKey,
      PrivateKey,
      PrivateKey,
      PrivateKey,
    ];
    const other = generateIdentity();
    const seq = Date.now() * 1000;
    const good = new Uint8Array([4, 5, 6]);
    const noSig = new Uint8Array(64);
    const item = (o: PrivateKey, s: number, sig: Uint8Array, macs: Uint8Array) => ({
      key: publicKeyToProtobuf(o.publicKey),
      seq: s,
      sig,
      data: good,
      macs,
    });
    /** An item signed by its origin with a MAC list for `members`. */
    const proven = (o: PrivateKey, s: number, members: PrivateKey[]) => {
      const sig = signed(o, s, good);
      return item(o, s, sig, macsOf(o, members, s, good, sig));
    };
    const spoilt = (macs: Uint8Array): Uint8Array => {
      macs[MAC_ENTRY_BYTES + 4]! ^= 1;
      return macs;
    };
    const from = () => a.got.map((m) => (m.type === 'signed' ? m.from.toString() : ''));
    // First batch: every origin proven by its signature (the MAC keys are made then), except a
    // fresh origin whose item has a good MAC for `a` but no signature: an unproven origin's key
    // is not made from its item, so the signature decides, and it is dropped
    stream.send(
      encodeBatch(
        0,
        [
          ...[o1, o2, o3, o5, o6, o7].map((o) => proven(o, seq + 1, [other, aKey])),
          item(o8, seq + 1, noSig, macsOf(o8, [aKey], seq + 1, good, noSig)),
        ],
        64 * 1024,
        true,
      ).frame,
    );
    await waitFor('a batch read', () => a.direct.stats.batchesIn >= 1, 10_000);
    expect(from()).toEqual([o1, o2, o3, o5, o6, o7].map((o) => o.publicKey.toString()));
    expect(a.direct.stats.verified).toBe(7);
    expect(a.direct.stats.macVerified).toBe(0);
    expect(a.direct.stats.dropped['bad-signature']).toBe(1);
    const s2 = seq + 10;
    const items = [
      // a MAC for `a` (among others) and a signature that is no signature: the MAC decides
      item(o1, s2, noSig, macsOf(o1, [other, aKey], s2, good, noSig)),
      // MACs for others only: the signature is checked
      proven(o2, s2, [other]),
      // a MAC for `a` altered on the way (a relay checks only its own): the signature decides
      (() => {
        const it = proven(o3, s2, [other, aKey]);
        spoilt(it.macs);
        return it;
      })(),
      // a good MAC over the origin's signature, the signature swapped on the way: the MAC
      // covers it, so the signature is checked, and fails
      { ...proven(o7, s2, [other, aKey]), sig: noSig },
      // three more bad signatures: four in this batch
      ...[b1, b2, b3].map((b) => item(b, s2, noSig, new Uint8Array(0))),
      // after four bad signatures no more signature checks in this batch: not credited
      item(o5, s2, signed(o5, s2, good), new Uint8Array(0)),
      // ... but an item a MAC proves still is
      item(o6, s2, noSig, macsOf(o6, [aKey], s2, good, noSig)),
    ];
    stream.send(encodeBatch(0, items, 64 * 1024, true).frame);
    await waitFor('two batches read', () => a.direct.stats.batchesIn >= 2, 10_000);
    expect(from().slice(6)).toEqual([o1, o2, o3, o6].map((o) => o.publicKey.toString()));
    expect(a.direct.stats.macVerified).toBe(4);
    expect(a.direct.stats.verified).toBe(7 + 6);
    expect(a.direct.stats.dropped['bad-mac']).toBe(2);
    expect(a.direct.stats.dropped['bad-signature']).toBe(1 + 4);
    expect(a.direct.stats.dropped.unchecked).toBe(1);
    expect(a.direct.stats.relayedIn).toBe(6 + 4);
    await stream.close();
  }, 30_000);
});
