import * as nodeCrypto from 'node:crypto';
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  type KeyObject,
} from 'node:crypto';
import type { PrivateKey, PublicKey } from '@libp2p/interface';
import { varintLength, writeVarint } from './frame-decoder.js';

/**
 * Origin proof for relayed gossip without a signature check per message
 * (docs/gossip-transport.md, "MACs for relayed items").
 *
 * In relay mode every node checks every other origin's message about once a
 * tick; an Ed25519 verify is ~75-110 µs here, a third of a node's CPU at 16
 * to 32 nodes. Each pair of members shares a key instead: X25519 on their
 * identity keys (the Ed25519 keys converted to Montgomery form, as libsodium's
 * crypto_sign_ed25519_pk_to_curve25519 does), through HKDF. An origin appends
 * to its own item, once per tick, one 8-byte MAC per member it knows, each
 * under the key it shares with that member and tagged by the member's key;
 * relays forward the list untouched. A receiver that finds its tag checks
 * that MAC (~2.5 µs) instead of the signature; one that does not (a member the
 * origin has not heard yet) checks the signature as before. Only the origin
 * and the receiver hold their key: a relay can neither forge nor alter an
 * item it forwards, so counts are still credited only to the identity that
 * proved them (DESIGN §5).
 */

/** Bytes of one MAC list entry: the receiver's tag (u32 big-endian) and its MAC. */
export const MAC_ENTRY_BYTES = 12;

/** Members whose MAC keys an origin puts in its items (more are checked by signature). */
export const DEFAULT_RELAY_MAC_PEERS = 64;
/** Bytes of a MAC (SHA-256 truncated: a forgery succeeds with probability 2^-64 per try). */
export const MAC_BYTES = 8;
/** Most entries a list may hold on the wire. */
export const MAX_MAC_ENTRIES = 1_024;

const MAC_DOMAIN = new TextEncoder().encode('ratemesh-relay-mac/1:');
const TAG_DOMAIN = new TextEncoder().encode('ratemesh-relay-mac-tag/1:');
const HKDF_SALT = new TextEncoder().encode('ratemesh-relay-mac/1');
const X25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');
const X25519_SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');
const P = 2n ** 255n - 19n;

function modPow(b: bigint, e: bigint, m: bigint): bigint {
  let r = 1n;
  let x = b % m;
  while (e > 0n) {
    if (e & 1n) r = (r * x) % m;
    x = (x * x) % m;
    e >>= 1n;
  }
  return r;
}

/**
 * The X25519 public key (Montgomery u) of a raw 32-byte Ed25519 public key:
 * u = (1 + y) / (1 - y) mod p. Undefined for an encoding that is no field
 * element or names y = 1 (the identity).
 */
export function x25519FromEd25519Public(raw: Uint8Array): Uint8Array | undefined {
  if (raw.byteLength !== 32) return undefined;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? raw[i]! & 0x7f : raw[i]!);
  if (y >= P) return undefined;
  const den = (1n - y + P) % P;
  if (den === 0n) return undefined;
  let u = ((1n + y) * modPow(den, P - 2n, P)) % P;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) {
    out[i] = Number(u & 0xffn);
    u >>= 8n;
  }
  return out;
}

/** The X25519 private key of an Ed25519 seed: the clamped half of SHA-512(seed) that Ed25519 signs with. */
export function x25519FromEd25519Seed(seed: Uint8Array): KeyObject {
  const h = createHash('sha512').update(seed.subarray(0, 32)).digest().subarray(0, 32);
  return createPrivateKey({ key: Buffer.concat([X25519_PKCS8_PREFIX, h]), format: 'der', type: 'pkcs8' });
}

/** A member's tag in MAC lists: 4 bytes of a hash of its Ed25519 public key. */
export function macTag(ed25519Public: Uint8Array): number {
  return createHash('sha256').update(TAG_DOMAIN).update(ed25519Public).digest().readUInt32BE(0);
}

/** One-shot SHA-256: node:crypto's `hash` where there is one (Node >= 20.12), else a Hash object. */
const sha256: (b: Uint8Array) => Buffer =
  typeof (nodeCrypto as { hash?: unknown }).hash === 'function'
    ? (b) =>
        (nodeCrypto as unknown as { hash(a: string, d: Uint8Array, e: 'buffer'): Buffer }).hash(
          'sha256',
          b,
          'buffer',
        )
    : (b) => createHash('sha256').update(b).digest();

/**
 * What a MAC covers, hashed once: domain, origin key (protobuf), topic,
 * sequence number, the origin's signature, message. The signature is in it so
 * that a relay cannot swap it for a bad one that the members who check MACs
 * would forward to those who check signatures.
 */
export function macDigest(
  originKey: Uint8Array,
  topic: Uint8Array,
  seq: Uint8Array,
  sig: Uint8Array,
  data: Uint8Array,
): Buffer {
  const n =
    MAC_DOMAIN.byteLength +
    varintLength(originKey.byteLength) +
    originKey.byteLength +
    varintLength(topic.byteLength) +
    topic.byteLength +
    seq.byteLength +
    varintLength(sig.byteLength) +
    sig.byteLength +
    data.byteLength;
  const b = n <= scratch.byteLength ? scratch : Buffer.allocUnsafe(n);
  b.set(MAC_DOMAIN, 0);
  let off = writeVarint(b, MAC_DOMAIN.byteLength, originKey.byteLength);
  b.set(originKey, off);
  off = writeVarint(b, off + originKey.byteLength, topic.byteLength);
  b.set(topic, off);
  off += topic.byteLength;
  b.set(seq, off);
  off = writeVarint(b, off + seq.byteLength, sig.byteLength);
  b.set(sig, off);
  b.set(data, off + sig.byteLength);
  return sha256(b.subarray(0, n));
}

const scratch = Buffer.allocUnsafe(4_096);
const keyed = Buffer.allocUnsafe(64);

/**
 * One member's MAC of a digest: SHA-256(key || digest), 8 bytes. Every input
 * is the same 64 bytes (a 32-byte key, a 32-byte digest), so no length
 * extension applies; one SHA-256 call is 2.5 times cheaper here than an HMAC.
 */
export function macOf(key: Uint8Array, digest: Uint8Array): Buffer {
  keyed.set(key, 0);
  keyed.set(digest.subarray(0, 32), 32);
  return sha256(keyed).subarray(0, MAC_BYTES);
}

/** A member this node shares a MAC key with. */
export interface MacPeer {
  tag: number;
  /** 32 bytes. */
  key: Uint8Array;
}

/** This node's side of the pairwise MAC keys: its tag, and the key it shares with each member. */
export class RelayMacs {
  readonly tag: number;
  private readonly priv: KeyObject;

  private constructor(priv: KeyObject, tag: number) {
    this.priv = priv;
    this.tag = tag;
  }

  /** For an Ed25519 identity; undefined for other key types (their items carry signatures only). */
  static of(key: PrivateKey): RelayMacs | undefined {
    if (key.type !== 'Ed25519') return undefined;
    return new RelayMacs(x25519FromEd25519Seed(key.raw), macTag(key.publicKey.raw));
  }

  /**
   * The key shared with `peer` (X25519, then HKDF-SHA256); undefined for a
   * key that is not Ed25519 or whose point gives no usable secret (a
   * low-order point: OpenSSL refuses the all-zero result).
   */
  peer(peer: PublicKey): MacPeer | undefined {
    if (peer.type !== 'Ed25519') return undefined;
    const u = x25519FromEd25519Public(peer.raw);
    if (u === undefined) return undefined;
    try {
      const pub = createPublicKey({
        key: Buffer.concat([X25519_SPKI_PREFIX, u]),
        format: 'der',
        type: 'spki',
      });
      const shared = diffieHellman({ privateKey: this.priv, publicKey: pub });
      const k = hkdfSync('sha256', shared, HKDF_SALT, new Uint8Array(0), 32);
      return { tag: macTag(peer.raw), key: new Uint8Array(k) };
    } catch {
      return undefined;
    }
  }
}

/** A MAC list for `digest`: one entry per member, each under the key shared with it. */
export function macList(members: Iterable<MacPeer>, count: number, digest: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafe(count * MAC_ENTRY_BYTES);
  let off = 0;
  for (const m of members) {
    if (off >= out.byteLength) break;
    out.writeUInt32BE(m.tag, off);
    macOf(m.key, digest).copy(out, off + 4);
    off += MAC_ENTRY_BYTES;
  }
  return off === out.byteLength ? out : out.subarray(0, off);
}

/** The offset of the MAC tagged `tag` in a list, or -1. */
export function findMac(list: Uint8Array, tag: number): number {
  for (let off = 0; off + MAC_ENTRY_BYTES <= list.byteLength; off += MAC_ENTRY_BYTES) {
    const t = ((list[off]! << 24) | (list[off + 1]! << 16) | (list[off + 2]! << 8) | list[off + 3]!) >>> 0;
    if (t === tag) return off + 4;
  }
  return -1;
}

/** Whether `list` holds, under `tag`, the MAC of `digest` under `key` (constant time in the MAC). */
export function checkMac(list: Uint8Array, at: number, key: Uint8Array, digest: Uint8Array): boolean {
  const m = macOf(key, digest);
  let diff = 0;
  for (let i = 0; i < MAC_BYTES; i++) diff |= m[i]! ^ list[at + i]!;
  return diff === 0;
}
