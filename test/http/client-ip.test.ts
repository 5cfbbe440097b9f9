import { describe, expect, it } from 'vitest';
import { isRateMeshError } from '../../src/errors.js';
import { clientIp, parseHop, parseTrustedProxies } from '../../src/http/client-ip.js';

const proxies = parseTrustedProxies(['10.0.0.0/8', '127.0.0.1', 'fd00::/8'], 'trustProxy');

describe('parseHop', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    [' 203.0.113.7 ', '203.0.113.7'],
    ['203.0.113.7:4711', '203.0.113.7'],
    ['[2001:db8::1]:4711', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['2001:db8::1', '2001:db8::1'],
  ])('%s → %s', (hop, want) => expect(parseHop(hop)).toBe(want));
  it.each(['', 'unknown', '1.2.3', '[::1', '[::1]x', '1.2.3.4:99999999', 'a:b:c', '300.1.1.1', 'évil'])(
    'rejects %j',
    (hop) => expect(parseHop(hop)).toBeUndefined(),
  );
});

describe('clientIp', () => {
  it('uses the socket peer when there are no trusted proxies', () => {
    expect(clientIp('198.51.100.1', '203.0.113.7', undefined, 'x-forwarded-for')).toBe('198.51.100.1');
  });
  it('ignores the header from an untrusted peer, however it looks', () => {
    expect(clientIp('198.51.100.1', '203.0.113.7', proxies, 'x-forwarded-for')).toBe('198.51.100.1');
    expect(clientIp('198.51.100.1', 'garbage,,,', proxies, 'x-forwarded-for')).toBe('198.51.100.1');
  });
  it('walks X-Forwarded-For from the right through trusted hops only', () => {
    expect(clientIp('127.0.0.1', '203.0.113.7', proxies, 'x-forwarded-for')).toBe('203.0.113.7');
    // The client prepended a spoofed entry; the first untrusted hop from the right wins.
    expect(clientIp('127.0.0.1', '1.1.1.1, 203.0.113.7, 10.1.2.3', proxies, 'x-forwarded-for')).toBe(
      '203.0.113.7',
    );
    // Every hop trusted: the leftmost is the client.
    expect(clientIp('127.0.0.1', '10.9.9.9, 10.1.2.3', proxies, 'x-forwarded-for')).toBe('10.9.9.9');
    expect(clientIp('::ffff:127.0.0.1', '203.0.113.9', proxies, 'x-forwarded-for')).toBe('203.0.113.9');
  });
  it('reads Forwarded for= (quoted IPv6 with port, obfuscated, unknown)', () => {
    expect(clientIp('127.0.0.1', 'for=203.0.113.7;proto=https', proxies, 'forwarded')).toBe('203.0.113.7');
    expect(clientIp('127.0.0.1', 'for="[2001:db8:cafe::17]:4711", for=10.0.0.2', proxies, 'forwarded')).toBe(
      '2001:db8:cafe::17',
    );
    expect(clientIp('127.0.0.1', 'for=unknown', proxies, 'forwarded')).toBe('forwarded-unknown');
    expect(clientIp('127.0.0.1', 'for=_hidden', proxies, 'forwarded')).toBe('forwarded-unknown');
    expect(clientIp('127.0.0.1', 'proto=https', proxies, 'forwarded')).toBe('forwarded-malformed');
    // The X-Forwarded-For header is not read when the proxies write Forwarded.
    expect(clientIp('127.0.0.1', undefined, proxies, 'forwarded')).toBe('127.0.0.1');
  });
  it('reports malformed, oversized and non-ASCII values from a trusted proxy', () => {
    expect(clientIp('127.0.0.1', 'not-an-ip', proxies, 'x-forwarded-for')).toBe('forwarded-malformed');
    expect(clientIp('127.0.0.1', '203.0.113.7,', proxies, 'x-forwarded-for')).toBe('forwarded-malformed');
    expect(clientIp('127.0.0.1', `${'1.2.3.4,'.repeat(600)}1.2.3.4`, proxies, 'x-forwarded-for')).toBe(
      'forwarded-too-long',
    );
    expect(clientIp('127.0.0.1', '203.0.113.7\u00e9', proxies, 'x-forwarded-for')).toBe(
      'forwarded-malformed',
    );
    expect(clientIp('127.0.0.1', Array(40).fill('10.0.0.1').join(','), proxies, 'x-forwarded-for')).toBe(
      'forwarded-too-long',
    );
  });
  it('reports a missing socket address', () => {
    expect(clientIp(undefined, undefined, undefined, 'x-forwarded-for')).toBe('no-client-address');
  });
});

describe('parseTrustedProxies', () => {
  it.each([
    [['10.0.0.0/33'], 'trustProxy[0]'],
    [['10.0.0.0/8', 'nope'], 'trustProxy[1]'],
    [['::1/129'], 'trustProxy[0]'],
    [['10.0.0.0/8x'], 'trustProxy[0]'],
    [[42], 'trustProxy[0]'],
    ['10.0.0.0/8', 'trustProxy'],
  ])('%j fails naming %s', (input, field) => {
    try {
      parseTrustedProxies(input, 'trustProxy');
      expect.unreachable();
    } catch (err) {
      expect(isRateMeshError(err, 'ERR_CONFIG_INVALID')).toBe(true);
      expect((err as { field: string }).field).toBe(field);
    }
  });
});
