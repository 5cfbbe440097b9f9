import { ErrorCodes } from '../errors.js';
import { invalid } from '../validate.js';

/** How {@link normalizeIp} folds addresses. */
export interface IpOptions {
  /**
   * IPv6 prefix length kept, 1..128: addresses in the same /n share a key
   * (one host usually holds a whole /64). `false` keeps the full address and
   * prints no prefix. Default 64.
   */
  ipv6Subnet?: number | false;
  /** Fold IPv4-mapped IPv6 (`::ffff:a.b.c.d`) to plain IPv4. Default true. */
  mapIpv4?: boolean;
}

/** Longest accepted input (an IPv6 address with brackets, zone id and prefix fits easily). */
export const MAX_IP_LENGTH = 128;

const DEFAULT_SUBNET = 64;
const COLON = 0x3a;
const DOT = 0x2e;

/** `HEX[b]`: b in lower-case hex without leading zeros; `HEX2[b]`: padded to two digits. */
const HEX: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16));
const HEX2: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));
/** `DEC[b]`: b in decimal, for dotted quads. */
const DEC: readonly string[] = Array.from({ length: 256 }, (_, b) => String(b));

/** A 16-bit group in lower-case hex without leading zeros, from two small tables (no number formatting). */
function hex(g: number): string {
  return g < 256 ? HEX[g]! : HEX[g >>> 8]! + HEX2[g & 0xff]!;
}

/** Scratch for the 8 groups of the IPv6 being parsed; parsing is synchronous, so one buffer serves all calls. */
const groups = new Uint16Array(8);

/**
 * Canonical text of an IP address for use in a key.
 *
 * - IPv4: strict dotted quad (four decimal octets 0..255, no leading zeros,
 *   which some parsers read as octal); returned as given.
 * - IPv6: any RFC 4291 text form (`::` compression, an embedded IPv4 tail,
 *   any case), optionally in brackets, with a zone id (`%eth0`, dropped: the
 *   zone names a local interface, not a client) and optionally a `/n` prefix
 *   no broader than the subnet (so the output is valid input and folding is
 *   idempotent). Cut to its /`ipv6Subnet` and printed in RFC 5952 form with the
 *   prefix, e.g. `2001:db8:1:2::/64`; IPv4-mapped addresses keep the dotted tail.
 * - IPv4-mapped IPv6 (`::ffff:1.2.3.4`, `::ffff:102:304`), with no prefix or
 *   /128: folded to `1.2.3.4` when `mapIpv4` (default), so a dual-stack socket
 *   and an IPv4 one give one key per client.
 *
 * Throws RateMeshError `ERR_IP_INVALID` (field `ip`) for anything else, and
 * `ERR_CONFIG_INVALID` for bad options. Allocates only the output string.
 */
export function normalizeIp(addr: string, opts?: IpOptions): string {
  const subnet = opts?.ipv6Subnet === undefined ? DEFAULT_SUBNET : checkSubnet(opts.ipv6Subnet);
  const mapIpv4 = opts?.mapIpv4 === undefined ? true : checkMapIpv4(opts.mapIpv4);

  if (typeof addr !== 'string') invalidIp('must be a string', addr);
  const len = addr.length;
  if (len === 0) invalidIp('must not be empty', addr);
  if (len > MAX_IP_LENGTH)
    invalidIp(`is too long for an IP address: at most ${MAX_IP_LENGTH} characters`, addr);

  if (addr.indexOf(':') === -1) {
    if (parseV4(addr, 0, len) >= 0) return addr;
    invalidIp('is not a valid IPv4 address: four decimal octets 0-255 without leading zeros', addr);
  }

  let start = 0;
  let end = len;
  if (addr.charCodeAt(0) === 0x5b) {
    if (addr.charCodeAt(len - 1) !== 0x5d) invalidIp('has an unclosed [', addr);
    start = 1;
    end = len - 1;
  }
  let prefix = -1;
  const slash = addr.lastIndexOf('/', end - 1);
  if (slash >= start) {
    prefix = parsePrefix(addr, slash + 1, end);
    if (prefix < 0) invalidIp('has an invalid prefix length: /0 to /128 without leading zeros', addr);
    end = slash;
  }
  const zone = addr.indexOf('%', start);
  if (zone >= 0 && zone < end) {
    if (!validZone(addr, zone + 1, end)) invalidIp('has an empty or malformed zone id', addr);
    end = zone;
  }
  if (!parseV6(addr, start, end)) invalidIp('is not a valid IPv6 address', addr);

  const mapped = isMapped();
  if (mapped && mapIpv4 && (prefix === -1 || prefix === 128)) return dotted(groups[6]!, groups[7]!);

  const bits = subnet === false ? 128 : subnet;
  if (prefix !== -1 && prefix < bits) {
    invalidIp(`is a /${prefix} network, broader than the /${bits} addresses are folded to`, addr);
  }
  if (bits < 128) mask(bits);
  const text = format();
  return subnet === false ? text : `${text}/${bits}`;
}

/** Parses a strict dotted quad in s[start, end); the address as a uint32, or -1. */
function parseV4(s: string, start: number, end: number): number {
  let value = 0;
  let parts = 0;
  let i = start;
  for (;;) {
    if (i >= end) return -1;
    let c = s.charCodeAt(i);
    if (c < 48 || c > 57) return -1;
    const first = i;
    let octet = c - 48;
    i++;
    for (; i < end; i++) {
      c = s.charCodeAt(i);
      if (c < 48 || c > 57) break;
      // A second digit after a leading 0, or a fourth digit.
      if (octet === 0 || i - first >= 3) return -1;
      octet = octet * 10 + (c - 48);
    }
    if (octet > 255) return -1;
    value = value * 256 + octet;
    if (++parts === 4) return i === end ? value : -1;
    if (i >= end || s.charCodeAt(i) !== DOT) return -1;
    i++;
  }
}

/** Parses an IPv6 address in s[start, end) into `groups`; false when malformed. */
function parseV6(s: string, start: number, end: number): boolean {
  let n = 0;
  let gap = -1;
  let i = start;
  if (i >= end) return false;
  if (s.charCodeAt(i) === COLON) {
    if (i + 1 >= end || s.charCodeAt(i + 1) !== COLON) return false;
    gap = 0;
    i += 2;
    if (i === end) {
      groups.fill(0);
      return true;
    }
  }
  for (;;) {
    const first = i;
    let v = 0;
    for (; i < end; i++) {
      const h = hexValue(s.charCodeAt(i));
      if (h < 0) break;
      v = (v << 4) | h;
    }
    if (i < end && s.charCodeAt(i) === DOT) {
      // An embedded IPv4 tail: the last 32 bits, written as a dotted quad.
      if (n > 6) return false;
      const v4 = parseV4(s, first, end);
      if (v4 < 0) return false;
      groups[n++] = v4 >>> 16;
      groups[n++] = v4 & 0xffff;
      break;
    }
    const digits = i - first;
    if (digits === 0 || digits > 4 || n === 8) return false;
    groups[n++] = v;
    if (i === end) break;
    if (s.charCodeAt(i) !== COLON) return false;
    i++;
    if (i < end && s.charCodeAt(i) === COLON) {
      if (gap >= 0) return false;
      gap = n;
      i++;
      if (i === end) break;
    } else if (i === end) {
      return false;
    }
  }
  if (gap < 0) return n === 8;
  // `::` stands for at least one zero group.
  if (n === 8) return false;
  const tail = n - gap;
  for (let k = 1; k <= tail; k++) groups[8 - k] = groups[n - k]!;
  for (let k = gap; k < 8 - tail; k++) groups[k] = 0;
  return true;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

/** 0..128 without leading zeros, or -1. */
function parsePrefix(s: string, start: number, end: number): number {
  const digits = end - start;
  if (digits < 1 || digits > 3) return -1;
  if (digits > 1 && s.charCodeAt(start) === 48) return -1;
  let v = 0;
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return -1;
    v = v * 10 + (c - 48);
  }
  return v <= 128 ? v : -1;
}

/** A zone id: one or more printable ASCII characters other than `%`, `/`, `[` and `]`. */
function validZone(s: string, start: number, end: number): boolean {
  if (start >= end) return false;
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c <= 0x20 || c >= 0x7f || c === 0x25 || c === 0x2f || c === 0x5b || c === 0x5d) return false;
  }
  return true;
}

/** Whether `groups` holds an IPv4-mapped address, ::ffff:0:0/96. */
function isMapped(): boolean {
  return (
    groups[0] === 0 &&
    groups[1] === 0 &&
    groups[2] === 0 &&
    groups[3] === 0 &&
    groups[4] === 0 &&
    groups[5] === 0xffff
  );
}

function mask(bits: number): void {
  for (let g = 0; g < 8; g++) {
    const keep = bits - g * 16;
    if (keep >= 16) continue;
    groups[g] = keep <= 0 ? 0 : groups[g]! & (0xffff << (16 - keep));
  }
}

function dotted(hi: number, lo: number): string {
  return `${DEC[hi >>> 8]}.${DEC[hi & 0xff]}.${DEC[lo >>> 8]}.${DEC[lo & 0xff]}`;
}

/** RFC 5952: lower case, no leading zeros, the longest run (the first on a tie) of 2+ zero groups as `::`. */
function format(): string {
  if (isMapped()) return `::ffff:${dotted(groups[6]!, groups[7]!)}`;
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (bestStart < 0) {
    let out = hex(groups[0]!);
    for (let i = 1; i < 8; i++) out += `:${hex(groups[i]!)}`;
    return out;
  }
  let out = '';
  for (let i = 0; i < bestStart; i++) out += i === 0 ? hex(groups[i]!) : `:${hex(groups[i]!)}`;
  out += '::';
  const after = bestStart + bestLen;
  for (let i = after; i < 8; i++) out += i === after ? hex(groups[i]!) : `:${hex(groups[i]!)}`;
  return out;
}

function checkSubnet(v: unknown): number | false {
  if (v === false || (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 128)) return v;
  return invalid(
    'ipv6Subnet',
    'must be an integer prefix length from 1 to 128, or false to keep full addresses',
    v,
    ErrorCodes.CONFIG_INVALID,
  );
}

function checkMapIpv4(v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  return invalid('mapIpv4', 'must be true or false', v, ErrorCodes.CONFIG_INVALID);
}

function invalidIp(reason: string, got: unknown): never {
  return invalid('ip', reason, got, ErrorCodes.IP_INVALID);
}
