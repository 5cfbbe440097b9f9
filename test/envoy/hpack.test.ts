import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeHeaders,
  HpackDecoder,
  HpackError,
  huffmanDecode,
  STATIC_TABLE,
} from '../../src/envoy/hpack.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const pairs = (fields: string[]) => {
  const out: [string, string][] = [];
  for (let i = 0; i < fields.length; i += 2) out.push([fields[i]!, fields[i + 1]!]);
  return out;
};

describe('HPACK decoder: RFC 7541 appendix C', () => {
  const requests: [string, [string, string][], number][] = [
    [
      '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
      [
        [':method', 'GET'],
        [':scheme', 'http'],
        [':path', '/'],
        [':authority', 'www.example.com'],
      ],
      57,
    ],
    [
      '8286 84be 5808 6e6f 2d63 6163 6865',
      [
        [':method', 'GET'],
        [':scheme', 'http'],
        [':path', '/'],
        [':authority', 'www.example.com'],
        ['cache-control', 'no-cache'],
      ],
      110,
    ],
    [
      '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
      [
        [':method', 'GET'],
        [':scheme', 'https'],
        [':path', '/index.html'],
        [':authority', 'www.example.com'],
        ['custom-key', 'custom-value'],
      ],
      164,
    ],
  ];
  const huffman = [
    '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
    '8286 84be 5886 a8eb 1064 9cbf',
    '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
  ];

  it('C.3: requests without Huffman coding, one dynamic table across them', () => {
    const d = new HpackDecoder();
    for (const [bytes, fields, size] of requests) {
      expect(pairs(d.decode(hex(bytes), 1 << 20).fields)).toEqual(fields);
      expect(d.tableSize).toBe(size);
    }
  });

  it('C.4: the same requests with Huffman coding', () => {
    const d = new HpackDecoder();
    huffman.forEach((bytes, i) => {
      expect(pairs(d.decode(hex(bytes), 1 << 20).fields)).toEqual(requests[i]![1]);
      expect(d.tableSize).toBe(requests[i]![2]);
    });
  });
});

/** A literal with incremental indexing and a new name, without Huffman (short strings). */
function indexed(name: string, value: string): Buffer {
  return Buffer.concat([
    Buffer.from([0x40, name.length]),
    Buffer.from(name),
    Buffer.from([value.length]),
    Buffer.from(value),
  ]);
}

describe('HPACK decoder: the dynamic table', () => {
  it('evicts the oldest entries to fit, empties itself for an entry larger than it, and obeys size updates', () => {
    const d = new HpackDecoder(256);
    // each entry: 2 + 10 + 32 = 44 octets; five fit in 256, the sixth evicts the first
    for (let i = 0; i < 6; i++) d.decode(indexed(`k${i}`, `v${i}`.padEnd(10, '.')), 1 << 20);
    expect(d.tableSize).toBe(5 * 44);
    // index 62 is the newest, 66 the oldest left (k1)
    expect(pairs(d.decode(Buffer.from([0x80 | 62, 0x80 | 66]), 1 << 20).fields)).toEqual([
      ['k5', 'v5........'],
      ['k1', 'v1........'],
    ]);
    expect(() => d.decode(Buffer.from([0x80 | 67]), 1 << 20)).toThrow(/past the dynamic table/);
    // a size update to 50 keeps one entry; to 0 none
    d.decode(Buffer.from([0x3f, 50 - 31]), 1 << 20);
    expect(d.tableSize).toBe(44);
    d.decode(Buffer.from([0x20]), 1 << 20);
    expect(d.tableSize).toBe(0);
    // back to 256, then an entry larger than the table empties it and is not added
    d.decode(Buffer.concat([Buffer.from([0x3f, 0x80 | (256 - 31 - 128), 0x01]), indexed('a', 'b')]), 1 << 20);
    expect(d.tableSize).toBe(34);
    d.decode(indexed('x'.repeat(100), 'y'.repeat(125)), 1 << 20);
    expect(d.tableSize).toBe(0);
  });

  it('counts the header list size, refuses past the cap but keeps the table in step', () => {
    const d = new HpackDecoder();
    const r = d.decode(Buffer.concat([indexed('a', 'x'.repeat(100)), indexed('b', 'y')]), 100);
    expect(r).toEqual({ fields: [], tooLarge: true });
    expect(pairs(d.decode(Buffer.from([0x80 | 62, 0x80 | 63]), 1 << 20).fields)).toEqual([
      ['b', 'y'],
      ['a', 'x'.repeat(100)],
    ]);
  });
});

describe('HPACK decoder: what is not HPACK', () => {
  it('throws HpackError, never anything else', () => {
    const bad: [string, RegExp][] = [
      ['80', /index 0/],
      ['be', /past the dynamic table/],
      ['3fe21f', /over 4096/],
      ['82 20', /after a field/],
      ['ff', /truncated integer/],
      ['ff ff ff ff ff 0f', /integer too large/],
      ['40 05 61', /past the end/],
      ['40', /truncated string/],
      // "a" then the EOS code, and a padding of 8 ones, and a padding with a zero
      ['41 85 1f ff ff ff ff', /EOS|padding/],
      ['41 82 1f ff', /padding/],
      ['41 81 00', /padding/],
    ];
    for (const [bytes, message] of bad) {
      const d = new HpackDecoder();
      let err: unknown;
      try {
        d.decode(hex(bytes), 1 << 20);
      } catch (e) {
        err = e;
      }
      expect(err, bytes).toBeInstanceOf(HpackError);
      expect(String((err as Error).message), bytes).toMatch(message);
    }
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const d = new HpackDecoder();
        try {
          d.decode(Buffer.from(bytes), 1 << 20);
        } catch (e) {
          expect(e).toBeInstanceOf(HpackError);
        }
      }),
      { numRuns: 5000, seed: 21 },
    );
  });

  it('Huffman: a known string of the RFC', () => {
    // "www.example.com" from C.4.1
    const b = hex('f1e3 c2e5 f23a 6ba0 ab90 f4ff');
    expect(huffmanDecode(b, 0, b.length)).toBe('www.example.com');
  });
});

describe('HPACK encoder of our response fields', () => {
  it('decodes back to the same fields; whole static entries are one byte', () => {
    const fields: [string, string][] = [
      [':status', '200'],
      ['content-type', 'application/grpc'],
      ['grpc-status', '3'],
      ['grpc-message', 'x'.repeat(300)],
    ];
    const block = encodeHeaders(fields);
    expect(block[0]).toBe(0x88);
    const d = new HpackDecoder();
    expect(pairs(d.decode(block, 1 << 20).fields)).toEqual(fields);
    expect(d.tableSize).toBe(0);
    expect(STATIC_TABLE).toHaveLength(61);
  });
});
