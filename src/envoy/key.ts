import { createHash } from 'node:crypto';
import { MAX_KEY_BYTES } from '../keys/key.js';
import type { DescriptorEntry } from './matcher.js';

/**
 * The ratemesh key a matched descriptor is counted under, within the policy
 * of its rate limit (the policy already fixes the domain and every entry's
 * key, so only the values vary): `d:` then each value, `|` between them.
 * `%`, `|`, control characters and unpaired surrogates are percent-escaped,
 * so distinct value lists give distinct keys and every key is valid. A key
 * over {@link MAX_KEY_BYTES} UTF-8 bytes is replaced by `h:` and its SHA-256.
 *
 * `shared[i]`, when set, replaces entry i's value (`share_threshold`).
 */
export function counterKey(
  entries: readonly DescriptorEntry[],
  shared: readonly (string | undefined)[],
): string {
  let key = 'd:';
  let bytes = 2;
  for (let i = 0; i < entries.length; i++) {
    const v = shared[i] ?? entries[i]!.value;
    if (i > 0) {
      key += '|';
      bytes++;
    }
    const plain = plainBytes(v);
    if (plain >= 0) {
      key += v;
      bytes += plain;
    } else {
      const e = escapeValue(v);
      key += e;
      bytes += Buffer.byteLength(e, 'utf8');
    }
  }
  if (bytes <= MAX_KEY_BYTES) return key;
  return `h:${createHash('sha256').update(key, 'utf8').digest('base64url')}`;
}

/** The UTF-8 length of a value that needs no escaping (printable ASCII but % and |), else -1. */
function plainBytes(v: string): number {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c >= 0x7f || c === 0x25 || c === 0x7c) return -1;
  }
  return v.length;
}

function escapeValue(v: string): string {
  let out = '';
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c === 0x25 || c === 0x7c) {
      out += `%${c.toString(16).toUpperCase().padStart(2, '0')}`;
    } else if (c >= 0xd800 && c <= 0xdbff) {
      const next = v.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        out += v[i]! + v[i + 1]!;
        i++;
      } else out += `%u${c.toString(16).toUpperCase()}`;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      out += `%u${c.toString(16).toUpperCase()}`;
    } else out += v[i]!;
  }
  return out;
}
