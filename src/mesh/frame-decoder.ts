/**
 * Varint-length-prefixed frames out of a byte stream, without exceptions on
 * the common path: a read that ends on a frame boundary (nearly every read
 * here) yields views into the chunk it came in, no copy; only a frame split
 * across reads is buffered. (@libp2p/utils' decoder throws and catches a
 * RangeError, with a stack trace, at the end of every read.)
 */
export class FrameDecoder {
  private pending: Uint8Array | undefined;

  /** `maxFrameBytes`: the largest frame body accepted; a larger length is an error. */
  constructor(private readonly maxFrameBytes: number) {}

  /** Bytes held from an incomplete frame. */
  get buffered(): number {
    return this.pending?.byteLength ?? 0;
  }

  /**
   * Appends `chunk` and returns every complete frame body, in order, or an
   * Error when a length is malformed or over the cap (the stream is then
   * unusable: the caller drops it). The returned views are valid until the
   * next call.
   */
  push(chunk: Uint8Array): Uint8Array[] | Error {
    let buf = chunk;
    if (this.pending !== undefined) {
      const joined = new Uint8Array(this.pending.byteLength + chunk.byteLength);
      joined.set(this.pending, 0);
      joined.set(chunk, this.pending.byteLength);
      buf = joined;
      this.pending = undefined;
    }
    const out: Uint8Array[] = [];
    let off = 0;
    const end = buf.byteLength;
    while (off < end) {
      // uvarint, at most 4 bytes (2^28 > any cap we allow)
      let len = 0;
      let shift = 0;
      let p = off;
      let complete = false;
      while (p < end && shift < 28) {
        const b = buf[p++]!;
        len += (b & 0x7f) * 2 ** shift;
        if (b < 0x80) {
          complete = true;
          break;
        }
        shift += 7;
      }
      if (!complete) {
        if (shift >= 28) return new Error('frame length varint too long');
        break; // the length itself is split across reads
      }
      if (len > this.maxFrameBytes)
        return new Error(`frame of ${len} bytes over the cap of ${this.maxFrameBytes}`);
      if (end - p < len) break;
      out.push(buf.subarray(p, p + len));
      off = p + len;
    }
    if (off < end) {
      if (end - off > this.maxFrameBytes + 4) return new Error('incomplete frame over the cap');
      this.pending = buf.slice(off);
    }
    return out;
  }
}

/** Bytes of the uvarint encoding of `n` (n < 2^28). */
export function varintLength(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : 4;
}

/** Writes `n` (< 2^28) as a uvarint at `off`; returns the offset after it. */
export function writeVarint(buf: Uint8Array, off: number, n: number): number {
  let v = n;
  while (v >= 0x80) {
    buf[off++] = (v & 0x7f) | 0x80;
    v = Math.floor(v / 128);
  }
  buf[off++] = v;
  return off;
}

/** Reads a uvarint (< 2^28) at `off`: [value, next offset], or undefined when malformed or truncated. */
export function readVarint(buf: Uint8Array, off: number): [number, number] | undefined {
  let v = 0;
  let shift = 0;
  let p = off;
  while (p < buf.byteLength && shift < 28) {
    const b = buf[p++]!;
    v += (b & 0x7f) * 2 ** shift;
    if (b < 0x80) return [v, p];
    shift += 7;
  }
  return undefined;
}
