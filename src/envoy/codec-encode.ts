/**
 * The encoding half of the RLS/health codec (./codec.ts has the schema and the decoders):
 * sizes first, then one buffer written front to back; the first `prefix` bytes are left for
 * the caller (the gRPC message header).
 */
import { ENUMS } from './codec-schema.js';
import type { RlsResponse } from './service.js';
import type { JsonValue } from './yaml-reader.js';

const EMPTY = Buffer.alloc(0);

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

  const meta = res.dynamic_metadata === undefined ? undefined : encodeStruct(res.dynamic_metadata);
  if (meta !== undefined) total += lenField(meta.length);

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
  if (meta !== undefined) {
    w.byte(0x32);
    w.varint(meta.length);
    meta.copy(w.buf, w.pos);
    w.pos += meta.length;
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

/** Tag and length of a LEN field, then its bytes. */
function lenBytes(tag: number, body: Buffer): Buffer {
  const head: number[] = [tag];
  let n = body.length;
  while (n > 0x7f) {
    head.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  head.push(n);
  return Buffer.concat([Buffer.from(head), body]);
}

/** A google.protobuf.Value. */
function encodeValue(v: JsonValue): Buffer {
  if (v === null) return Buffer.from([0x08, 0x00]);
  if (typeof v === 'number') {
    const b = Buffer.allocUnsafe(9);
    b[0] = 0x11;
    b.writeDoubleLE(v, 1);
    return b;
  }
  if (typeof v === 'string') return lenBytes(0x1a, Buffer.from(v, 'utf8'));
  if (typeof v === 'boolean') return Buffer.from([0x20, v ? 1 : 0]);
  if (Array.isArray(v)) return lenBytes(0x32, Buffer.concat(v.map((x) => lenBytes(0x0a, encodeValue(x)))));
  return lenBytes(0x2a, encodeStruct(v));
}

/**
 * A google.protobuf.Struct (RateLimitResponse.dynamic_metadata) from a JSON
 * object. Not on the hot path: only with `grpc.dynamicMetadata`.
 */
export function encodeStruct(obj: { readonly [key: string]: JsonValue }): Buffer {
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(obj)) {
    parts.push(
      lenBytes(0x0a, Buffer.concat([lenBytes(0x0a, Buffer.from(k, 'utf8')), lenBytes(0x12, encodeValue(v))])),
    );
  }
  return Buffer.concat(parts);
}
