/**
 * A small hand-written protobuf codec for the messages the RLS gRPC server
 * speaks: `RateLimitRequest` in, `RateLimitResponse` out, and the three
 * `grpc.health.v1` messages. It reads and writes the proto3 wire format of
 * the vendored protos (proto/); `SCHEMA` lists every field it reads or
 * writes, and test/envoy/codec.test.ts checks that list against the protos
 * as @grpc/proto-loader loads them, and the codec against protobufjs on the
 * same bytes both ways. Cheaper than protobufjs with proto-loader's object
 * conversion (see `npm run bench:rls`, codec rows).
 *
 * Decoding is of bytes from the network: every length is checked against
 * the bytes left, varints are at most 10 bytes, unknown fields (any wire
 * type, groups included) are skipped, and the counts the service caps are
 * capped here too, so a large message cannot build large arrays first.
 * Decoded objects have @grpc/proto-loader's shape (keepCase, longs as
 * numbers, enums as names, unset messages null), which {@link RlsService}
 * validates field by field.
 */

import type { RlsResponse } from './service.js';
import { MAX_DESCRIPTORS, MAX_ENTRIES, tooManyDescriptors, tooManyEntries } from './service.js';

/** Wire types. */
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const SGROUP = 3;
const EGROUP = 4;
const I32 = 5;

/**
 * Every field the codec reads or writes: message → field → [number, proto type].
 * Checked against the vendored protos by the tests; the codec below uses the
 * same numbers as constants.
 */
export const SCHEMA = {
  'envoy.service.ratelimit.v3.RateLimitRequest': {
    domain: [1, 'string'],
    descriptors: [2, 'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor'],
    hits_addend: [3, 'uint32'],
  },
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor': {
    entries: [1, 'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry'],
    limit: [2, 'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride'],
    hits_addend: [3, 'google.protobuf.UInt64Value'],
  },
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry': {
    key: [1, 'string'],
    value: [2, 'string'],
  },
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride': {
    requests_per_unit: [1, 'uint32'],
    unit: [2, 'envoy.type.v3.RateLimitUnit'],
  },
  'google.protobuf.UInt64Value': { value: [1, 'uint64'] },
  'envoy.service.ratelimit.v3.RateLimitResponse': {
    overall_code: [1, 'envoy.service.ratelimit.v3.RateLimitResponse.Code'],
    statuses: [2, 'envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus'],
    response_headers_to_add: [3, 'envoy.config.core.v3.HeaderValue'],
  },
  'envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus': {
    code: [1, 'envoy.service.ratelimit.v3.RateLimitResponse.Code'],
    current_limit: [2, 'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit'],
    limit_remaining: [3, 'uint32'],
    duration_until_reset: [4, 'google.protobuf.Duration'],
  },
  'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit': {
    requests_per_unit: [1, 'uint32'],
    unit: [2, 'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit'],
    name: [3, 'string'],
  },
  'google.protobuf.Duration': { seconds: [1, 'int64'], nanos: [2, 'int32'] },
  'envoy.config.core.v3.HeaderValue': { key: [1, 'string'], value: [2, 'string'] },
  'grpc.health.v1.HealthCheckRequest': { service: [1, 'string'] },
  'grpc.health.v1.HealthCheckResponse': {
    status: [1, 'grpc.health.v1.HealthCheckResponse.ServingStatus'],
  },
  'grpc.health.v1.HealthListResponse': {
    statuses: [1, 'grpc.health.v1.HealthListResponse.StatusesEntry'],
  },
  'grpc.health.v1.HealthListResponse.StatusesEntry': {
    key: [1, 'string'],
    value: [2, 'grpc.health.v1.HealthCheckResponse'],
  },
} as const;

/** The enums the codec maps, value by name (checked against the protos by the tests). */
export const ENUMS = {
  'envoy.service.ratelimit.v3.RateLimitResponse.Code': { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 },
  'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit': {
    UNKNOWN: 0,
    SECOND: 1,
    MINUTE: 2,
    HOUR: 3,
    DAY: 4,
    WEEK: 7,
    MONTH: 5,
    YEAR: 6,
  },
  'envoy.type.v3.RateLimitUnit': {
    UNKNOWN: 0,
    SECOND: 1,
    MINUTE: 2,
    HOUR: 3,
    DAY: 4,
    MONTH: 5,
    YEAR: 6,
  },
  'grpc.health.v1.HealthCheckResponse.ServingStatus': {
    UNKNOWN: 0,
    SERVING: 1,
    NOT_SERVING: 2,
    SERVICE_UNKNOWN: 3,
  },
} as const;

/** The bytes are not a valid encoding of the message. */
export class WireError extends Error {}

/** A position in a message's bytes (one decode at a time; nothing here is re-entered). */
class Reader {
  buf: Buffer = Buffer.alloc(0);
  pos = 0;

  /** A varint's low 32 bits, unsigned (uint32 and enum fields, tags, lengths). */
  uint32(): number {
    const buf = this.buf;
    let pos = this.pos;
    const end = buf.length;
    let v = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (pos >= end) throw new WireError('truncated varint');
      const b = buf[pos++]!;
      v |= (b & 0x7f) << shift;
      if (b < 0x80) {
        this.pos = pos;
        return v >>> 0;
      }
    }
    // bits 32..63: read past, they do not change the low 32 bits
    for (let i = 0; i < 5; i++) {
      if (pos >= end) throw new WireError('truncated varint');
      if (buf[pos++]! < 0x80) {
        this.pos = pos;
        return v >>> 0;
      }
    }
    throw new WireError('varint longer than 10 bytes');
  }

  /** A uint64 varint as a number (exact up to 2^53, the nearest double above, as protobufjs' longs: Number). */
  uint64(): number {
    const buf = this.buf;
    let pos = this.pos;
    const end = buf.length;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw new WireError('truncated varint');
      const b = buf[pos++]!;
      const bits = b & 0x7f;
      if (i < 4) lo |= bits << (7 * i);
      else if (i === 4) {
        lo |= bits << 28;
        hi |= bits >>> 4;
      } else hi |= bits << (7 * i - 32);
      if (b < 0x80) {
        this.pos = pos;
        return (hi >>> 0) * 4294967296 + (lo >>> 0);
      }
    }
    throw new WireError('varint longer than 10 bytes');
  }

  /** The end of a length-delimited field that starts here. */
  len(limit: number): number {
    const n = this.uint32();
    if (n > limit - this.pos) throw new WireError('length past the end of the message');
    return this.pos + n;
  }

  string(limit: number): string {
    const end = this.len(limit);
    const start = this.pos;
    this.pos = end;
    return start === end ? '' : this.buf.toString('utf8', start, end);
  }

  /** Skips a field of wire type `wt` (its tag already read), a group with everything up to its end. */
  skip(wt: number, field: number, limit: number): void {
    switch (wt) {
      case VARINT:
        this.uint32();
        break;
      case I64:
        this.advance(8, limit);
        break;
      case LEN:
        this.pos = this.len(limit);
        break;
      case I32:
        this.advance(4, limit);
        break;
      case SGROUP: {
        // iteratively, so that nested groups cannot deepen the stack
        const open: number[] = [field];
        while (open.length > 0) {
          if (this.pos >= limit) throw new WireError('unterminated group');
          const tag = this.uint32();
          const f = tag >>> 3;
          const t = tag & 7;
          if (f === 0) throw new WireError('field number 0');
          if (t === EGROUP) {
            if (open.pop() !== f) throw new WireError('mismatched end of group');
          } else if (t === SGROUP) {
            if (open.length >= 64) throw new WireError('groups nested too deep');
            open.push(f);
          } else this.skip(t, f, limit);
        }
        break;
      }
      default:
        throw new WireError(wt === EGROUP ? 'end of group without its start' : `invalid wire type ${wt}`);
    }
  }

  private advance(n: number, limit: number): void {
    if (limit - this.pos < n) throw new WireError('truncated field');
    this.pos += n;
  }
}

const reader = new Reader();

/** `RateLimitDescriptor.Entry`, decoded. */
export interface DecodedEntry {
  key: string;
  value: string;
}

/** `RateLimitDescriptor`, decoded (proto-loader's shape). */
export interface DecodedDescriptor {
  entries: DecodedEntry[];
  limit: { requests_per_unit: number; unit: string | number } | null;
  hits_addend: { value: number } | null;
}

/** `RateLimitRequest`, decoded (proto-loader's shape). */
export interface DecodedRequest {
  domain: string;
  descriptors: DecodedDescriptor[];
  hits_addend: number;
}

/** A decode's outcome: the message, or why not (`INTERNAL`: not the message's wire format; `INVALID_ARGUMENT`: over a cap). */
export type Decoded<T> =
  | { ok: true; value: T }
  | { ok: false; code: 'INTERNAL' | 'INVALID_ARGUMENT'; message: string };

/** Thrown inside the decoder for a count over the service's caps. */
class CapError extends Error {}

const OVERRIDE_UNIT_NAMES = enumNames(ENUMS['envoy.type.v3.RateLimitUnit']);

/** Decodes a `RateLimitRequest` from the bytes of one gRPC message. */
export function decodeRateLimitRequest(bytes: Buffer): Decoded<DecodedRequest> {
  const r = reader;
  r.buf = bytes;
  r.pos = 0;
  try {
    const end = bytes.length;
    let domain = '';
    const descriptors: DecodedDescriptor[] = [];
    let hits = 0;
    let count = 0;
    while (r.pos < end) {
      const tag = r.uint32();
      const field = tag >>> 3;
      const wt = tag & 7;
      if (field === 1 && wt === LEN) domain = r.string(end);
      else if (field === 2 && wt === LEN) {
        const dEnd = r.len(end);
        if (count < MAX_DESCRIPTORS) descriptors.push(descriptor(r, dEnd, count));
        else r.pos = dEnd;
        count++;
      } else if (field === 3 && wt === VARINT) hits = r.uint32();
      else if (field === 0) throw new WireError('field number 0');
      else r.skip(wt, field, end);
    }
    if (count > MAX_DESCRIPTORS) throw new CapError(tooManyDescriptors(count));
    return { ok: true, value: { domain, descriptors, hits_addend: hits } };
  } catch (err) {
    return decodeFailure(err, 'RateLimitRequest');
  } finally {
    r.buf = EMPTY;
  }
}

const EMPTY = Buffer.alloc(0);

function descriptor(r: Reader, end: number, index: number): DecodedDescriptor {
  const entries: DecodedEntry[] = [];
  let limit: DecodedDescriptor['limit'] = null;
  let hits: DecodedDescriptor['hits_addend'] = null;
  let count = 0;
  while (r.pos < end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === LEN) {
      const eEnd = r.len(end);
      if (count < MAX_ENTRIES) entries.push(entry(r, eEnd));
      else r.pos = eEnd;
      count++;
    } else if (field === 2 && wt === LEN) limit = override(r, r.len(end));
    else if (field === 3 && wt === LEN) hits = { value: uint64Value(r, r.len(end)) };
    else if (field === 0) throw new WireError('field number 0');
    else r.skip(wt, field, end);
  }
  if (count > MAX_ENTRIES) throw new CapError(tooManyEntries(index, count));
  return { entries, limit, hits_addend: hits };
}

function entry(r: Reader, end: number): DecodedEntry {
  let key = '';
  let value = '';
  while (r.pos < end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === LEN) key = r.string(end);
    else if (field === 2 && wt === LEN) value = r.string(end);
    else if (field === 0) throw new WireError('field number 0');
    else r.skip(wt, field, end);
  }
  return { key, value };
}

function override(r: Reader, end: number): NonNullable<DecodedDescriptor['limit']> {
  let requests = 0;
  let unit = 0;
  while (r.pos < end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === VARINT) requests = r.uint32();
    else if (field === 2 && wt === VARINT) unit = r.uint32() | 0;
    else if (field === 0) throw new WireError('field number 0');
    else r.skip(wt, field, end);
  }
  return { requests_per_unit: requests, unit: OVERRIDE_UNIT_NAMES.get(unit) ?? unit };
}

function uint64Value(r: Reader, end: number): number {
  let value = 0;
  while (r.pos < end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === VARINT) value = r.uint64();
    else if (field === 0) throw new WireError('field number 0');
    else r.skip(wt, field, end);
  }
  return value;
}

/** Decodes a `grpc.health.v1.HealthCheckRequest`. */
export function decodeHealthCheckRequest(bytes: Buffer): Decoded<{ service: string }> {
  const r = reader;
  r.buf = bytes;
  r.pos = 0;
  try {
    let service = '';
    while (r.pos < bytes.length) {
      const tag = r.uint32();
      const field = tag >>> 3;
      const wt = tag & 7;
      if (field === 1 && wt === LEN) service = r.string(bytes.length);
      else if (field === 0) throw new WireError('field number 0');
      else r.skip(wt, field, bytes.length);
    }
    return { ok: true, value: { service } };
  } catch (err) {
    return decodeFailure(err, 'HealthCheckRequest');
  } finally {
    r.buf = EMPTY;
  }
}

/** Checks that the bytes are a message (of unknown fields only: `HealthListRequest` has none). */
export function decodeEmpty(bytes: Buffer, name: string): Decoded<Record<string, never>> {
  const r = reader;
  r.buf = bytes;
  r.pos = 0;
  try {
    while (r.pos < bytes.length) {
      const tag = r.uint32();
      if (tag >>> 3 === 0) throw new WireError('field number 0');
      r.skip(tag & 7, tag >>> 3, bytes.length);
    }
    return { ok: true, value: {} };
  } catch (err) {
    return decodeFailure(err, name);
  } finally {
    r.buf = EMPTY;
  }
}

function decodeFailure(err: unknown, name: string): Decoded<never> {
  if (err instanceof CapError) return { ok: false, code: 'INVALID_ARGUMENT', message: err.message };
  if (err instanceof WireError)
    return {
      ok: false,
      code: 'INTERNAL',
      message: `cannot decode the ${name}: ${err.message} (at byte ${reader.pos})`,
    };
  throw err;
}

function enumNames(values: Readonly<Record<string, number>>): Map<number, string> {
  return new Map(Object.entries(values).map(([name, n]) => [n, name]));
}

// ---------------------------------------------------------------------------
// Encoding. Sizes first, then one buffer written front to back; the first
// `prefix` bytes are left for the caller (the gRPC message header).

const CODE = ENUMS['envoy.service.ratelimit.v3.RateLimitResponse.Code'];
const UNIT = ENUMS['envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit'];
const SERVING = ENUMS['grpc.health.v1.HealthCheckResponse.ServingStatus'];

function varintSize(v: number): number {
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x200000) return 3;
  if (v < 0x10000000) return 4;
  if (v < 0x800000000) return 5;
  let n = 5;
  v = Math.floor(v / 0x800000000);
  while (v > 0) {
    n++;
    v = Math.floor(v / 128);
  }
  return n;
}

/** A length-delimited field's size: tag, length and body. */
function lenField(size: number): number {
  return 1 + varintSize(size) + size;
}

function strSize(s: string): number {
  // ASCII strings are the rule (names, header names and digits); byteLength for the rest
  const n = s.length;
  for (let i = 0; i < n; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, 'utf8');
  return n;
}

/** A non-negative integer for a uint32 field (clamped; the service's figures are in range). */
function u32(v: number): number {
  return v >= 0xffffffff ? 0xffffffff : v > 0 ? Math.floor(v) : 0;
}

/** A non-negative integer for an int64 field, up to 2^53. */
function u53(v: number): number {
  return v >= Number.MAX_SAFE_INTEGER ? Number.MAX_SAFE_INTEGER : v > 0 ? Math.floor(v) : 0;
}

class Writer {
  buf: Buffer = EMPTY;
  pos = 0;

  varint(v: number): void {
    const buf = this.buf;
    let pos = this.pos;
    while (v > 0x7fffffff) {
      buf[pos++] = (v % 128) | 0x80;
      v = Math.floor(v / 128);
    }
    while (v > 0x7f) {
      buf[pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[pos++] = v;
    this.pos = pos;
  }

  byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  string(s: string, size: number): void {
    this.varint(size);
    if (size === s.length) {
      const buf = this.buf;
      let pos = this.pos;
      for (let i = 0; i < size; i++) buf[pos++] = s.charCodeAt(i);
      this.pos = pos;
    } else this.pos += this.buf.write(s, this.pos, size, 'utf8');
  }
}

const writer = new Writer();

/** Sizes of one response's nested messages, in write order (reused: encoding is never re-entered). */
const sizes: number[] = [];

/**
 * Encodes a `RateLimitResponse` (the service's objects) after `prefix`
 * bytes left zero for the caller. Zero values are left out (proto3).
 */
export function encodeRateLimitResponse(res: RlsResponse, prefix = 0): Buffer {
  let k = 0;
  let total = 0;
  const overall: number = CODE[res.overall_code] ?? 0;
  if (overall !== 0) total += 1 + varintSize(overall);
  const statuses = res.statuses;
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i]!;
    const at = k++;
    let size = 0;
    const code: number = CODE[s.code] ?? 0;
    if (code !== 0) size += 1 + varintSize(code);
    const cl = s.current_limit;
    if (cl !== undefined) {
      let c = 0;
      const rpu = u32(cl.requests_per_unit);
      if (rpu !== 0) c += 1 + varintSize(rpu);
      const unit = UNIT[cl.unit as keyof typeof UNIT] ?? 0;
      if (unit !== 0) c += 1 + varintSize(unit);
      if (cl.name !== '') {
        const n = strSize(cl.name);
        sizes[k++] = n;
        c += lenField(n);
      }
      sizes[k++] = c;
      size += lenField(c);
    }
    const rem = u32(s.limit_remaining);
    if (rem !== 0) size += 1 + varintSize(rem);
    const d = s.duration_until_reset;
    if (d !== undefined) {
      let c = 0;
      const sec = u53(d.seconds);
      if (sec !== 0) c += 1 + varintSize(sec);
      const nanos = u32(d.nanos);
      if (nanos !== 0) c += 1 + varintSize(nanos);
      sizes[k++] = c;
      size += lenField(c);
    }
    sizes[at] = size;
    total += lenField(size);
  }
  const headers = res.response_headers_to_add;
  for (let i = 0; i < headers.length; i++) {
    const h = headers[i]!;
    const at = k++;
    let size = 0;
    if (h.key !== '') {
      const n = strSize(h.key);
      sizes[k++] = n;
      size += lenField(n);
    }
    if (h.value !== '') {
      const n = strSize(h.value);
      sizes[k++] = n;
      size += lenField(n);
    }
    sizes[at] = size;
    total += lenField(size);
  }

  const w = writer;
  const buf = Buffer.allocUnsafe(prefix + total);
  buf.fill(0, 0, prefix);
  w.buf = buf;
  w.pos = prefix;
  k = 0;
  if (overall !== 0) {
    w.byte(0x08);
    w.varint(overall);
  }
  for (let i = 0; i < statuses.length; i++) {
    const s = statuses[i]!;
    w.byte(0x12);
    w.varint(sizes[k++]!);
    const code: number = CODE[s.code] ?? 0;
    if (code !== 0) {
      w.byte(0x08);
      w.varint(code);
    }
    const cl = s.current_limit;
    if (cl !== undefined) {
      // the name's size was stored before the limit's
      const nameSize = cl.name === '' ? -1 : sizes[k++]!;
      w.byte(0x12);
      w.varint(sizes[k++]!);
      const rpu = u32(cl.requests_per_unit);
      if (rpu !== 0) {
        w.byte(0x08);
        w.varint(rpu);
      }
      const unit = UNIT[cl.unit as keyof typeof UNIT] ?? 0;
      if (unit !== 0) {
        w.byte(0x10);
        w.varint(unit);
      }
      if (nameSize >= 0) {
        w.byte(0x1a);
        w.string(cl.name, nameSize);
      }
    }
    const rem = u32(s.limit_remaining);
    if (rem !== 0) {
      w.byte(0x18);
      w.varint(rem);
    }
    const d = s.duration_until_reset;
    if (d !== undefined) {
      w.byte(0x22);
      w.varint(sizes[k++]!);
      const sec = u53(d.seconds);
      if (sec !== 0) {
        w.byte(0x08);
        w.varint(sec);
      }
      const nanos = u32(d.nanos);
      if (nanos !== 0) {
        w.byte(0x10);
        w.varint(nanos);
      }
    }
  }
  for (let i = 0; i < headers.length; i++) {
    const h = headers[i]!;
    w.byte(0x1a);
    w.varint(sizes[k++]!);
    if (h.key !== '') {
      w.byte(0x0a);
      w.string(h.key, sizes[k++]!);
    }
    if (h.value !== '') {
      w.byte(0x12);
      w.string(h.value, sizes[k++]!);
    }
  }
  w.buf = EMPTY;
  if (w.pos !== buf.length)
    throw new Error(`RateLimitResponse encoding: wrote ${w.pos} of ${buf.length} bytes`);
  return buf;
}

/** A health status name of `grpc.health.v1.HealthCheckResponse.ServingStatus`. */
export type ServingStatus = keyof typeof SERVING;

/** Encodes a `grpc.health.v1.HealthCheckResponse` after `prefix` zero bytes. */
export function encodeHealthCheckResponse(status: ServingStatus, prefix = 0): Buffer {
  const v = SERVING[status];
  const buf = Buffer.alloc(prefix + (v === 0 ? 0 : 2));
  if (v !== 0) {
    buf[prefix] = 0x08;
    buf[prefix + 1] = v;
  }
  return buf;
}

/** Encodes a `grpc.health.v1.HealthListResponse` after `prefix` zero bytes. */
export function encodeHealthListResponse(statuses: ReadonlyMap<string, ServingStatus>, prefix = 0): Buffer {
  let total = 0;
  const entries: [string, number, number, number][] = [];
  for (const [name, status] of statuses) {
    const nameSize = strSize(name);
    const v = SERVING[status];
    const valueSize = v === 0 ? 0 : 2;
    const size = (nameSize === 0 ? 0 : lenField(nameSize)) + lenField(valueSize);
    entries.push([name, nameSize, v, size]);
    total += lenField(size);
  }
  const w = writer;
  const buf = Buffer.alloc(prefix + total);
  w.buf = buf;
  w.pos = prefix;
  for (const [name, nameSize, v, size] of entries) {
    w.byte(0x0a);
    w.varint(size);
    if (nameSize !== 0) {
      w.byte(0x0a);
      w.string(name, nameSize);
    }
    w.byte(0x12);
    w.varint(v === 0 ? 0 : 2);
    if (v !== 0) {
      w.byte(0x08);
      w.varint(v);
    }
  }
  w.buf = EMPTY;
  return buf;
}
