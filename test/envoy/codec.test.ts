/**
 * The server's hand-written protobuf codec (src/envoy/codec.ts) against the
 * vendored protos as @grpc/proto-loader (protobufjs) loads them: the field
 * numbers and types it uses, and the same messages from the same bytes in
 * both directions.
 */
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';
import fc from 'fast-check';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import { describe, expect, it } from 'vitest';
import {
  decodeEmpty,
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  ENUMS,
  encodeHealthCheckResponse,
  encodeHealthListResponse,
  encodeRateLimitResponse,
  SCHEMA,
  type ServingStatus,
} from '../../src/envoy/codec.js';
import { RLS_SERVICE, rlsPackageDefinition } from '../../src/envoy/grpc-server.js';
import {
  MAX_DESCRIPTORS,
  MAX_ENTRIES,
  type RlsResponse,
  tooManyDescriptors,
  tooManyEntries,
} from '../../src/envoy/service.js';

type Serialize = (v: unknown) => Buffer;
type Deserialize = (b: Buffer) => unknown;
interface MethodDef {
  requestSerialize: Serialize;
  requestDeserialize: Deserialize;
  responseSerialize: Serialize;
  responseDeserialize: Deserialize;
}

const rls = rlsPackageDefinition();
const shouldRateLimit = (rls[RLS_SERVICE] as unknown as Record<string, MethodDef>).ShouldRateLimit!;
const healthDef = loadSync(healthProtoPath, {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});
const healthMethods = healthDef['grpc.health.v1.Health'] as unknown as Record<string, MethodDef>;

// --- the schema against the protos ---------------------------------------------------------

interface FieldProto {
  name: string;
  number: number;
  type: string;
  typeName: string;
}
interface MessageProto {
  name: string;
  field: FieldProto[];
  nestedType: MessageProto[];
  options?: { mapEntry?: boolean } | null;
  enumType: { name: string; value: { name: string; number: number }[] }[];
}

/** Every message and enum of a package definition by full name, nested ones included. */
function index(def: PackageDefinition): {
  messages: Map<string, MessageProto>;
  enums: Map<string, Map<string, number>>;
} {
  const messages = new Map<string, MessageProto>();
  const enums = new Map<string, Map<string, number>>();
  const add = (full: string, m: MessageProto) => {
    messages.set(full, m);
    // protobufjs names a map's entry message after the field (`Statuses`), protoc `StatusesEntry`
    for (const n of m.nestedType) add(`${full}.${n.name}${n.options?.mapEntry ? 'Entry' : ''}`, n);
    for (const e of m.enumType)
      enums.set(`${full}.${e.name}`, new Map(e.value.map((v) => [v.name, v.number])));
  };
  for (const [name, entry] of Object.entries(def)) {
    const e = entry as { format?: string; type?: unknown };
    if (e.format === 'Protocol Buffer 3 DescriptorProto') add(name, e.type as MessageProto);
    else if (e.format === 'Protocol Buffer 3 EnumDescriptorProto') {
      const t = e.type as MessageProto['enumType'][number];
      enums.set(name, new Map(t.value.map((v) => [v.name, v.number])));
    }
  }
  return { messages, enums };
}

/** A field's type name resolved as protobuf scopes resolve it, from inside message `scope`. */
function resolve(typeName: string, scope: string, known: (n: string) => boolean): string {
  if (typeName.startsWith('.')) return typeName.slice(1);
  const parts = scope.split('.');
  for (let i = parts.length; i >= 0; i--) {
    const candidate = [...parts.slice(0, i), typeName].join('.');
    if (known(candidate)) return candidate;
    if (known(`${candidate}Entry`)) return `${candidate}Entry`;
  }
  throw new Error(`cannot resolve ${typeName} from ${scope}`);
}

const SCALAR: Record<string, string> = {
  TYPE_STRING: 'string',
  TYPE_UINT32: 'uint32',
  TYPE_UINT64: 'uint64',
  TYPE_INT64: 'int64',
  TYPE_INT32: 'int32',
};

describe('the codec schema is the vendored protos', () => {
  const all = [index(rls), index(healthDef)];
  const message = (n: string) => all.map((x) => x.messages.get(n)).find((m) => m !== undefined);
  const enumOf = (n: string) => all.map((x) => x.enums.get(n)).find((m) => m !== undefined);
  const known = (n: string) => message(n) !== undefined || enumOf(n) !== undefined;

  it.each(Object.entries(SCHEMA))('%s: every field the codec uses, by number and type', (name, fields) => {
    const m = message(name);
    expect(m, name).toBeDefined();
    for (const [field, [num, type]] of Object.entries(fields as Record<string, readonly [number, string]>)) {
      const f = m!.field.find((x) => x.name === field);
      expect(f, `${name}.${field}`).toBeDefined();
      expect(f!.number, `${name}.${field}`).toBe(num);
      const actual = SCALAR[f!.type] ?? resolve(f!.typeName, name, known);
      expect(actual, `${name}.${field}`).toBe(type);
    }
  });

  it.each(Object.entries(ENUMS))('%s: the same names and numbers', (name, values) => {
    const e = enumOf(name);
    expect(e, name).toBeDefined();
    expect(Object.fromEntries(e!)).toEqual(values);
  });
});

// --- requests: bytes from protobufjs, decoded by both ---------------------------------------

const text = fc.string({ unit: 'grapheme', maxLength: 24 });
const uint32 = fc.integer({ min: 0, max: 0xffff_ffff });
const uint64 = fc.oneof(
  fc.integer({ min: 0, max: 1000 }),
  fc.maxSafeNat(),
  fc.constantFrom(2 ** 53, 2 ** 62, 2 ** 64 - 2048),
);
const override = fc.record({
  requests_per_unit: uint32,
  unit: fc.constantFrom('UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR'),
});
const descriptor = fc.record(
  {
    entries: fc.array(fc.record({ key: text, value: text }), { maxLength: 4 }),
    limit: override,
    hits_addend: fc.record({ value: uint64 }),
  },
  { requiredKeys: ['entries'] },
);
const request = fc.record(
  { domain: text, descriptors: fc.array(descriptor, { maxLength: 5 }), hits_addend: uint32 },
  { requiredKeys: [] },
);

function decodeOurs(bytes: Buffer): unknown {
  const r = decodeRateLimitRequest(bytes);
  if (!r.ok) throw new Error(`${r.code}: ${r.message}`);
  return r.value;
}

/** An unknown field of any wire type (groups well formed), as bytes. */
const unknownField = fc
  .tuple(
    fc.integer({ min: 4, max: 2 ** 29 - 1 }),
    fc.constantFrom(0, 1, 2, 3, 5),
    fc.uint8Array({ maxLength: 12 }),
    fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  )
  .map(([field, wt, bytes, big]) => {
    const tag = varint(BigInt(field * 8 + wt));
    switch (wt) {
      case 0:
        return Buffer.concat([tag, varint(big)]);
      case 1:
        return Buffer.concat([tag, Buffer.alloc(8, 7)]);
      case 2:
        return Buffer.concat([tag, varint(BigInt(bytes.length)), Buffer.from(bytes)]);
      case 3:
        // a group holding a varint field, then its end with the same field number
        return Buffer.concat([tag, varint(8n), varint(big), varint(BigInt(field * 8 + 4))]);
      default:
        return Buffer.concat([tag, Buffer.alloc(4, 9)]);
    }
  });

function varint(v: bigint): Buffer {
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
}

/** The top-level fields of an encoded message, as slices. */
function topFields(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let pos = 0;
  const read = () => {
    let v = 0;
    let shift = 0;
    for (;;) {
      if (pos >= bytes.length) throw new Error('truncated');
      const b = bytes[pos++]!;
      v += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if (b < 0x80) return v;
    }
  };
  while (pos < bytes.length) {
    const start = pos;
    const tag = read();
    const wt = tag & 7;
    if (wt === 0) read();
    else if (wt === 2) {
      const n = read(); // read first: `pos += read()` would add to the position before the length
      pos += n;
    } else throw new Error(`unexpected wire type ${wt}`);
    out.push(bytes.subarray(start, pos));
  }
  return out;
}

describe('RateLimitRequest: decoded as protobufjs decodes it', () => {
  it('from protobufjs encodings of random requests', () => {
    fc.assert(
      fc.property(request, (req) => {
        const bytes = shouldRateLimit.requestSerialize(req);
        expect(decodeOurs(bytes)).toEqual(shouldRateLimit.requestDeserialize(bytes));
      }),
      { numRuns: 500, seed: 12 },
    );
  });

  it('with unknown fields of every wire type between the fields, and fields repeated (the last one wins)', () => {
    fc.assert(
      fc.property(
        request,
        fc.array(unknownField, { maxLength: 6 }),
        fc.nat(),
        fc.boolean(),
        (req, unknown, seed, twice) => {
          const fields = topFields(shouldRateLimit.requestSerialize(req));
          if (twice && fields.length > 0) fields.push(fields[seed % fields.length]!);
          for (const u of unknown) fields.splice(seed++ % (fields.length + 1), 0, u);
          const bytes = Buffer.concat(fields);
          expect(decodeOurs(bytes)).toEqual(shouldRateLimit.requestDeserialize(bytes));
        },
      ),
      { numRuns: 500, seed: 13 },
    );
  });

  it('every prefix of an encoding: the message so far at a field boundary, else INTERNAL', () => {
    fc.assert(
      fc.property(request, (req) => {
        const bytes = shouldRateLimit.requestSerialize(req);
        const boundaries = new Set([0]);
        let at = 0;
        for (const f of topFields(bytes)) {
          at += f.length;
          boundaries.add(at);
        }
        for (let n = 0; n < bytes.length; n++) {
          const part = bytes.subarray(0, n);
          const ours = decodeRateLimitRequest(part);
          if (boundaries.has(n))
            expect(ours.ok && ours.value, `prefix ${n}`).toEqual(shouldRateLimit.requestDeserialize(part));
          // (protobufjs reads a string cut short as a shorter string; ours refuses it)
          else expect(ours, `prefix ${n}`).toMatchObject({ ok: false, code: 'INTERNAL' });
        }
      }),
      { numRuns: 100, seed: 14 },
    );
  });

  it('non-canonical varints: overlong encodings and a uint32 sent as 10 bytes (its low 32 bits)', () => {
    const bytes = Buffer.from([
      0x0a,
      0x81,
      0x00,
      0x61, // domain "a", its length overlong
      0x18,
      0xff,
      0xff,
      0xff,
      0xff,
      0xff,
      0xff,
      0xff,
      0xff,
      0xff,
      0x01, // hits_addend -1 as an int64
      0x12,
      0x0d,
      0x0a,
      0x06,
      0x0a,
      0x01,
      0x6b,
      0x12,
      0x01,
      0x76,
      0x1a,
      0x03,
      0x08,
      0x80,
      0x00, // descriptor
    ]);
    expect(decodeOurs(bytes)).toEqual(shouldRateLimit.requestDeserialize(bytes));
    expect(decodeOurs(bytes)).toMatchObject({ domain: 'a', hits_addend: 0xffff_ffff });
  });

  it('refuses what is not a RateLimitRequest with INTERNAL, naming the problem; never throws', () => {
    const cases: [number[], RegExp][] = [
      [[0x0a, 0x05, 0x61], /length past the end/],
      [[0x18, 0x80], /truncated varint/],
      [[0x18, ...new Array(10).fill(0xff), 0x01], /longer than 10 bytes/],
      [[0x00, 0x01], /field number 0/],
      [[0x26], /invalid wire type 6/],
      [[0x24], /end of group without its start/],
      [[0x23, 0x08, 0x01], /unterminated group/],
      [[0x23, 0x2c], /mismatched end of group/],
      [[0xff, 0xff, 0xff, 0xff, 0x0f, 0x01], /./],
    ];
    for (const [bytes, message] of cases) {
      const r = decodeRateLimitRequest(Buffer.from(bytes));
      expect(r.ok, bytes.join(',')).toBe(false);
      if (!r.ok) {
        expect(r.code).toBe('INTERNAL');
        expect(r.message).toMatch(/^cannot decode the RateLimitRequest: /);
        expect(r.message).toMatch(message);
      }
    }
    // groups nested past the cap
    const deep = Buffer.from([...new Array(100).fill(0x23), ...new Array(100).fill(0x24)]);
    expect(decodeRateLimitRequest(deep)).toMatchObject({ ok: false, message: /nested too deep/ });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const r = decodeRateLimitRequest(Buffer.from(bytes));
        expect(typeof r.ok).toBe('boolean');
      }),
      { numRuns: 2000, seed: 15 },
    );
  });

  it('caps descriptors and entries as the service does, before building them', () => {
    const one = { entries: [{ key: 'k', value: 'v' }] };
    const many = shouldRateLimit.requestSerialize({
      domain: 'd',
      descriptors: new Array(MAX_DESCRIPTORS + 5).fill(one),
    });
    expect(decodeRateLimitRequest(many)).toEqual({
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: tooManyDescriptors(MAX_DESCRIPTORS + 5),
    });
    const wide = shouldRateLimit.requestSerialize({
      domain: 'd',
      descriptors: [one, { entries: new Array(MAX_ENTRIES + 1).fill(one.entries[0]) }],
    });
    expect(decodeRateLimitRequest(wide)).toEqual({
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: tooManyEntries(1, MAX_ENTRIES + 1),
    });
    const atCap = shouldRateLimit.requestSerialize({
      domain: 'd',
      descriptors: new Array(MAX_DESCRIPTORS).fill({ entries: new Array(MAX_ENTRIES).fill(one.entries[0]) }),
    });
    expect(decodeRateLimitRequest(atCap).ok).toBe(true);
  });
});

// --- responses: our bytes, decoded by protobufjs ---------------------------------------------

const code = fc.constantFrom('OK', 'OVER_LIMIT') as fc.Arbitrary<'OK' | 'OVER_LIMIT'>;
const status = fc.record(
  {
    code,
    current_limit: fc.record({
      name: text,
      requests_per_unit: uint32,
      unit: fc.constantFrom('SECOND', 'MINUTE', 'HOUR', 'DAY', 'WEEK', 'MONTH', 'YEAR'),
    }),
    limit_remaining: uint32,
    duration_until_reset: fc.record({
      seconds: fc.oneof(fc.integer({ min: 0, max: 100_000 }), fc.maxSafeNat()),
      nanos: fc.integer({ min: 0, max: 999_999_999 }),
    }),
  },
  { requiredKeys: ['code', 'limit_remaining'] },
);
const response: fc.Arbitrary<RlsResponse> = fc.record({
  overall_code: code,
  statuses: fc.array(status, { maxLength: 5 }),
  response_headers_to_add: fc.array(fc.record({ key: text, value: text }), { maxLength: 3 }),
});

describe('RateLimitResponse: our bytes read by protobufjs as the response', () => {
  it('random responses: the same object as protobufjs encoding it', () => {
    fc.assert(
      fc.property(response, (res) => {
        const ours = shouldRateLimit.responseDeserialize(encodeRateLimitResponse(res));
        expect(ours).toEqual(shouldRateLimit.responseDeserialize(shouldRateLimit.responseSerialize(res)));
        expect(ours).toMatchObject(res);
      }),
      { numRuns: 1000, seed: 16 },
    );
  });

  it('leaves the prefix bytes zero for the gRPC header', () => {
    const res: RlsResponse = { overall_code: 'OK', statuses: [], response_headers_to_add: [] };
    const framed = encodeRateLimitResponse(res, 5);
    expect([...framed]).toEqual([0, 0, 0, 0, 0, 0x08, 0x01]);
  });
});

describe('grpc.health.v1 messages', () => {
  it('HealthCheckRequest, HealthListRequest decoded; HealthCheckResponse, HealthListResponse encoded', () => {
    const { Check, List } = healthMethods as Record<string, MethodDef>;
    fc.assert(
      fc.property(text, (service) => {
        const bytes = Check!.requestSerialize({ service });
        expect(decodeHealthCheckRequest(bytes)).toEqual({ ok: true, value: { service } });
      }),
      { numRuns: 200, seed: 17 },
    );
    const statuses: ServingStatus[] = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'];
    for (const s of statuses)
      expect(Check!.responseDeserialize(encodeHealthCheckResponse(s))).toEqual({ status: s });
    expect(decodeEmpty(List!.requestSerialize({}), 'HealthListRequest')).toEqual({ ok: true, value: {} });
    const map = new Map<string, ServingStatus>([
      ['', 'SERVING'],
      [RLS_SERVICE, 'NOT_SERVING'],
      ['x', 'UNKNOWN'],
    ]);
    expect(List!.responseDeserialize(encodeHealthListResponse(map))).toEqual({
      statuses: {
        '': { status: 'SERVING' },
        [RLS_SERVICE]: { status: 'NOT_SERVING' },
        x: { status: 'UNKNOWN' },
      },
    });
    expect(decodeHealthCheckRequest(Buffer.from([0x0a, 0x09]))).toMatchObject({
      ok: false,
      code: 'INTERNAL',
    });
  });
});
