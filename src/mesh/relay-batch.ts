import { readVarint, varintLength, writeVarint } from './frame-decoder.js';
import { MAC_ENTRY_BYTES, MAX_MAC_ENTRIES } from './relay-mac.js';

/**
 * The relay batch (frame kind 6 of the direct gossip protocol,
 * docs/gossip-transport.md): once a tick a node in relay mode sends ONE frame
 * to `fanout` random peers, holding its own message and the newest message of
 * every origin it learned since its last tick, each signed by its origin.
 *
 * ```
 * batch  6  topic:uvarint count:uvarint item*count
 * item      keylen:uvarint key seq:u64be sig:64 len:uvarint message
 * ```
 *
 * `key` is the origin's public key (libp2p protobuf); `keylen` 0 names the
 * sender itself (the link authenticated it). `sig` is the origin's Ed25519
 * signature over the same bytes as a relayed frame's (domain, topic, seq,
 * message).
 *
 * Kind 7 is the same batch whose items also carry the origin's MAC list
 * (src/mesh/relay-mac.ts), sent to peers that said they read it:
 *
 * ```
 * batch-mac  7  topic:uvarint count:uvarint item*count
 * item          keylen:uvarint key seq:u64be sig:64 len:uvarint message macs:uvarint (tag:u32be mac:8)*macs
 * ```
 */
export const FRAME_BATCH = 6;
export const FRAME_BATCH_MAC = 7;

export const SEQ_BYTES = 8;
export const SIG_BYTES = 64;
/** A key longer than this is not a libp2p public key we accept (Ed25519 protobuf: 36 bytes). */
export const MAX_KEY_BYTES = 1024;

/** One item to send: `key` empty for our own message; `macs` its origin's MAC list (maybe empty). */
export interface BatchItem {
  key: Uint8Array;
  seq: number;
  sig: Uint8Array;
  data: Uint8Array;
  macs?: Uint8Array | undefined;
}

/** One item read from a batch: views into the frame. */
export interface ReadItem {
  key: Uint8Array;
  seq: number;
  seqBytes: Uint8Array;
  sig: Uint8Array;
  data: Uint8Array;
  /** The MAC list (kind 7; empty in kind 6). */
  macs: Uint8Array;
}

const NO_MACS: Uint8Array = new Uint8Array(0);

function itemBytes(it: BatchItem, withMacs: boolean): number {
  return (
    varintLength(it.key.byteLength) +
    it.key.byteLength +
    SEQ_BYTES +
    SIG_BYTES +
    varintLength(it.data.byteLength) +
    it.data.byteLength +
    (withMacs
      ? varintLength((it.macs ?? NO_MACS).byteLength / MAC_ENTRY_BYTES) + (it.macs ?? NO_MACS).byteLength
      : 0)
  );
}

export function readSeq(buf: Uint8Array, off: number): number {
  const view = new DataView(buf.buffer, buf.byteOffset + off, SEQ_BYTES);
  return view.getUint32(0) * 0x1_0000_0000 + view.getUint32(4);
}

export function writeSeq(buf: Uint8Array, off: number, seq: number): void {
  const view = new DataView(buf.buffer, buf.byteOffset + off, SEQ_BYTES);
  view.setUint32(0, Math.floor(seq / 0x1_0000_0000));
  view.setUint32(4, seq >>> 0);
}

/**
 * Encodes `items` in order (the first one always, the others while the frame
 * stays within `maxFrameBytes`, at most `maxItems`) as one length-prefixed
 * batch frame, kind 7 with the MAC lists when `withMacs`, else kind 6. `used`
 * is how many items went in; the rest wait for the next tick.
 */
export function encodeBatch(
  topicIdx: number,
  items: readonly BatchItem[],
  maxFrameBytes: number,
  withMacs = false,
  maxItems = items.length,
): { frame: Uint8Array; used: number } {
  let body = 1 + varintLength(topicIdx) + 4; // the count: at most 4 varint bytes
  let used = 0;
  for (const it of items) {
    if (used >= maxItems) break;
    const b = itemBytes(it, withMacs);
    if (used > 0 && body + b > maxFrameBytes) break;
    body += b;
    used++;
  }
  body -= 4 - varintLength(used);
  const frame = new Uint8Array(varintLength(body) + body);
  let off = writeVarint(frame, 0, body);
  frame[off++] = withMacs ? FRAME_BATCH_MAC : FRAME_BATCH;
  off = writeVarint(frame, off, topicIdx);
  off = writeVarint(frame, off, used);
  for (let i = 0; i < used; i++) {
    const it = items[i]!;
    off = writeVarint(frame, off, it.key.byteLength);
    frame.set(it.key, off);
    off += it.key.byteLength;
    writeSeq(frame, off, it.seq);
    off += SEQ_BYTES;
    frame.set(it.sig, off);
    off += SIG_BYTES;
    off = writeVarint(frame, off, it.data.byteLength);
    frame.set(it.data, off);
    off += it.data.byteLength;
    if (withMacs) {
      const macs = it.macs ?? NO_MACS;
      off = writeVarint(frame, off, macs.byteLength / MAC_ENTRY_BYTES);
      frame.set(macs, off);
      off += macs.byteLength;
    }
  }
  return { frame, used };
}

/**
 * Reads the items of a batch frame body from `off` (just past the topic):
 * every item, or an Error when the frame is malformed (nothing of it is used
 * then: a peer that sends a broken batch loses the whole batch). `maxItems`
 * caps the count; `withMacs` reads kind 7 (each item's MAC list).
 */
export function readBatch(
  f: Uint8Array,
  off: number,
  maxItems: number,
  withMacs = false,
): ReadItem[] | Error {
  const n = readVarint(f, off);
  if (n === undefined || n[0] > maxItems) return new Error('bad batch count');
  const out: ReadItem[] = [];
  let p = n[1];
  for (let i = 0; i < n[0]; i++) {
    const k = readVarint(f, p);
    if (k === undefined || k[0] > MAX_KEY_BYTES) return new Error('bad item key');
    const keyEnd = k[1] + k[0];
    if (keyEnd + SEQ_BYTES + SIG_BYTES > f.byteLength) return new Error('truncated item');
    const seqBytes = f.subarray(keyEnd, keyEnd + SEQ_BYTES);
    const sig = f.subarray(keyEnd + SEQ_BYTES, keyEnd + SEQ_BYTES + SIG_BYTES);
    const len = readVarint(f, keyEnd + SEQ_BYTES + SIG_BYTES);
    if (len === undefined || len[1] + len[0] > f.byteLength) return new Error('truncated item');
    p = len[1] + len[0];
    let macs = NO_MACS;
    if (withMacs) {
      const m = readVarint(f, p);
      if (m === undefined || m[0] > MAX_MAC_ENTRIES) return new Error('bad mac count');
      const end = m[1] + m[0] * MAC_ENTRY_BYTES;
      if (end > f.byteLength) return new Error('truncated item');
      macs = f.subarray(m[1], end);
      p = end;
    }
    out.push({
      key: f.subarray(k[1], keyEnd),
      seq: readSeq(f, keyEnd),
      seqBytes,
      sig,
      data: f.subarray(len[1], len[1] + len[0]),
      macs,
    });
  }
  if (p !== f.byteLength) return new Error('trailing bytes');
  return out;
}

/**
 * `k` distinct entries of `xs` drawn in turn, each with probability in
 * proportion to its weight among those left (all of them when k >= length).
 * A weight that is not a positive finite number counts as the smallest
 * positive one given.
 */
export function pickWeighted<T>(
  xs: readonly T[],
  k: number,
  weight: (x: T) => number,
  rand: () => number = Math.random,
): T[] {
  const a = xs.slice();
  const w = a.map(weight);
  let floor = Number.POSITIVE_INFINITY;
  for (const v of w) if (v > 0 && Number.isFinite(v) && v < floor) floor = v;
  if (!Number.isFinite(floor)) floor = 1;
  for (let i = 0; i < w.length; i++) if (!(w[i]! > 0 && Number.isFinite(w[i]!))) w[i] = floor;
  const m = Math.min(k, a.length);
  for (let i = 0; i < m; i++) {
    let total = 0;
    for (let j = i; j < a.length; j++) total += w[j]!;
    let r = rand() * total;
    let j = i;
    while (j < a.length - 1 && r >= w[j]!) {
      r -= w[j]!;
      j++;
    }
    const t = a[i]!;
    a[i] = a[j]!;
    a[j] = t;
    const tw = w[i]!;
    w[i] = w[j]!;
    w[j] = tw;
  }
  a.length = m;
  return a;
}
