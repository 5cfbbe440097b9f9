import { ErrorCodes, RateMeshError } from '../errors.js';
import { invalid } from '../validate.js';
import { type IpOptions, normalizeIp } from './ip.js';

/** Longest key, in UTF-8 bytes (the form keys take in gossip). */
export const MAX_KEY_BYTES = 512;

/**
 * Returns `key` if it is a usable rate-limit key: a non-empty string of at
 * most {@link MAX_KEY_BYTES} UTF-8 bytes, with no control character (C0
 * U+0000..U+001F, DEL U+007F, C1 U+0080..U+009F) and no unpaired surrogate
 * (which UTF-8 cannot carry: two such keys would collide on the wire).
 * Otherwise throws RateMeshError `ERR_KEY_INVALID` with field `key`.
 * Short printable-ASCII keys take one pass over their characters.
 */
export function validateKey(key: unknown): string {
  if (typeof key === 'string' && key.length !== 0 && key.length <= MAX_KEY_BYTES) {
    let i = 0;
    const n = key.length;
    while (i < n) {
      const c = key.charCodeAt(i);
      if (c < 0x20 || c >= 0x7f) break;
      i++;
    }
    if (i === n) return key;
  }
  return checkText(key, 'key', true);
}

/** `ip:<address>`: the client address folded by {@link normalizeIp} (IPv6 to its /64, mapped IPv4 to IPv4 by default). */
export function ipKey(addr: string, opts?: IpOptions): string {
  return validateKey(`ip:${normalizeIp(addr, opts)}`);
}

/**
 * `acct:<id>`. The id must be a non-empty string without control characters;
 * `%` and `:` in it are written as `%25` and `%3A`, so an id never contains
 * the `:` that separates it from an endpoint: `accountKey('a:b')` cannot
 * collide with `endpointKey('a', 'b')`.
 */
export function accountKey(id: string): string {
  return validateKey(`acct:${escapeId(checkText(id, 'id', false))}`);
}

/** `acct:<id>:<endpoint>`; the id is escaped as in {@link accountKey}, the endpoint (the last part) is kept as is. */
export function endpointKey(id: string, endpoint: string): string {
  const part = escapeId(checkText(id, 'id', false));
  return validateKey(`acct:${part}:${checkText(endpoint, 'endpoint', false)}`);
}

function escapeId(id: string): string {
  if (id.indexOf(':') === -1 && id.indexOf('%') === -1) return id;
  return id.replaceAll('%', '%25').replaceAll(':', '%3A');
}

/**
 * The full check: type, non-empty, no control characters or unpaired
 * surrogates, and (when `limitBytes`) at most MAX_KEY_BYTES UTF-8 bytes.
 */
function checkText(value: unknown, field: string, limitBytes: boolean): string {
  if (typeof value !== 'string') fail(field, 'must be a string', value);
  if (value.length === 0) fail(field, 'must not be empty', value);
  // Each UTF-16 unit is at least one UTF-8 byte: a longer string cannot fit.
  if (limitBytes && value.length > MAX_KEY_BYTES) tooLong(field, value);
  let bytes = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
      fail(field, `must not hold control characters (U+${hex4(c)} at index ${i})`, value);
    }
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) {
        fail(field, `must be valid Unicode (unpaired surrogate U+${hex4(c)} at index ${i})`, value);
      }
      bytes += 4;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      fail(field, `must be valid Unicode (unpaired surrogate U+${hex4(c)} at index ${i})`, value);
    } else bytes += 3;
  }
  if (limitBytes && bytes > MAX_KEY_BYTES) tooLong(field, value);
  return value;
}

function tooLong(field: string, value: string): never {
  throw new RateMeshError(
    ErrorCodes.KEY_INVALID,
    `must be at most ${MAX_KEY_BYTES} bytes in UTF-8 (got ${Buffer.byteLength(value, 'utf8')} bytes)`,
    field,
  );
}

function hex4(c: number): string {
  return c.toString(16).toUpperCase().padStart(4, '0');
}

function fail(field: string, reason: string, got: unknown): never {
  return invalid(field, reason, got, ErrorCodes.KEY_INVALID);
}
