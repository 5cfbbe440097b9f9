import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from 'node:crypto';
import type { PrivateKey, PublicKey } from '@libp2p/interface';

/**
 * Ed25519 through node:crypto (OpenSSL) with the key object built once.
 * @libp2p/crypto rebuilds a KeyObject from JWK on every call and its async
 * wrapper costs more than the curve itself (docs/gossip-transport.md): with a
 * reused key object a sign is ~30 µs and a verify ~75 µs here.
 */
export interface Signer {
  sign(data: Uint8Array): Uint8Array;
}

export interface Verifier {
  verify(data: Uint8Array, signature: Uint8Array): boolean;
}

const b64url = (b: Uint8Array): string =>
  Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64url');

/** A raw 32-byte Ed25519 public key as a node:crypto key object. */
export function ed25519PublicKeyObject(raw: Uint8Array): KeyObject {
  if (raw.byteLength !== 32)
    throw new RangeError(`an Ed25519 public key has 32 bytes, not ${raw.byteLength}`);
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64url(raw) }, format: 'jwk' });
}

/** A raw Ed25519 private key (32-byte seed, or seed + public key as libp2p stores it) as a key object. */
export function ed25519PrivateKeyObject(raw: Uint8Array, publicRaw: Uint8Array): KeyObject {
  const seed = raw.subarray(0, 32);
  return createPrivateKey({
    key: { kty: 'OKP', crv: 'Ed25519', d: b64url(seed), x: b64url(publicRaw) },
    format: 'jwk',
  });
}

/** A synchronous signer for a libp2p Ed25519 key; undefined for other key types. */
export function nativeSigner(key: PrivateKey): Signer | undefined {
  if (key.type !== 'Ed25519') return undefined;
  const obj = ed25519PrivateKeyObject(key.raw, key.publicKey.raw);
  return { sign: (data) => sign(null, data, obj) };
}

/** A synchronous verifier for a libp2p Ed25519 public key; undefined for other key types. */
export function nativeVerifier(key: PublicKey): Verifier | undefined {
  if (key.type !== 'Ed25519') return undefined;
  const obj = ed25519PublicKeyObject(key.raw);
  return { verify: (data, signature) => verify(null, data, obj, signature) };
}
