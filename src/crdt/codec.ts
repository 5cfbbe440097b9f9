/**
 * Versioned compact binary encoding of gossip and sync messages. The schema is
 * written out in docs/wire-format.md; in short every message is
 *
 *   magic 0x52 ('R') · format 5 · type · body
 *
 * and gossip and sync responses carry a policy table (name, 8-byte version of
 * that one policy) that their entries index: a receiver merges an entry only
 * when it runs the same version of that policy.
 *
 * with unsigned LEB128 varints (up to 2^53) and little-endian float64 times.
 * Decoding validates every field and bound before anything is returned, so a
 * message is either accepted whole or rejected with a reason; it never throws.
 */

export const MAGIC = 0x52;
/**
 * Format 2 added `reach` to the gossip header (format 1 had none); format 3
 * replaced the one policy-set version of the header with a per-policy table;
 * format 4 made entries sparse (only non-zero buckets, the first bucket
 * delta-coded against the previous entry's) and added the loss-repair fields
 * (`repair`, `nacks`) to the gossip header; format 5 gives each count its sender's skew (how
 * much of it may lie later in its bucket than an even spread: `WireEntry.skews`).
 */
export const FORMAT = 5;
export const TYPE_GOSSIP = 1;
export const TYPE_SYNC_REQUEST = 2;
export const TYPE_SYNC_RESPONSE = 3;

/** Hard caps on what a decoder accepts. */
export const LIMITS = {
  gossipBytes: 1 << 20,
  syncBytes: 16 << 20,
  entries: 100_000,
  origins: 4096,
  keyBytes: 512,
  originIdBytes: 128,
  counts: 64,
  count: 2 ** 40,
  /** Rows of a policy table. */
  policies: 1024,
  /** Bytes of a policy name in a table (names are ASCII, at most 64 characters). */
  policyNameBytes: 64,
  /** Repair requests (nacks) in one gossip message. */
  nacks: 256,
  /** Largest |bucket id| of an entry (times up to 2^50 ms, buckets at least 1 ms wide). */
  bucket: 2 ** 50,
} as const;

/** One row of a message's policy table: a policy name and the version of that policy (16 hex digits). */
export interface WirePolicy {
  name: string;
  version: string;
}

/** One key's window of counts of one origin. */
export interface WireEntry {
  /** Index into the origin table (sync) or 0 (gossip: the sender). */
  origin: number;
  /** Index into the message's policy table. */
  policy: number;
  key: string;
  /**
   * Bucket id of counts[0]; counts[i] belongs to bucket base + i. Only the
   * non-zero counts travel (a zero adds nothing to a max-merge): a decoded
   * entry's counts start and end with a non-zero count, and an entry with no
   * counts (a demand update only) has `counts` empty.
   */
  base: number;
  counts: number[];
  /**
   * Per count (the same index), the origin's skew there: how many of that bucket's counts may
   * still be inside a window that has passed part of the bucket, beyond the even spread over
   * it a receiver weighs them by (an integer, at most the count; see KeyWindow.ownDeficit).
   * Absent on an entry to encode: none. A decoded entry has one per count.
   */
  skews?: number[];
  /** The origin's offered cost over the window (its demand). */
  demand: number;
}

export interface GossipMessage {
  type: typeof TYPE_GOSSIP;
  /** The sender's global policies and their versions (every one, with entries or not); entries index it. */
  policies: WirePolicy[];
  seq: number;
  sentAt: number;
  /**
   * Live members the sender knows, itself included; 0 in a farewell: the sender has stopped
   * deciding and leaves the mesh, and the message carries the whole window of every key it
   * holds own counts of (see Engine.farewell).
   */
  members: number;
  /**
   * Members the sender published this message to directly, itself included
   * (its connected subscribers + 1). A receiver that knows no more members than
   * this need not relay it: everyone it knows already has it from the origin.
   */
  reach: number;
  /**
   * Loss repair: when > 0, this message (and, past the size caps, the next
   * ones) carries the whole window of every key the sender sent in its messages
   * numbered `repair` and up; 0 when it repairs nothing.
   */
  repair: number;
  /** Repair requests: origins this sender missed messages of (see {@link WireNack}). */
  nacks: WireNack[];
  entries: WireEntry[];
}

/**
 * A repair request: the sender of the message missed some of `origin`'s
 * messages. It holds all of them up to `have` (every message numbered `have`
 * or less reached it, or was repaired since) and has seen up to `seen`.
 * `origin` answers with a message whose `repair` is at most `have + 1`.
 */
export interface WireNack {
  origin: string;
  have: number;
  seen: number;
}

export interface SyncRequest {
  type: typeof TYPE_SYNC_REQUEST;
  t0: number;
}

export interface SyncResponse {
  type: typeof TYPE_SYNC_RESPONSE;
  /** The responder's global policies and their versions; entries index it. */
  policies: WirePolicy[];
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

  /** A signed integer as a zigzag varint (0, -1, 1, -2, … → 0, 1, 2, 3, …). */
  zigzag(v: number): void {
    this.varint(v >= 0 ? 2 * v : -2 * v - 1);
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
    const len = s.length;
    // ASCII under 128 characters (peer ids, most keys and names): the same bytes written as they
    // are, its length one varint byte; no encoder call, no array made (a sync answer names every
    // member: 256 of them per answer on a 256-node mesh)
    if (len < 0x80) {
      this.ensure(1 + len);
      const buf = this.buf;
      const at = this.pos + 1;
      let i = 0;
      for (; i < len; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[at + i] = c;
      }
      if (i === len) {
        buf[this.pos] = len;
        this.pos = at + len;
        return;
      }
    }
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
  zigzag(): number {
    const z = this.varint();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
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

/** The 8 version bytes of a policy-table row, from a 16-hex-digit version hash. */
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

function header(w: Writer, type: number): void {
  w.u8(MAGIC);
  w.u8(FORMAT);
  w.u8(type);
}

function writeTable(w: Writer, policies: readonly WirePolicy[]): void {
  w.varint(policies.length);
  for (const p of policies) {
    w.str(p.name);
    w.bytes(versionBytes(p.version));
  }
}

const POLICY_NAME = /^[A-Za-z0-9_.:-]+$/;

/** A policy table: at most LIMITS.policies rows, names valid and unique, versions 8 bytes. */
function readTable(r: Reader): WirePolicy[] {
  const n = r.varint();
  if (n > LIMITS.policies) throw 'bad-field';
  const out: WirePolicy[] = [];
  const seen = new Set<string>();
  for (let i = 0; i < n; i++) {
    const name = r.str(LIMITS.policyNameBytes, 'bad-field');
    if (!POLICY_NAME.test(name) || seen.has(name)) throw 'bad-field';
    seen.add(name);
    out.push({ name, version: hex(r.bytes(8)) });
  }
  return out;
}

/**
 * One entry: only its non-zero counts, the first one's bucket as a zigzag delta
 * from the previous entry's first bucket in the same message (`prev`), then
 * each further non-zero count after the number of zero buckets it skips.
 * Returns the bucket written as the entry's base (the next entry's `prev`).
 */
function writeEntry(w: Writer, e: WireEntry, withOrigin: boolean, prev: number): number {
  if (withOrigin) w.varint(e.origin);
  w.varint(e.policy);
  w.str(e.key);
  const c = e.counts;
  let first = 0;
  let n = 0;
  for (let i = c.length - 1; i >= 0; i--) {
    if (c[i]! > 0) {
      first = i;
      n++;
    }
  }
  const base = n === 0 ? prev : e.base + first;
  w.zigzag(base - prev);
  w.varint(n);
  const sk = e.skews;
  if (n > 0) {
    w.varint(c[first]!);
    w.varint(sk?.[first] ?? 0);
    let skip = 0;
    for (let i = first + 1; i < c.length; i++) {
      const v = c[i]!;
      if (v > 0) {
        w.varint(skip);
        w.varint(v);
        w.varint(sk?.[i] ?? 0);
        skip = 0;
      } else skip++;
    }
  }
  w.varint(e.demand);
  return base;
}

function varintBytes(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

function utf8Bytes(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n++;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/**
 * An upper bound of the bytes `e` takes in a gossip message, for a sender that
 * keeps its messages under a size cap. Its base travels as the difference from
 * the previous entry's, which may be of a policy with other buckets: counted as
 * the largest a base difference takes (bases within ±2^50: 8 bytes). Nothing allocated.
 */
export function entryBytes(e: WireEntry): number {
  const k = utf8Bytes(e.key);
  let n = varintBytes(e.policy) + varintBytes(k) + k + 8 + 1;
  let pairs = 0;
  for (let i = 0; i < e.counts.length; i++) {
    const v = e.counts[i]!;
    if (v > 0) {
      n += varintBytes(v) + 1 + varintBytes(e.skews?.[i] ?? 0);
      pairs++;
    }
  }
  return n + varintBytes(pairs) + varintBytes(e.demand);
}

/** The bytes of a gossip header with this table and these nacks (an upper bound). */
export function gossipHeaderBytes(policies: readonly WirePolicy[], nacks: readonly WireNack[]): number {
  let n = 3 + 3 + 8 + 3 + 3 + 8 + 3 + 3;
  for (const p of policies) n += 1 + utf8Bytes(p.name) + 8;
  for (const x of nacks) n += 2 + utf8Bytes(x.origin) + 16;
  return n;
}

/** Encode a gossip message; entries' `policy` index `m.policies` (`repair` 0 and no `nacks` when left out). */
export function encodeGossip(
  m: Omit<GossipMessage, 'type' | 'repair' | 'nacks'> & { repair?: number; nacks?: readonly WireNack[] },
): Uint8Array {
  const w = new Writer();
  header(w, TYPE_GOSSIP);
  writeTable(w, m.policies);
  w.varint(m.seq);
  w.f64(m.sentAt);
  w.varint(m.members);
  w.varint(m.reach);
  const nacks = m.nacks ?? [];
  w.varint(m.repair ?? 0);
  w.varint(nacks.length);
  for (const x of nacks) {
    w.str(x.origin);
    w.varint(x.have);
    w.varint(x.seen);
  }
  w.varint(m.entries.length);
  let prev = 0;
  for (const e of m.entries) prev = writeEntry(w, e, false, prev);
  return w.finish();
}

export function encodeSyncRequest(m: Omit<SyncRequest, 'type'>): Uint8Array {
  const w = new Writer();
  header(w, TYPE_SYNC_REQUEST);
  w.f64(m.t0);
  return w.finish();
}

export function encodeSyncResponse(m: Omit<SyncResponse, 'type'>): Uint8Array {
  const w = new Writer();
  header(w, TYPE_SYNC_RESPONSE);
  writeTable(w, m.policies);
  w.f64(m.t0);
  w.f64(m.t1);
  w.varint(m.origins.length);
  for (const o of m.origins) w.str(o);
  w.varint(m.entries.length);
  let prev = 0;
  for (const e of m.entries) prev = writeEntry(w, e, true, prev);
  return w.finish();
}

/**
 * One entry (see {@link writeEntry}), its counts made dense again from the
 * first non-zero bucket to the last: at most LIMITS.counts buckets, every
 * listed count non-zero and at most LIMITS.count, the base within
 * ±LIMITS.bucket. `prev` is the previous entry's base (0 for the first).
 */
function readEntry(r: Reader, origins: number, policies: number, prev: number): WireEntry {
  const origin = origins > 0 ? r.varint() : 0;
  if (origins > 0 && origin >= origins) throw 'bad-field';
  const policy = r.varint();
  if (policy >= policies) throw 'bad-field';
  const key = r.str(LIMITS.keyBytes, 'bad-key');
  const delta = r.zigzag();
  const base = prev + delta;
  if (!(Math.abs(base) <= LIMITS.bucket)) throw 'bad-field';
  const n = r.varint();
  if (n > LIMITS.counts) throw 'bad-field';
  // an entry without counts has no base of its own (one encoding per message)
  if (n === 0 && delta !== 0) throw 'bad-field';
  const counts: number[] = [];
  const skews: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i > 0) {
      const skip = r.varint();
      if (skip >= LIMITS.counts) throw 'bad-field';
      for (let j = 0; j < skip; j++) {
        counts.push(0);
        skews.push(0);
      }
    }
    const c = r.varint();
    if (c === 0 || c > LIMITS.count) throw 'bad-field';
    const sk = r.varint();
    if (sk > c) throw 'bad-field';
    counts.push(c);
    skews.push(sk);
    if (counts.length > LIMITS.counts) throw 'bad-field';
  }
  const demand = r.varint();
  if (demand > LIMITS.count) throw 'bad-field';
  return { origin, policy, key, base, counts, skews, demand };
}

/**
 * Decode and validate a message: every field and bound, and that every entry
 * indexes a row of the message's policy table. Which rows match the
 * receiver's own policies is the receiver's business (the engine merges only
 * entries of policies it runs at the same version).
 */
export function decodeMessage(
  bytes: Uint8Array,
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
    let message: Message;
    if (type === TYPE_GOSSIP) {
      const policies = readTable(r);
      const seq = r.varint();
      const sentAt = r.f64();
      const members = r.varint();
      // 0: a farewell (format 4 nodes before it drop one as bad-field)
      if (members > LIMITS.origins) throw 'bad-field';
      const reach = r.varint();
      if (reach === 0 || reach > LIMITS.origins) throw 'bad-field';
      const repair = r.varint();
      if (repair > seq) throw 'bad-field';
      const nn = r.varint();
      if (nn > LIMITS.nacks) throw 'bad-field';
      const nacks: WireNack[] = [];
      for (let i = 0; i < nn; i++) {
        const origin = r.str(LIMITS.originIdBytes, 'bad-field');
        const have = r.varint();
        const seen = r.varint();
        if (have > seen) throw 'bad-field';
        nacks.push({ origin, have, seen });
      }
      const n = r.varint();
      if (n > LIMITS.entries) throw 'too-many-entries';
      const entries: WireEntry[] = [];
      let prev = 0;
      for (let i = 0; i < n; i++) {
        const e = readEntry(r, 0, policies.length, prev);
        prev = e.base;
        entries.push(e);
      }
      message = { type, policies, seq, sentAt, members, reach, repair, nacks, entries };
    } else if (type === TYPE_SYNC_REQUEST) {
      message = { type, t0: r.f64() };
    } else {
      const policies = readTable(r);
      const t0 = r.f64();
      const t1 = r.f64();
      const no = r.varint();
      if (no === 0 || no > LIMITS.origins) throw 'bad-field';
      const origins: string[] = [];
      for (let i = 0; i < no; i++) origins.push(r.str(LIMITS.originIdBytes, 'bad-field'));
      const n = r.varint();
      if (n > LIMITS.entries) throw 'too-many-entries';
      const entries: WireEntry[] = [];
      let prev = 0;
      for (let i = 0; i < n; i++) {
        const e = readEntry(r, no, policies.length, prev);
        prev = e.base;
        entries.push(e);
      }
      message = { type, policies, t0, t1, origins, entries };
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
 * not a well-formed gossip header of this format (policy table included).
 */
export function peekGossipReach(bytes: Uint8Array): number {
  if (!(bytes instanceof Uint8Array) || bytes.length > LIMITS.gossipBytes) return 0;
  const r = new Reader(bytes);
  try {
    if (r.u8() !== MAGIC || r.u8() !== FORMAT || r.u8() !== TYPE_GOSSIP) return 0;
    readTable(r);
    r.varint();
    r.f64();
    const members = r.varint();
    const reach = r.varint();
    if (members > LIMITS.origins || reach === 0 || reach > LIMITS.origins) return 0;
    return reach;
  } catch {
    return 0;
  }
}

/**
 * The entry count of a gossip message from its header alone (nothing else
 * decoded), so a receiver can refuse a message with too many keys at O(1)
 * cost; -1 when the bytes are not a well-formed gossip header of this format,
 * policy table included (the full decode then says why).
 */
export function peekGossipEntries(bytes: Uint8Array): number {
  if (!(bytes instanceof Uint8Array) || bytes.length > LIMITS.gossipBytes) return -1;
  const r = new Reader(bytes);
  try {
    if (r.u8() !== MAGIC || r.u8() !== FORMAT || r.u8() !== TYPE_GOSSIP) return -1;
    readTable(r);
    r.varint();
    r.f64();
    r.varint();
    r.varint();
    r.varint();
    const nn = r.varint();
    if (nn > LIMITS.nacks) return -1;
    for (let i = 0; i < nn; i++) {
      r.str(LIMITS.originIdBytes, 'bad-field');
      r.varint();
      r.varint();
    }
    return r.varint();
  } catch {
    return -1;
  }
}
