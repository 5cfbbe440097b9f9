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

import { ENUMS } from './codec-schema.js';
import { MAX_DESCRIPTORS, MAX_ENTRIES, tooManyDescriptors, tooManyEntries } from './service.js';

/** Wire types. */
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const SGROUP = 3;
const EGROUP = 4;
const I32 = 5;

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

export {
  encodeHealthCheckResponse,
  encodeHealthListResponse,
  encodeRateLimitResponse,
  type ServingStatus,
} from './codec-encode.js';
export { ENUMS, SCHEMA } from './codec-schema.js';
