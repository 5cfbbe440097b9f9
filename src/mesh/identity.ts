import './polyfill.js';
import { generateKeyPairSync } from 'node:crypto';
import { privateKeyFromProtobuf, privateKeyFromRaw } from '@libp2p/crypto/keys';
import type { PrivateKey } from '@libp2p/interface';

/**
 * A fresh Ed25519 libp2p key, made synchronously (node:crypto) so that the
 * peer id, which the engine needs as its node id, is known at construction.
 */
export function generateIdentity(): PrivateKey {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' }) as { d?: string; x?: string };
  const d = Buffer.from(jwk.d ?? '', 'base64url');
  const x = Buffer.from(jwk.x ?? '', 'base64url');
  return privateKeyFromRaw(new Uint8Array(Buffer.concat([d, x])));
}

/** Decodes a protobuf-encoded libp2p private key (throws on bad bytes). */
export function identityFromProtobuf(bytes: Uint8Array): PrivateKey {
  return privateKeyFromProtobuf(bytes);
}

/** The peer id string of a key (base58btc of its identity multihash). */
export function peerIdOf(key: PrivateKey): string {
  return key.publicKey.toString();
}
