import { createPublicKey } from 'node:crypto';
import { publicKeyFromRaw, publicKeyToProtobuf } from '@libp2p/crypto/keys';
import { describe, expect, it } from 'vitest';
import { generateIdentity } from '../../src/mesh/identity.js';
import { encodeBatch, FRAME_BATCH_MAC, readBatch, writeSeq } from '../../src/mesh/relay-batch.js';
import {
  checkMac,
  findMac,
  MAC_ENTRY_BYTES,
  macDigest,
  macList,
  RelayMacs,
  x25519FromEd25519Public,
  x25519FromEd25519Seed,
} from '../../src/mesh/relay-mac.js';

const te = new TextEncoder();
const topic = te.encode('t');

const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.from(a).equals(Buffer.from(b));

function seqBytes(seq: number): Uint8Array {
  const s = new Uint8Array(8);
  writeSeq(s, 0, seq);
  return s;
}

describe('relay MACs', () => {
  it('converts an Ed25519 identity to the X25519 key pair whose public half is the converted Ed25519 public key', () => {
    for (let i = 0; i < 8; i++) {
      const id = generateIdentity();
      const fromSeed = createPublicKey(x25519FromEd25519Seed(id.raw))
        .export({ format: 'der', type: 'spki' })
        .subarray(12);
      expect(Buffer.from(x25519FromEd25519Public(id.publicKey.raw)!).toString('hex')).toBe(
        Buffer.from(fromSeed).toString('hex'),
      );
    }
  });

  it('gives each pair one shared key, and a different one to every other pair', () => {
    const [a, b, c] = [generateIdentity(), generateIdentity(), generateIdentity()];
    const [ma, mb, mc] = [RelayMacs.of(a)!, RelayMacs.of(b)!, RelayMacs.of(c)!];
    const ab = ma.peer(b.publicKey)!;
    const ba = mb.peer(a.publicKey)!;
    expect(same(ab.key, ba.key)).toBe(true);
    expect(ab.tag).toBe(mb.tag);
    expect(ba.tag).toBe(ma.tag);
    const ac = ma.peer(c.publicKey)!;
    const bc = mb.peer(c.publicKey)!;
    expect(same(ac.key, ab.key)).toBe(false);
    expect(same(bc.key, ac.key)).toBe(false);
    expect(same(mc.peer(a.publicKey)!.key, ac.key)).toBe(true);
  });

  it('refuses public keys that give no usable secret: y = 1 (the identity) and a low-order point', () => {
    const m = RelayMacs.of(generateIdentity())!;
    const identity = new Uint8Array(32);
    identity[0] = 1;
    expect(x25519FromEd25519Public(identity)).toBeUndefined();
    expect(m.peer(publicKeyFromRaw(identity))).toBeUndefined();
    // y = 0: the point of order 4, u = 1 (a low-order X25519 point: the shared secret would be 0)
    expect(m.peer(publicKeyFromRaw(new Uint8Array(32)))).toBeUndefined();
    // not a field element (y >= p)
    expect(x25519FromEd25519Public(new Uint8Array(32).fill(0xff))).toBeUndefined();
  });

  it("checks a member's MAC, and refuses a changed message, sequence number, topic, origin, signature or MAC", () => {
    const [o, r, x] = [generateIdentity(), generateIdentity(), generateIdentity()];
    const mo = RelayMacs.of(o)!;
    const mr = RelayMacs.of(r)!;
    const oKey = publicKeyToProtobuf(o.publicKey);
    const data = new Uint8Array([1, 2, 3, 4]);
    const sig = new Uint8Array(64).fill(3);
    const d = macDigest(oKey, topic, seqBytes(7), sig, data);
    const list = macList([mo.peer(x.publicKey)!, mo.peer(r.publicKey)!], 2, d);
    expect(list.byteLength).toBe(2 * MAC_ENTRY_BYTES);
    const at = findMac(list, mr.tag);
    expect(at).toBe(MAC_ENTRY_BYTES + 4);
    const k = mr.peer(o.publicKey)!.key;
    expect(checkMac(list, at, k, d)).toBe(true);
    expect(
      checkMac(list, at, k, macDigest(oKey, topic, seqBytes(7), sig, new Uint8Array([1, 2, 3, 5]))),
    ).toBe(false);
    expect(checkMac(list, at, k, macDigest(oKey, topic, seqBytes(8), sig, data))).toBe(false);
    expect(checkMac(list, at, k, macDigest(oKey, te.encode('u'), seqBytes(7), sig, data))).toBe(false);
    // the same item claimed for another origin: the origin key is inside the digest
    expect(
      checkMac(list, at, k, macDigest(publicKeyToProtobuf(x.publicKey), topic, seqBytes(7), sig, data)),
    ).toBe(false);
    // the signature is inside too: a relay cannot swap it for a bad one
    expect(checkMac(list, at, k, macDigest(oKey, topic, seqBytes(7), new Uint8Array(64), data))).toBe(false);
    // another member's key does not check it
    expect(checkMac(list, at, mr.peer(x.publicKey)!.key, d)).toBe(false);
    const bad = list.slice();
    bad[at + 7]! ^= 1;
    expect(checkMac(bad, at, k, d)).toBe(false);
    expect(findMac(list, (mr.tag + 1) >>> 0)).toBe(-1);
  });

  it('carries MAC lists in kind 7 batches and refuses malformed ones', () => {
    const macs = new Uint8Array(3 * MAC_ENTRY_BYTES).fill(5);
    const items = [0, 1].map((i) => ({
      key: new Uint8Array(i === 0 ? 0 : 36).fill(i),
      seq: 1_700_000_000_000_000 + i,
      sig: new Uint8Array(64).fill(9 - i),
      data: new Uint8Array(50 + i).fill(i + 1),
      macs: i === 0 ? macs : new Uint8Array(0),
    }));
    const { frame, used } = encodeBatch(0, items, 10_000, true);
    expect(used).toBe(2);
    const lenBytes = frame[0]! >= 0x80 ? 2 : 1;
    expect(frame[lenBytes]).toBe(FRAME_BATCH_MAC);
    const body = frame.subarray(lenBytes);
    const got = readBatch(body, 2, 100, true);
    if (got instanceof Error) throw got;
    expect(got.map((g) => [g.key.byteLength, g.seq, g.data.byteLength, g.macs.byteLength])).toEqual([
      [0, items[0]!.seq, 50, 36],
      [36, items[1]!.seq, 51, 0],
    ]);
    expect(Buffer.from(got[0]!.macs).equals(Buffer.from(macs))).toBe(true);
    // read as kind 6 (no MAC lists) it does not parse; truncated lists are refused
    expect(readBatch(body, 2, 100, false)).toBeInstanceOf(Error);
    expect(readBatch(body.subarray(0, body.byteLength - 1), 2, 100, true)).toBeInstanceOf(Error);
    // the same items without MACs: kind 6, smaller by the lists and their counts
    const plain = encodeBatch(0, items, 10_000, false).frame;
    expect(frame.byteLength - plain.byteLength).toBe(36 + 2);
    // a count past the wire's limit
    const huge = new Uint8Array([0, 1, 0, ...new Uint8Array(8), ...new Uint8Array(64), 0, 0x81, 0x10]);
    expect(readBatch(huge, 1, 100, true)).toBeInstanceOf(Error);
  });
});
