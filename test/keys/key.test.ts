import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { accountKey, endpointKey, ipKey, MAX_KEY_BYTES, validateKey } from '../../src/keys/index.js';
import { expectRateMeshError } from '../policy/expect-error.js';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

describe('validateKey', () => {
  it('returns valid keys unchanged', () => {
    for (const key of [
      'k',
      'ip:1.2.3.4',
      'acct:42:GET /v1/users',
      'ключ',
      '🔑',
      'a b\tc'.replace('\t', ' '),
    ]) {
      expect(validateKey(key)).toBe(key);
    }
  });

  it('accepts exactly 512 bytes, ASCII or multibyte', () => {
    expect(MAX_KEY_BYTES).toBe(512);
    const ascii = 'a'.repeat(512);
    expect(validateKey(ascii)).toBe(ascii);
    const twoByte = 'é'.repeat(256);
    expect(bytes(twoByte)).toBe(512);
    expect(validateKey(twoByte)).toBe(twoByte);
    const mixed = `${'a'.repeat(508)}😀`;
    expect(bytes(mixed)).toBe(512);
    expect(validateKey(mixed)).toBe(mixed);
  });

  const cases: [string, unknown, string][] = [
    ['empty', '', 'key: must not be empty (got "")'],
    ['513 ASCII bytes', 'a'.repeat(513), 'key: must be at most 512 bytes in UTF-8 (got 513 bytes)'],
    ['513 bytes, 2-byte chars', `a${'é'.repeat(256)}`, 'got 513 bytes'],
    ['513 bytes, 3-byte char', `${'a'.repeat(510)}€`, 'got 513 bytes'],
    ['515 bytes, emoji', `${'a'.repeat(511)}😀`, 'got 515 bytes'],
    ['huge', 'x'.repeat(1_000_000), 'got 1000000 bytes'],
    ['newline', 'a\nb', 'key: must not hold control characters (U+000A at index 1) (got "a\\nb")'],
    ['NUL', '\x00', 'U+0000 at index 0'],
    ['tab', 'a\tb', 'U+0009 at index 1'],
    ['CR', 'a\r', 'U+000D at index 1'],
    ['ESC', '\x1b[31m', 'U+001B at index 0'],
    ['DEL', 'a\x7f', 'U+007F at index 1'],
    ['C1 NEL', 'a\u0085', 'U+0085 at index 1'],
    ['C1 CSI', '\u009b', 'U+009B at index 0'],
    ['control after multibyte', 'é\n', 'U+000A at index 1'],
    ['lone high surrogate', 'a\ud800', 'must be valid Unicode (unpaired surrogate U+D800 at index 1)'],
    ['lone low surrogate', '\udc00a', 'unpaired surrogate U+DC00 at index 0'],
    ['reversed pair', '\ude00\ud83d', 'unpaired surrogate U+DE00 at index 0'],
    ['number', 42, 'key: must be a string (got 42)'],
    ['undefined', undefined, 'key: must be a string (got undefined)'],
    ['null', null, 'key: must be a string (got null)'],
    ['array', ['a'], 'key: must be a string (got an array of 1)'],
  ];

  it.each(cases)('rejects %s', (_what, key, fragment) => {
    const err = expectRateMeshError(() => validateKey(key), ErrorCodes.KEY_INVALID, 'key');
    expect(err.message).toContain(fragment);
    expect(err.message.length).toBeLessThan(200);
  });

  it('accepts exactly the well-formed, control-free strings of at most 512 bytes', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (s) => {
        const expected = s.length > 0 && bytes(s) <= 512 && !/[\x00-\x1f\x7f-\x9f]/.test(s);
        let ok = true;
        try {
          validateKey(s);
        } catch {
          ok = false;
        }
        expect(ok).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe('key builders', () => {
  it('ipKey folds the address', () => {
    expect(ipKey('1.2.3.4')).toBe('ip:1.2.3.4');
    expect(ipKey('::ffff:1.2.3.4')).toBe('ip:1.2.3.4');
    expect(ipKey('2001:db8:1:2:3:4:5:6')).toBe('ip:2001:db8:1:2::/64');
    expect(ipKey('2001:db8:1:2:3:4:5:6', { ipv6Subnet: 48 })).toBe('ip:2001:db8:1::/48');
    expect(ipKey('2001:db8:1:2:3:4:5:6', { ipv6Subnet: false })).toBe('ip:2001:db8:1:2:3:4:5:6');
    expect(ipKey('::ffff:1.2.3.4', { mapIpv4: false, ipv6Subnet: false })).toBe('ip:::ffff:1.2.3.4');
    expectRateMeshError(() => ipKey('1.2.3'), ErrorCodes.IP_INVALID, 'ip');
  });

  it('accountKey and endpointKey', () => {
    expect(accountKey('42')).toBe('acct:42');
    expect(accountKey('user@example.com')).toBe('acct:user@example.com');
    expect(endpointKey('42', 'GET /v1/users')).toBe('acct:42:GET /v1/users');
    expect(endpointKey('42', 'rpc:Users.Get')).toBe('acct:42:rpc:Users.Get');
  });

  it('escapes : and % in account ids, so account and endpoint keys never collide', () => {
    expect(accountKey('a:b')).toBe('acct:a%3Ab');
    expect(accountKey('100%')).toBe('acct:100%25');
    expect(accountKey('%3A')).toBe('acct:%253A');
    expect(accountKey('a:b')).not.toBe(endpointKey('a', 'b'));
    expect(endpointKey('org:1', 'x')).toBe('acct:org%3A1:x');
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        fc.string({ minLength: 1 }),
        (a, b, c) => {
          const safe = (s: string) => s.replace(/[\x00-\x1f\x7f-\x9f]/g, 'x');
          const [x, y, z] = [safe(a), safe(b), safe(c)];
          expect(accountKey(x) === accountKey(y)).toBe(x === y);
          expect(accountKey(x)).not.toBe(endpointKey(y, z));
          if (x !== y) expect(endpointKey(x, z)).not.toBe(endpointKey(y, z));
        },
      ),
      { numRuns: 300 },
    );
  });

  const parts: [string, () => string, string, string][] = [
    ['empty id', () => accountKey(''), 'id', 'id: must not be empty (got "")'],
    [
      'id with newline',
      () => accountKey('a\n'),
      'id',
      'id: must not hold control characters (U+000A at index 1)',
    ],
    ['id with NUL', () => endpointKey('\x00', 'x'), 'id', 'U+0000 at index 0'],
    ['id not a string', () => accountKey(42 as unknown as string), 'id', 'id: must be a string (got 42)'],
    ['empty endpoint', () => endpointKey('42', ''), 'endpoint', 'endpoint: must not be empty'],
    ['endpoint with DEL', () => endpointKey('42', 'GET\x7f'), 'endpoint', 'U+007F at index 3'],
    ['endpoint with C1', () => endpointKey('42', '\u0085'), 'endpoint', 'U+0085 at index 0'],
    [
      'long id',
      () => accountKey('a'.repeat(508)),
      'key',
      'key: must be at most 512 bytes in UTF-8 (got 513 bytes)',
    ],
    ['long endpoint', () => endpointKey('42', 'é'.repeat(300)), 'key', 'got 608 bytes'],
  ];

  it.each(parts)('rejects %s', (_what, build, field, fragment) => {
    const err = expectRateMeshError(build, ErrorCodes.KEY_INVALID, field);
    expect(err.message).toContain(fragment);
  });

  it('accepts a key of exactly 512 bytes built from parts', () => {
    expect(accountKey('a'.repeat(507))).toHaveLength(512);
  });
});
