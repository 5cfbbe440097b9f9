/**
 * HPACK (RFC 7541) for the gRPC server's HTTP/2 (h2.ts): a decoder of the
 * client's header blocks, static and dynamic table and Huffman strings, and
 * the encoding of our own few response fields as literals (no dynamic table,
 * no Huffman: nothing the client has to remember for us).
 *
 * The decoder reads bytes from the network: every integer and length is
 * bounded, the dynamic table never exceeds the size we advertise, and a
 * block that breaks any rule throws {@link HpackError} (a connection error,
 * COMPRESSION_ERROR: after it the two tables may differ, so the connection
 * cannot go on).
 */

/** The header block is not valid HPACK. */
export class HpackError extends Error {}

/** RFC 7541 Appendix A. */
export const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];

/** RFC 7541 Appendix B: the code of each symbol (0..255, 256 = EOS), most significant bit first... */
const HUFFMAN_CODES = [
  0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8, 0xffffea,
  0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed, 0xfffffee, 0xfffffef,
  0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7,
  0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa,
  0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18, 0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c,
  0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66,
  0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0,
  0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75, 0x28, 0x29,
  0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd,
  0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4, 0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda,
  0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf, 0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0,
  0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3, 0x7fffe4, 0x1fffdc, 0x3fffd8, 0x7fffe5, 0x3fffd9, 0x7fffe6,
  0x7fffe7, 0xffffef, 0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea,
  0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0,
  0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4, 0x7ffff0, 0x3fffe5,
  0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8, 0x1ffffec,
  0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3,
  0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9,
  0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7,
  0x1fffe8, 0x7ffff3, 0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4,
  0x3ffffeb, 0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb,
  0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee, 0x3fffffff,
];
/** ...and its length in bits. */
const HUFFMAN_BITS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28,
  28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7,
  8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19,
  13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13,
  28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21,
  22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23,
  22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25,
  25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/**
 * The Huffman code as a binary tree: node n has children `tree[2n]` (bit 0)
 * and `tree[2n + 1]` (bit 1); a child is another node's index, or a leaf as
 * `-1 - symbol`. Node 0 is the root.
 */
const tree: Int32Array = (() => {
  const t = new Int32Array(2 * 512);
  let nodes = 1;
  for (let sym = 0; sym <= 256; sym++) {
    const code = HUFFMAN_CODES[sym]!;
    const bits = HUFFMAN_BITS[sym]!;
    let n = 0;
    for (let i = bits - 1; i >= 0; i--) {
      const slot = 2 * n + ((code / 2 ** i) & 1);
      if (i === 0) t[slot] = -1 - sym;
      else {
        if (t[slot] === 0) t[slot] = nodes++;
        n = t[slot]!;
      }
    }
  }
  return t;
})();

/** The entry overhead of RFC 7541 section 4.1. */
const ENTRY_OVERHEAD = 32;

/** A decoded header block: field names and values in turn, and whether it was over the list size cap. */
export interface HeaderBlock {
  /** `[name0, value0, name1, value1, ...]`; empty when `tooLarge`. */
  fields: string[];
  /** The fields' size (RFC 7541 section 4.1, as SETTINGS_MAX_HEADER_LIST_SIZE counts) passed the cap. */
  tooLarge: boolean;
}

/** One connection's HPACK decoder (its dynamic table). */
export class HpackDecoder {
  /** The dynamic table, oldest first (index 62 is the last element). */
  private readonly names: string[] = [];
  private readonly values: string[] = [];
  private size = 0;
  private max: number;
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;

  /** `limit`: SETTINGS_HEADER_TABLE_SIZE as we advertise it (4096, HTTP/2's default). */
  constructor(private readonly limit = 4096) {
    this.max = limit;
  }

  /** Decodes one complete header block. Throws {@link HpackError} when it is not valid HPACK. */
  decode(block: Buffer, maxListSize: number): HeaderBlock {
    this.buf = block;
    this.pos = 0;
    const fields: string[] = [];
    let listSize = 0;
    let tooLarge = false;
    let first = true;
    try {
      while (this.pos < block.length) {
        const b = block[this.pos]!;
        let name: string;
        let value: string;
        if (b >= 0x80) {
          // indexed field
          const index = this.integer(7);
          if (index === 0) throw new HpackError('index 0');
          name = this.nameAt(index);
          value =
            index <= STATIC_TABLE.length
              ? STATIC_TABLE[index - 1]![1]
              : this.values[this.names.length - (index - STATIC_TABLE.length)]!;
        } else if (b >= 0x40) {
          // literal with incremental indexing
          const index = this.integer(6);
          name = index === 0 ? this.string() : this.nameAt(index);
          value = this.string();
          this.add(name, value);
        } else if (b >= 0x20) {
          // dynamic table size update: only before the first field
          if (!first) throw new HpackError('table size update after a field');
          const size = this.integer(5);
          if (size > this.limit) throw new HpackError(`table size ${size} over ${this.limit}`);
          this.max = size;
          this.evict(0);
          continue;
        } else {
          // literal without indexing (0000) or never indexed (0001)
          const index = this.integer(4);
          name = index === 0 ? this.string() : this.nameAt(index);
          value = this.string();
        }
        first = false;
        listSize += name.length + value.length + ENTRY_OVERHEAD;
        if (listSize > maxListSize) tooLarge = true;
        if (!tooLarge) fields.push(name, value);
      }
    } finally {
      this.buf = EMPTY;
    }
    return tooLarge ? { fields: [], tooLarge } : { fields, tooLarge };
  }

  /** The dynamic table's size now (for tests). */
  get tableSize(): number {
    return this.size;
  }

  private nameAt(index: number): string {
    if (index <= STATIC_TABLE.length) return STATIC_TABLE[index - 1]![0];
    const at = this.names.length - (index - STATIC_TABLE.length);
    if (at < 0) throw new HpackError(`index ${index} past the dynamic table`);
    return this.names[at]!;
  }

  /** An integer with an N-bit prefix (RFC 7541 section 5.1), at most 2^28 + prefix. */
  private integer(prefix: number): number {
    const buf = this.buf;
    const mask = (1 << prefix) - 1;
    let v = buf[this.pos++]! & mask;
    if (v < mask) return v;
    for (let shift = 0; ; shift += 7) {
      if (shift > 21) throw new HpackError('integer too large');
      if (this.pos >= buf.length) throw new HpackError('truncated integer');
      const b = buf[this.pos++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return v;
    }
  }

  /** A string literal (RFC 7541 section 5.2), as latin1: one character per octet. */
  private string(): string {
    if (this.pos >= this.buf.length) throw new HpackError('truncated string');
    const huffman = this.buf[this.pos]! >= 0x80;
    const len = this.integer(7);
    if (len > this.buf.length - this.pos) throw new HpackError('string past the end of the block');
    const start = this.pos;
    this.pos += len;
    if (!huffman) return this.buf.toString('latin1', start, start + len);
    return huffmanDecode(this.buf, start, start + len);
  }

  private add(name: string, value: string): void {
    const size = name.length + value.length + ENTRY_OVERHEAD;
    this.evict(size);
    // an entry larger than the table empties it and is not added (RFC 7541 section 4.4)
    if (size > this.max) return;
    this.names.push(name);
    this.values.push(value);
    this.size += size;
  }

  /** Evicts the oldest entries until `room` more octets fit. */
  private evict(room: number): void {
    let drop = 0;
    while (this.size + room > this.max && drop < this.names.length) {
      this.size -= this.names[drop]!.length + this.values[drop]!.length + ENTRY_OVERHEAD;
      drop++;
    }
    if (drop > 0) {
      this.names.splice(0, drop);
      this.values.splice(0, drop);
    }
  }
}

const EMPTY = Buffer.alloc(0);

/** Decodes a Huffman-coded string; padding must be the EOS code's first bits (at most 7 ones). */
export function huffmanDecode(buf: Buffer, start: number, end: number): string {
  let out = '';
  let n = 0;
  // bits read since the last symbol, and whether they were all ones (a valid padding)
  let pending = 0;
  let ones = true;
  for (let i = start; i < end; i++) {
    const byte = buf[i]!;
    for (let bit = 7; bit >= 0; bit--) {
      const b = (byte >> bit) & 1;
      const next = tree[2 * n + b]!;
      pending++;
      if (b === 0) ones = false;
      if (next < 0) {
        const sym = -1 - next;
        if (sym === 256) throw new HpackError('EOS in a Huffman string');
        out += String.fromCharCode(sym);
        n = 0;
        pending = 0;
        ones = true;
      } else if (next === 0) {
        throw new HpackError('invalid Huffman code');
      } else n = next;
    }
  }
  if (pending > 7 || !ones) throw new HpackError('invalid Huffman padding');
  return out;
}

/** An integer with an N-bit prefix, `first` holding the bits above the prefix. */
function encodeInteger(first: number, prefix: number, v: number): number[] {
  const mask = (1 << prefix) - 1;
  if (v < mask) return [first | v];
  const out = [first | mask];
  v -= mask;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** The static table index of a name, for the encoder. */
const STATIC_NAMES = new Map<string, number>();
for (let i = STATIC_TABLE.length - 1; i >= 0; i--) STATIC_NAMES.set(STATIC_TABLE[i]![0], i + 1);

/**
 * Encodes fields as one header block: a field the static table holds whole
 * as its index, any other as a literal without indexing (with the static
 * name's index when there is one). Names must be lower case; names and
 * values are latin1 text (callers send ASCII).
 */
export function encodeHeaders(fields: readonly (readonly [string, string])[]): Buffer {
  const out: number[] = [];
  for (const [name, value] of fields) {
    const whole = STATIC_TABLE.findIndex(([n, v]) => n === name && v === value);
    if (whole >= 0) {
      out.push(...encodeInteger(0x80, 7, whole + 1));
      continue;
    }
    const index = STATIC_NAMES.get(name);
    if (index === undefined) {
      out.push(0x00, ...encodeInteger(0, 7, name.length));
      for (let i = 0; i < name.length; i++) out.push(name.charCodeAt(i) & 0xff);
    } else out.push(...encodeInteger(0x00, 4, index));
    out.push(...encodeInteger(0, 7, value.length));
    for (let i = 0; i < value.length; i++) out.push(value.charCodeAt(i) & 0xff);
  }
  return Buffer.from(out);
}
