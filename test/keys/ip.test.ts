import { isIP } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { type IpOptions, normalizeIp } from '../../src/keys/index.js';
import { expectRateMeshError } from '../policy/expect-error.js';

const full: IpOptions = { ipv6Subnet: false };
const keepMapped: IpOptions = { mapIpv4: false };

describe('normalizeIp: folding table', () => {
  const cases: [string, IpOptions | undefined, string][] = [
    // IPv4 is kept as given.
    ['1.2.3.4', undefined, '1.2.3.4'],
    ['0.0.0.0', undefined, '0.0.0.0'],
    ['255.255.255.255', undefined, '255.255.255.255'],
    ['10.0.0.1', full, '10.0.0.1'],
    ['10.0.0.1', keepMapped, '10.0.0.1'],
    // IPv6 cut to its /64 in RFC 5952 form.
    ['2001:db8:1:2:3:4:5:6', undefined, '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:0003:0004:0005:0006', undefined, '2001:db8:1:2::/64'],
    ['2001:db8:1:2::', undefined, '2001:db8:1:2::/64'],
    ['2001:db8::1', undefined, '2001:db8::/64'],
    ['2001:db8:0:0:ffff::1', undefined, '2001:db8::/64'],
    ['::1', undefined, '::/64'],
    ['::', undefined, '::/64'],
    ['fe80::1%eth0', undefined, 'fe80::/64'],
    ['[2001:db8:a:b::1]', undefined, '2001:db8:a:b::/64'],
    ['[fe80::abcd%25en0]', undefined, 'fe80::/64'],
    ['1:2:3:4:5:6:7::', undefined, '1:2:3:4::/64'],
    ['1:0:0:4:5:6:7:8', undefined, '1:0:0:4::/64'],
    ['0:1:0:0:5:6:7:8', undefined, '0:1::/64'],
    ['1:2:3:4:5:6:1.2.3.4', undefined, '1:2:3:4::/64'],
    // A prefix no broader than the subnet is accepted (folding is idempotent).
    ['2001:db8:1:2::/64', undefined, '2001:db8:1:2::/64'],
    ['2001:db8:1:2:3::/80', undefined, '2001:db8:1:2::/64'],
    ['2001:db8:1:2:3:4:5:6/128', undefined, '2001:db8:1:2::/64'],
    // Other subnets.
    ['2001:db8:1:2:3:4:5:6', { ipv6Subnet: 48 }, '2001:db8:1::/48'],
    ['2001:db8:abcd:ef01::1', { ipv6Subnet: 56 }, '2001:db8:abcd:ef00::/56'],
    ['2001:db8:abcd:ef81::1', { ipv6Subnet: 57 }, '2001:db8:abcd:ef80::/57'],
    ['ffff:ffff::', { ipv6Subnet: 1 }, '8000::/1'],
    ['2001:db8:1:2:3:4:5:6', { ipv6Subnet: 128 }, '2001:db8:1:2:3:4:5:6/128'],
    ['2001:db8::1:0:0:1', { ipv6Subnet: 128 }, '2001:db8::1:0:0:1/128'],
    // Full addresses: RFC 5952 (longest zero run, first on a tie, never a single group).
    ['2001:db8:1:2:3:4:5:6', full, '2001:db8:1:2:3:4:5:6'],
    ['2001:DB8::0:1', full, '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', full, '2001:db8::1:0:0:1'],
    ['2001:0:0:1:0:0:0:1', full, '2001:0:0:1::1'],
    ['2001:db8:0:1:1:1:1:1', full, '2001:db8:0:1:1:1:1:1'],
    ['0:0:0:0:0:0:0:0', full, '::'],
    ['0:0:0:0:0:0:0:1', full, '::1'],
    ['1:0:0:0:0:0:0:0', full, '1::'],
    ['::2:3:4:5:6:7:8', full, '0:2:3:4:5:6:7:8'],
    ['fe80::1%eth0', full, 'fe80::1'],
    ['::1.2.3.4', full, '::102:304'],
    // IPv4-mapped IPv6 folds to IPv4.
    ['::ffff:1.2.3.4', undefined, '1.2.3.4'],
    ['::FFFF:1.2.3.4', undefined, '1.2.3.4'],
    ['::ffff:0102:0304', undefined, '1.2.3.4'],
    ['::ffff:c0a8:101', undefined, '192.168.1.1'],
    ['0:0:0:0:0:ffff:192.168.1.1', undefined, '192.168.1.1'],
    ['[::ffff:10.0.0.1]', undefined, '10.0.0.1'],
    ['::ffff:10.0.0.1%eth0', undefined, '10.0.0.1'],
    ['::ffff:1.2.3.4/128', undefined, '1.2.3.4'],
    ['::ffff:1.2.3.4', full, '1.2.3.4'],
    ['::ffff:1.2.3.4', { ipv6Subnet: 48 }, '1.2.3.4'],
    // ... unless told not to; printed with the dotted tail (RFC 5952 §5).
    ['::ffff:1.2.3.4', keepMapped, '::/64'],
    ['::ffff:102:304', { mapIpv4: false, ipv6Subnet: false }, '::ffff:1.2.3.4'],
    ['::ffff:1.2.3.4', { mapIpv4: false, ipv6Subnet: 128 }, '::ffff:1.2.3.4/128'],
    ['::ffff:1.2.3.4', { mapIpv4: false, ipv6Subnet: 96 }, '::ffff:0.0.0.0/96'],
    // Not mapped: ::ffff:0:0/96 only (IPv4-compatible and NAT64 stay IPv6).
    ['::1.2.3.4', undefined, '::/64'],
    ['64:ff9b::1.2.3.4', undefined, '64:ff9b::/64'],
    ['::fffe:1.2.3.4', full, '::fffe:102:304'],
    ['0:0:0:1:0:ffff:1.2.3.4', full, '::1:0:ffff:102:304'],
  ];

  it.each(cases)('%s %o → %s', (input, opts, expected) => {
    expect(normalizeIp(input, opts)).toBe(expected);
    // The output is itself a valid input that folds to itself.
    expect(normalizeIp(expected, opts)).toBe(expected);
  });
});

describe('normalizeIp: invalid input', () => {
  const cases: [string, unknown, string][] = [
    ['empty', '', 'must not be empty (got "")'],
    [
      'three octets',
      '1.2.3',
      'is not a valid IPv4 address: four decimal octets 0-255 without leading zeros (got "1.2.3")',
    ],
    ['five octets', '1.2.3.4.5', 'is not a valid IPv4 address'],
    ['octet over 255', '256.1.1.1', '(got "256.1.1.1")'],
    ['leading zero', '01.2.3.4', '(got "01.2.3.4")'],
    ['leading zeros', '1.2.3.004', 'is not a valid IPv4 address'],
    ['four digits', '1.2.3.0255', 'is not a valid IPv4 address'],
    ['empty octet', '1..3.4', 'is not a valid IPv4 address'],
    ['trailing dot', '1.2.3.4.', 'is not a valid IPv4 address'],
    ['hex IPv4', '0x7f.0.0.1', 'is not a valid IPv4 address'],
    ['integer IPv4', '2130706433', 'is not a valid IPv4 address'],
    ['IPv4 with port', '1.2.3.4:80', 'is not a valid IPv6 address'],
    ['IPv4 with prefix', '1.2.3.4/32', 'is not a valid IPv4 address'],
    ['bracketed IPv4', '[1.2.3.4]', 'is not a valid IPv4 address'],
    ['spaces', ' 1.2.3.4', 'is not a valid IPv4 address'],
    ['hostname', 'localhost', 'is not a valid IPv4 address'],
    ['two gaps', '::1::', 'is not a valid IPv6 address (got "::1::")'],
    ['two gaps inside', '1::2::3', 'is not a valid IPv6 address'],
    ['triple colon', ':::', 'is not a valid IPv6 address'],
    ['triple colon inside', '1:::2', 'is not a valid IPv6 address'],
    ['leading single colon', ':1:2:3:4:5:6:7', 'is not a valid IPv6 address'],
    ['trailing single colon', '1:2:3:4:5:6:7:', 'is not a valid IPv6 address'],
    ['seven groups', '1:2:3:4:5:6:7', 'is not a valid IPv6 address'],
    ['nine groups', '1:2:3:4:5:6:7:8:9', 'is not a valid IPv6 address'],
    ['gap with eight groups', '1:2:3:4:5:6:7::8', 'is not a valid IPv6 address'],
    ['gap after eight groups', '1:2:3:4:5:6:7:8::', 'is not a valid IPv6 address'],
    ['five hex digits', '12345::', 'is not a valid IPv6 address'],
    ['not hex', 'g::1', 'is not a valid IPv6 address'],
    ['IPv4 tail too late', '1:2:3:4:5:6:7:1.2.3.4', 'is not a valid IPv6 address'],
    ['IPv4 tail in the middle', '::1.2.3.4:1', 'is not a valid IPv6 address'],
    ['bad IPv4 tail', '::ffff:1.2.3', 'is not a valid IPv6 address'],
    ['leading zero in tail', '::ffff:01.2.3.4', 'is not a valid IPv6 address'],
    ['unclosed bracket', '[::1', 'has an unclosed [ (got "[::1")'],
    ['stray bracket', '::1]', 'is not a valid IPv6 address'],
    ['bracket and port', '[::1]:80', 'has an unclosed ['],
    ['empty zone', 'fe80::1%', 'has an empty or malformed zone id'],
    ['zone with space', 'fe80::1%eth 0', 'has an empty or malformed zone id'],
    ['zone with newline', 'fe80::1%eth0\n', 'has an empty or malformed zone id (got "fe80::1%eth0\\n")'],
    ['broad prefix', '2001:db8::/32', 'is a /32 network, broader than the /64 addresses are folded to'],
    ['prefix over 128', '::1/129', 'has an invalid prefix length'],
    ['empty prefix', '::1/', 'has an invalid prefix length'],
    ['prefix leading zero', '::1/064', 'has an invalid prefix length'],
    ['1000 characters', `${'1:'.repeat(499)}1:`, 'is too long for an IP address: at most 128 characters'],
    ['not a string', 16909060, 'must be a string (got 16909060)'],
    ['null', null, 'must be a string (got null)'],
  ];

  it.each(cases)('%s', (_what, input, fragment) => {
    const err = expectRateMeshError(() => normalizeIp(input as string), ErrorCodes.IP_INVALID, 'ip');
    expect(err.message).toContain(fragment);
    expect(err.message.length).toBeLessThan(250);
  });

  it('rejects a prefix broader than the configured subnet', () => {
    expect(normalizeIp('2001:db8::/48', { ipv6Subnet: 48 })).toBe('2001:db8::/48');
    expectRateMeshError(
      () => normalizeIp('2001:db8::/64', { ipv6Subnet: false }),
      ErrorCodes.IP_INVALID,
      'ip',
    );
    expect(normalizeIp('2001:db8::/128', { ipv6Subnet: false })).toBe('2001:db8::');
  });

  it.each([0, 129, 1.5, -64, Number.NaN, '64', true, null])('rejects ipv6Subnet %s', (subnet) => {
    expectRateMeshError(
      () => normalizeIp('::1', { ipv6Subnet: subnet as number }),
      ErrorCodes.CONFIG_INVALID,
      'ipv6Subnet',
    );
  });

  it('rejects a non-boolean mapIpv4', () => {
    expectRateMeshError(
      () => normalizeIp('::1', { mapIpv4: 'no' as unknown as boolean }),
      ErrorCodes.CONFIG_INVALID,
      'mapIpv4',
    );
  });
});

/** 8 groups written in a random but valid text form. */
const groupsArb = fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 });

function write(
  groups: number[],
  style: { upper: boolean; pad: boolean; compress: boolean; bracket: boolean },
): string {
  let parts = groups.map((g) => {
    const h = style.pad ? g.toString(16).padStart(4, '0') : g.toString(16);
    return style.upper ? h.toUpperCase() : h;
  });
  if (style.compress) {
    // Compress the first run of zero groups (not necessarily the longest: any run is valid text).
    const i = groups.indexOf(0);
    if (i >= 0) {
      let j = i;
      while (j < 8 && groups[j] === 0) j++;
      parts = [...parts.slice(0, i), i === 0 ? ':' : '', j === 8 ? ':' : '', ...parts.slice(j)];
      parts = [parts.join(':').replace(/:{3,}/, '::')];
    }
  }
  const text = parts.join(':');
  return style.bracket ? `[${text}]` : text;
}

const styleArb = fc.record({
  upper: fc.boolean(),
  pad: fc.boolean(),
  compress: fc.boolean(),
  bracket: fc.boolean(),
});

describe('normalizeIp: properties', () => {
  it('is idempotent on any generated IPv6, for any subnet', () => {
    fc.assert(
      fc.property(fc.ipV6(), fc.integer({ min: 1, max: 128 }), fc.boolean(), (addr, subnet, mapIpv4) => {
        expect(isIP(addr)).toBe(6);
        for (const opts of [
          { ipv6Subnet: subnet, mapIpv4 },
          { ipv6Subnet: false as const, mapIpv4 },
        ]) {
          const once = normalizeIp(addr, opts);
          expect(normalizeIp(once, opts)).toBe(once);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('gives one /64 for addresses sharing their first 64 bits, another otherwise', () => {
    fc.assert(
      fc.property(groupsArb, groupsArb, styleArb, styleArb, (a, b, sa, sb) => {
        // Skip the IPv4-mapped range: it folds to IPv4 instead.
        fc.pre(!(a.slice(0, 5).every((g) => g === 0) && a[5] === 0xffff));
        const sameTop = [...a.slice(0, 4), ...b.slice(4)];
        fc.pre(!(sameTop.slice(0, 5).every((g) => g === 0) && sameTop[5] === 0xffff));
        const x = normalizeIp(write(a, sa));
        expect(normalizeIp(write(sameTop, sb))).toBe(x);
        expect(x.endsWith('/64')).toBe(true);
        const bMapped = b.slice(0, 5).every((g) => g === 0) && b[5] === 0xffff;
        if (!bMapped && b.slice(0, 4).some((g, i) => g !== a[i]))
          expect(normalizeIp(write(b, sb))).not.toBe(x);
      }),
      { numRuns: 500 },
    );
  });

  it('prints full addresses as the WHATWG URL serialiser does (RFC 5952 compression)', () => {
    fc.assert(
      fc.property(groupsArb, styleArb, (g, style) => {
        fc.pre(!(g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff));
        const text = write(g, style);
        const bare = style.bracket ? text.slice(1, -1) : text;
        const expected = new URL(`http://[${bare}]/`).hostname.slice(1, -1);
        expect(normalizeIp(text, { ipv6Subnet: false })).toBe(expected);
        expect(isIP(normalizeIp(text, { ipv6Subnet: false }))).toBe(6);
      }),
      { numRuns: 500 },
    );
  });

  it('folds every IPv4-mapped address to its IPv4 and keeps every IPv4', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.boolean(), (v4, hexForm) => {
        expect(normalizeIp(v4)).toBe(v4);
        const [a, b, c, d] = v4.split('.').map(Number) as [number, number, number, number];
        const hex = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
        expect(normalizeIp(hexForm ? `::ffff:${hex}` : `::ffff:${v4}`)).toBe(v4);
      }),
      { numRuns: 300 },
    );
  });

  it('never throws anything but ERR_IP_INVALID on arbitrary strings, and agrees with isIP on validity', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF:.%[]/x '), maxLength: 50 }),
        (s) => {
          let ok = true;
          try {
            normalizeIp(s, { ipv6Subnet: false });
          } catch (err) {
            expect((err as { code?: string }).code).toBe(ErrorCodes.IP_INVALID);
            ok = false;
          }
          // Where node:net is sure (no brackets, zones or prefixes), validity agrees.
          if (!/[[\]%/]/.test(s) && !/(^|[.:])0\d/.test(s)) expect(ok).toBe(isIP(s) !== 0);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
