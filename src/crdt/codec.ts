/**
 * Versioned compact binary encoding of gossip and sync messages. The schema is
 * written out in docs/wire-format.md; in short every message is
 *
 *   magic 0x52 ('R') · format 2 · type · policy-set version (8 bytes) · body
 *
 * with unsigned LEB128 varints (up to 2^53) and little-endian float64 times.
 * Decoding validates every field and bound before anything is returned, so a
 * message is either accepted whole or rejected with a reason; it never throws.
 */

export const MAGIC = 0x52;
/** Format 2 added `reach` to the gossip header (format 1 had none). */
export const FORMAT = 2;
export const TYPE_GOSSIP = 1;
export const TYPE_SYNC_REQUEST = 2;
export const TYPE_SYNC_RESPONSE = 3;

/** Hard caps on what a decoder accepts. */
export const LIMITS = {
  gossipBytes: 1 << 20,
  syncBytes: 16 << 20,
  entries: 100_000,
  origins: 1024,
  keyBytes: 512,
  originIdBytes: 128,
  counts: 64,
  count: 2 ** 40,
} as const;

/** One key's window of counts of one origin. */
export interface WireEntry {
  /** Index into the origin table (sync) or 0 (gossip: the sender). */
  origin: number;
  policy: number;
  key: string;
  /** Bucket id of counts[0]; counts[i] belongs to bucket base + i. */
  base: number;
  counts: number[];
  /** The origin's offered cost over the window (its demand). */
  demand: number;
}

export interface GossipMessage {
  type: typeof TYPE_GOSSIP;
  version: string;
  seq: number;
  sentAt: number;
  /** Live members the sender knows, itself included. */
  members: number;
  /**
   * Members the sender published this message to directly, itself included
   * (its connected subscribers + 1). A receiver that knows no more members than
   * this need not relay it: everyone it knows already has it from the origin.
   */
  reach: number;
  entries: WireEntry[];
}

export interface SyncRequest {
  type: typeof TYPE_SYNC_REQUEST;
  version: string;
  t0: number;
}

export interface SyncResponse {
  type: typeof TYPE_SYNC_RESPONSE;
  version: string;
  /** The requester's t0, echoed. */
  t0: number;
  /** The responder's wall time when answering. */
  t1: number;
  /** Origin ids; entry.origin indexes this table. */
  origins: string[];
  entries: WireEntry[];
}

export type Message = GossipMessage | SyncRequest | SyncResponse;

/** Why a message was rejected. */
export type DecodeError =
  | 'too-large'
  | 'truncated'
  | 'bad-magic'
  | 'bad-format'
  | 'bad-type'
  | 'version-mismatch'
  | 'bad-field'
  | 'too-many-entries'
  | 'bad-key';

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** A growable byte writer. */
export class Writer {
  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  pos = 0;

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }

  varint(v: number): void {
    this.ensure(8);
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.pos++] = v;
  }

  f64(v: number): void {
    this.ensure(8);
    this.view.setFloat64(this.pos, v, true);
    this.pos += 8;
  }

  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  str(s: string): void {
    const b = encoder.encode(s);
    this.varint(b.length);
    this.bytes(b);
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.pos);
  }
}

class Reader {
  pos = 0;
  private readonly view: DataView;
  constructor(readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  u8(): number {
    if (this.pos >= this.buf.length) throw 'truncated';
    return this.buf[this.pos++]!;
  }
  varint(): number {
    let v = 0;
    let mul = 1;
    for (let i = 0; i < 8; i++) {
      const b = this.u8();
      v += (b & 0x7f) * mul;
      if (b < 0x80) {
        if (v > Number.MAX_SAFE_INTEGER) throw 'bad-field';
        return v;
      }
      mul *= 0x80;
    }
    throw 'bad-field';
  }
  f64(): number {
    if (this.pos + 8 > this.buf.length) throw 'truncated';
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    if (!Number.isFinite(v)) throw 'bad-field';
    return v;
  }
  bytes(n: number): Uint8Array {
    if (this.pos + n > this.buf.length) throw 'truncated';
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  str(max: number, err: DecodeError): string {
    const n = this.varint();
    if (n === 0 || n > max) throw err;
    let s: string;
    try {
      s = decoder.decode(this.bytes(n));
    } catch (e) {
      throw e === 'truncated' ? e : err;
    }
    return s;
  }
}

/** The 8 version bytes carried in every message, from a 16-hex-digit version hash. */
export function versionBytes(version: string): Uint8Array {
  const out = new Uint8Array(8);
  for (let i = 0; i < 8; i++) {
    const byte = Number.parseInt(version.slice(i * 2, i * 2 + 2), 16);
    out[i] = Number.isNaN(byte) ? 0 : byte;
  }
  return out;
}

function hex(b: Uint8Array): string {
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}

function header(w: Writer, type: number, version: Uint8Array): void {
  w.u8(MAGIC);
  w.u8(FORMAT);
  w.u8(type);
  w.bytes(version);
}

function writeEntry(w: Writer, e: WireEntry, withOrigin: boolean): void {
  if (withOrigin) w.varint(e.origin);
  w.varint(e.policy);
  w.str(e.key);
  w.varint(e.base);
  w.varint(e.counts.length);
  for (const c of e.counts) w.varint(c);
  w.varint(e.demand);
}

/** Encode a gossip message. `version` is the 16-hex-digit policy-set version. */
export function encodeGossip(m: Omit<GossipMessage, 'type'>): Uint8Array {
  const w = new Writer();
  header(w, TYPE_GOSSIP, versionBytes(m.version));
  w.varint(m.seq);
  w.f64(m.sentAt);
  w.varint(m.members);
  w.varint(m.reach);
  w.varint(m.entries.length);
  for (const e of m.entries) writeEntry(w, e, false);
  return w.finish();
}

export function encodeSyncRequest(m: Omit<SyncRequest, 'type'>): Uint8Array {
  const w = new Writer();
  header(w, TYPE_SYNC_REQUEST, versionBytes(m.version));
  w.f64(m.t0);
  return w.finish();
}

export function encodeSyncResponse(m: Omit<SyncResponse, 'type'>): Uint8Array {
  const w = new Writer();
  header(w, TYPE_SYNC_RESPONSE, versionBytes(m.version));
  w.f64(m.t0);
  w.f64(m.t1);
  w.varint(m.origins.length);
  for (const o of m.origins) w.str(o);
  w.varint(m.entries.length);
  for (const e of m.entries) writeEntry(w, e, true);
  return w.finish();
}

function readEntry(r: Reader, origins: number): WireEntry {
  const origin = origins > 0 ? r.varint() : 0;
  if (origins > 0 && origin >= origins) throw 'bad-field';
  const policy = r.varint();
  const key = r.str(LIMITS.keyBytes, 'bad-key');
  const base = r.varint();
  const n = r.varint();
  if (n === 0 || n > LIMITS.counts) throw 'bad-field';
  const counts = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const c = r.varint();
    if (c > LIMITS.count) throw 'bad-field';
    counts[i] = c;
  }
  const demand = r.varint();
  if (demand > LIMITS.count) throw 'bad-field';
  return { origin, policy, key, base, counts, demand };
}

/**
 * Decode and validate a message. `expectVersion` is the local policy-set
 * version: a message of another version is rejected as 'version-mismatch'.
 */
export function decodeMessage(
  bytes: Uint8Array,
  expectVersion: string,
): { ok: true; message: Message } | { ok: false; reason: DecodeError } {
  if (!(bytes instanceof Uint8Array)) return { ok: false, reason: 'bad-field' };
  if (bytes.length > LIMITS.syncBytes) return { ok: false, reason: 'too-large' };
  const r = new Reader(bytes);
  try {
    if (r.u8() !== MAGIC) throw 'bad-magic';
    if (r.u8() !== FORMAT) throw 'bad-format';
    const type = r.u8();
    if (type !== TYPE_GOSSIP && type !== TYPE_SYNC_REQUEST && type !== TYPE_SYNC_RESPONSE) throw 'bad-type';
    if (type === TYPE_GOSSIP && bytes.length > LIMITS.gossipBytes) throw 'too-large';
    const version = hex(r.bytes(8));
    if (version !== expectVersion.slice(0, 16)) throw 'version-mismatch';
    let message: Message;
    if (type === TYPE_GOSSIP) {
      const seq = r.varint();
      const sentAt = r.f64();
      const members = r.varint();
      if (members === 0 || members > LIMITS.origins) throw 'bad-field';
      const reach = r.varint();
      if (reach === 0 || reach > LIMITS.origins) throw 'bad-field';
      const n = r.varint();
      if (n > LIMITS.entries) throw 'too-many-entries';
      const entries: WireEntry[] = [];
      for (let i = 0; i < n; i++) entries.push(readEntry(r, 0));
      message = { type, version, seq, sentAt, members, reach, entries };
    } else if (type === TYPE_SYNC_REQUEST) {
      message = { type, version, t0: r.f64() };
    } else {
      const t0 = r.f64();
      const t1 = r.f64();
      const no = r.varint();
      if (no === 0 || no > LIMITS.origins) throw 'bad-field';
      const origins: string[] = [];
      for (let i = 0; i < no; i++) origins.push(r.str(LIMITS.originIdBytes, 'bad-field'));
      const n = r.varint();
      if (n > LIMITS.entries) throw 'too-many-entries';
      const entries: WireEntry[] = [];
      for (let i = 0; i < n; i++) entries.push(readEntry(r, no));
      message = { type, version, t0, t1, origins, entries };
    }
    if (r.pos !== bytes.length) throw 'bad-field';
    return { ok: true, message };
  } catch (e) {
    if (typeof e === 'string') return { ok: false, reason: e as DecodeError };
    return { ok: false, reason: 'bad-field' };
  }
}

/**
 * The `reach` of a gossip message from its header alone (no entries decoded),
 * for the relay decision before the message is merged; 0 when the bytes are
 * not a well-formed gossip header of this format and `expectVersion`.
 */
export function peekGossipReach(bytes: Uint8Array, expectVersion: string): number {
  if (!(bytes instanceof Uint8Array) || bytes.length > LIMITS.gossipBytes) return 0;
  const r = new Reader(bytes);
  try {
    if (r.u8() !== MAGIC || r.u8() !== FORMAT || r.u8() !== TYPE_GOSSIP) return 0;
    if (hex(r.bytes(8)) !== expectVersion.slice(0, 16)) return 0;
    r.varint();
    r.f64();
    const members = r.varint();
    const reach = r.varint();
    if (members === 0 || members > LIMITS.origins || reach === 0 || reach > LIMITS.origins) return 0;
    return reach;
  } catch {
    return 0;
  }
}

/**
 * The entry count of a gossip message from its header alone (nothing else
 * decoded), so a receiver can refuse a message with too many keys at O(1)
 * cost; -1 when the bytes are not a well-formed gossip header of this format
 * and `expectVersion` (the full decode then says why).
 */
export function peekGossipEntries(bytes: Uint8Array, expectVersion: string): number {
  if (!(bytes instanceof Uint8Array) || bytes.length > LIMITS.gossipBytes) return -1;
  const r = new Reader(bytes);
  try {
    if (r.u8() !== MAGIC || r.u8() !== FORMAT || r.u8() !== TYPE_GOSSIP) return -1;
    if (hex(r.bytes(8)) !== expectVersion.slice(0, 16)) return -1;
    r.varint();
    r.f64();
    r.varint();
    r.varint();
    return r.varint();
  } catch {
    return -1;
  }
}
