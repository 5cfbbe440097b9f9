/**
 * The client address of a request: the socket peer, or, when that peer is a
 * configured trusted proxy, the address the proxy chain reports in
 * `X-Forwarded-For` or `Forwarded` (RFC 7239). A header from an untrusted peer
 * is never read, so a spoofed one changes nothing.
 */
import { BlockList, isIP } from 'node:net';
import { ErrorCodes, RateMeshError } from '../errors.js';

/** Which header the trusted proxies write. Only that one is read: the other could be client-supplied and passed through. */
export type ProxyHeader = 'x-forwarded-for' | 'forwarded';

/** Longest forwarding header value read (bytes); longer ones are bad input. */
export const MAX_FORWARDED_LENGTH = 4096;
/** Most hops walked in a forwarding header. */
export const MAX_HOPS = 32;

/** Why no client address could be determined. */
export type ClientIpFailure =
  | 'no-client-address'
  | 'forwarded-too-long'
  | 'forwarded-malformed'
  | 'forwarded-unknown';

/** A parsed list of trusted proxy networks. */
export interface TrustedProxies {
  readonly list: BlockList;
  /** The CIDRs as given, for logs. */
  readonly cidrs: readonly string[];
}

/**
 * Parses CIDRs (`10.0.0.0/8`, `::1`, `fd00::/8`; a bare address is a /32 or /128).
 * Throws CONFIG_INVALID naming `field[i]` for anything malformed.
 */
export function parseTrustedProxies(cidrs: unknown, field: string): TrustedProxies {
  if (!Array.isArray(cidrs)) {
    throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'must be an array of CIDR strings or false', field);
  }
  const list = new BlockList();
  const out: string[] = [];
  cidrs.forEach((c, i) => {
    const f = `${field}[${i}]`;
    if (typeof c !== 'string') throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'must be a CIDR string', f);
    const slash = c.indexOf('/');
    const addr = slash < 0 ? c : c.slice(0, slash);
    const family = isIP(addr);
    if (family === 0) {
      throw new RateMeshError(
        ErrorCodes.CONFIG_INVALID,
        `not an IP address or CIDR: ${JSON.stringify(c)}`,
        f,
      );
    }
    const max = family === 4 ? 32 : 128;
    const prefix = slash < 0 ? max : Number(c.slice(slash + 1));
    if (
      !Number.isInteger(prefix) ||
      prefix < 0 ||
      prefix > max ||
      (slash >= 0 && !/^\d+$/.test(c.slice(slash + 1)))
    ) {
      throw new RateMeshError(
        ErrorCodes.CONFIG_INVALID,
        `prefix length must be 0..${max}: ${JSON.stringify(c)}`,
        f,
      );
    }
    list.addSubnet(addr, prefix, family === 4 ? 'ipv4' : 'ipv6');
    out.push(c);
  });
  return { list, cidrs: out };
}

function trusted(proxies: TrustedProxies, addr: string): boolean {
  return proxies.list.check(addr, addr.includes(':') ? 'ipv6' : 'ipv4');
}

/**
 * One hop as a bare address: trims, strips `[v6]:port`, `[v6]` and `v4:port`.
 * Returns undefined when the hop is not an IP address.
 */
export function parseHop(raw: string): string | undefined {
  let s = raw.trim();
  if (s.length === 0) return undefined;
  if (s.charCodeAt(0) === 0x5b /* [ */) {
    const end = s.indexOf(']');
    if (end < 0) return undefined;
    const rest = s.slice(end + 1);
    if (rest !== '' && !/^:\d{1,5}$/.test(rest)) return undefined;
    s = s.slice(1, end);
    return isIP(s) === 6 ? s : undefined;
  }
  const family = isIP(s);
  if (family !== 0) return s;
  // IPv4 with a port (some load balancers send it).
  const colon = s.lastIndexOf(':');
  if (colon > 0 && s.indexOf(':') === colon && /^\d{1,5}$/.test(s.slice(colon + 1))) {
    const v4 = s.slice(0, colon);
    if (isIP(v4) === 4) return v4;
  }
  return undefined;
}

/** The `for=` values of a `Forwarded` header, left to right; a string on failure. */
function forwardedFor(value: string): string[] | ClientIpFailure {
  const out: string[] = [];
  for (const element of value.split(',')) {
    let found: string | undefined;
    for (const pair of element.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0) {
        if (pair.trim() === '') continue;
        return 'forwarded-malformed';
      }
      if (pair.slice(0, eq).trim().toLowerCase() !== 'for') continue;
      let v = pair.slice(eq + 1).trim();
      if (v.length >= 2 && v.charCodeAt(0) === 0x22 && v.charCodeAt(v.length - 1) === 0x22)
        v = v.slice(1, -1);
      found = v;
    }
    if (found === undefined) return 'forwarded-malformed';
    // RFC 7239 §6: "unknown" and obfuscated `_` identifiers name no address.
    if (found.toLowerCase() === 'unknown' || found.startsWith('_')) return 'forwarded-unknown';
    out.push(found);
  }
  return out;
}

/**
 * The client address. With no trusted proxies, the socket peer. Otherwise the
 * chain is walked from the right (nearest hop first): each hop that is trusted
 * hands over to the address it reports; the first untrusted one is the client.
 */
export function clientIp(
  remoteAddress: string | undefined,
  headerValue: string | string[] | undefined,
  proxies: TrustedProxies | undefined,
  header: ProxyHeader,
): string | ClientIpFailure {
  if (remoteAddress === undefined || remoteAddress === '') return 'no-client-address';
  if (proxies === undefined || !trusted(proxies, remoteAddress) || headerValue === undefined) {
    return remoteAddress;
  }
  const value = Array.isArray(headerValue) ? headerValue.join(',') : headerValue;
  if (value.trim() === '') return remoteAddress;
  if (value.length > MAX_FORWARDED_LENGTH) return 'forwarded-too-long';
  // Non-ASCII has no place in either header.
  if (!/^[\x20-\x7e\t]*$/.test(value)) return 'forwarded-malformed';
  let hops: string[];
  if (header === 'forwarded') {
    const parsed = forwardedFor(value);
    if (typeof parsed === 'string') return parsed;
    hops = parsed;
  } else {
    hops = value.split(',');
  }
  let client = remoteAddress;
  for (let i = hops.length - 1, walked = 0; i >= 0; i--, walked++) {
    if (walked >= MAX_HOPS) return 'forwarded-too-long';
    const hop = parseHop(hops[i]!);
    if (hop === undefined) return 'forwarded-malformed';
    client = hop;
    if (!trusted(proxies, hop)) break;
  }
  return client;
}
