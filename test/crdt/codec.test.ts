import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeMessage,
  encodeGossip,
  encodeSyncRequest,
  encodeSyncResponse,
  FORMAT,
  type GossipMessage,
  LIMITS,
  MAGIC,
  peekGossipReach,
  type SyncResponse,
  TYPE_GOSSIP,
  TYPE_SYNC_REQUEST,
  TYPE_SYNC_RESPONSE,
  versionBytes,
  type WireEntry,
  Writer,
} from '../../src/crdt/codec.js';

const V = '0123456789abcdef';
const OTHER = 'fedcba9876543210';
/** A policy table: entries index it. */
const TABLE = [
  { name: 'api', version: V },
  { name: 'login', version: OTHER },
  { name: 'ip.global:v2', version: '00000000000000ff' },
];

const gossip: Omit<GossipMessage, 'type'> = {
  policies: TABLE,
  seq: 42,
  sentAt: 1_700_000_000_123.5,
  members: 3,
  reach: 3,
  repair: 40,
  nacks: [
    { origin: 'node-b', have: 7, seen: 9 },
    { origin: '12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo', have: 0, seen: 0 },
  ],
  entries: [
    {
      origin: 0,
      policy: 0,
      key: 'ip:10.0.0.1',
      base: 170_000_000_000,
      counts: [1, 0, 300, 2 ** 40],
      demand: 77,
    },
    { origin: 0, policy: 2, key: 'acct:ü€😀', base: 0, counts: [5], demand: 0 },
    // a demand update without counts
    { origin: 0, policy: 1, key: 'd', base: 0, counts: [], demand: 12 },
  ],
};

/**
 * What an entry decodes to: only non-zero counts travel, so its counts run from the first
 * non-zero one to the last, and an entry without any takes the previous entry's base.
 */
function normal(entries: readonly WireEntry[]): WireEntry[] {
  let prev = 0;
  return entries.map((e) => {
    const first = e.counts.findIndex((c) => c > 0);
    // a decoded entry has a skew per count (0 where none was given)
    const skews = e.counts.map((c, i) => (c > 0 ? (e.skews?.[i] ?? 0) : 0));
    if (first < 0) return { ...e, base: prev, counts: [], skews: [] };
    let last = e.counts.length - 1;
    while (e.counts[last] === 0) last--;
    prev = e.base + first;
    return { ...e, base: prev, counts: e.counts.slice(first, last + 1), skews: skews.slice(first, last + 1) };
  });
}

const syncRes: Omit<SyncResponse, 'type'> = {
  policies: TABLE,
  t0: 1000.25,
  t1: 1017.75,
  origins: ['node-a', 'node-b'],
  entries: [
    { origin: 0, policy: 1, key: 'k', base: 9, counts: [1, 2, 3], demand: 10 },
    { origin: 1, policy: 0, key: 'k2', base: 10, counts: [0, 0, 4], demand: 3 },
  ],
};

function expectReason(bytes: Uint8Array, reason: string): void {
  let res: ReturnType<typeof decodeMessage> | undefined;
  expect(() => {
    res = decodeMessage(bytes);
  }).not.toThrow();
  expect(res).toEqual({ ok: false, reason });
}

/** A gossip message written field by field, to build malformed ones. */
function rawGossip(opts: {
  magic?: number;
  format?: number;
  type?: number;
  /** Rows of the policy table, written raw (name bytes, 8 version bytes). */
  table?: { name: string | Uint8Array; version?: string }[];
  /** The table's row count as written (default: its length). */
  rows?: number;
  seq?: number;
  sentAt?: number;
  members?: number;
  reach?: number;
  repair?: number;
  nacks?: { origin: string; have: number; seen: number }[];
  nackCount?: number;
  n?: number;
  entries?: (w: Writer) => void;
  tail?: number[];
}): Uint8Array {
  const w = new Writer();
  w.u8(opts.magic ?? MAGIC);
  w.u8(opts.format ?? FORMAT);
  w.u8(opts.type ?? TYPE_GOSSIP);
  const table = opts.table ?? [{ name: 'api', version: V }];
  w.varint(opts.rows ?? table.length);
  for (const row of table) {
    const name = typeof row.name === 'string' ? new TextEncoder().encode(row.name) : row.name;
    w.varint(name.length);
    w.bytes(name);
    w.bytes(versionBytes(row.version ?? V));
  }
  w.varint(opts.seq ?? 1);
  w.f64(opts.sentAt ?? 5);
  w.varint(opts.members ?? 1);
  w.varint(opts.reach ?? 1);
  w.varint(opts.repair ?? 0);
  const nacks = opts.nacks ?? [];
  w.varint(opts.nackCount ?? nacks.length);
  for (const x of nacks) {
    w.str(x.origin);
    w.varint(x.have);
    w.varint(x.seen);
  }
  w.varint(opts.n ?? 0);
  opts.entries?.(w);
  for (const b of opts.tail ?? []) w.u8(b);
  return w.finish();
}

/**
 * One gossip entry (no origin field) written raw: `base` is the zigzag delta as written,
 * `counts` the listed counts, each after `skips[i]` (default 0) but the first.
 */
function rawEntry(
  w: Writer,
  e: {
    policy?: number;
    key?: Uint8Array;
    counts?: number[];
    skips?: number[];
    skews?: number[];
    n?: number;
    base?: number;
    demand?: number;
  },
): void {
  w.varint(e.policy ?? 0);
  const key = e.key ?? new TextEncoder().encode('k');
  w.varint(key.length);
  w.bytes(key);
  w.zigzag(e.base ?? 0);
  const counts = e.counts ?? [1];
  w.varint(e.n ?? counts.length);
  counts.forEach((c, i) => {
    if (i > 0) w.varint(e.skips?.[i] ?? 0);
    w.varint(c);
    w.varint(e.skews?.[i] ?? 0);
  });
  w.varint(e.demand ?? 0);
}

describe('codec round trips', () => {
  it('gossip', () => {
    const bytes = encodeGossip(gossip);
    expect(bytes[0]).toBe(MAGIC);
    expect(bytes[1]).toBe(FORMAT);
    expect(bytes[2]).toBe(TYPE_GOSSIP);
    expect(decodeMessage(bytes)).toEqual({
      ok: true,
      message: { type: TYPE_GOSSIP, ...gossip, entries: normal(gossip.entries) },
    });
  });

  it('gossip heartbeat (no entries; repair and nacks default to none)', () => {
    const m = { policies: [], seq: 0, sentAt: -5, members: 1, reach: 1, entries: [] };
    expect(decodeMessage(encodeGossip(m))).toEqual({
      ok: true,
      message: { type: TYPE_GOSSIP, ...m, repair: 0, nacks: [] },
    });
  });

  it('sync request', () => {
    const bytes = encodeSyncRequest({ t0: 1234.5 });
    expect(decodeMessage(bytes)).toEqual({
      ok: true,
      message: { type: TYPE_SYNC_REQUEST, t0: 1234.5 },
    });
  });

  it('sync response', () => {
    const bytes = encodeSyncResponse(syncRes);
    expect(decodeMessage(bytes)).toEqual({
      ok: true,
      message: { type: TYPE_SYNC_RESPONSE, ...syncRes, entries: normal(syncRes.entries) },
    });
    // zeros do not travel: [0, 0, 4] from bucket 10 is 4 in bucket 12
    expect(normal(syncRes.entries)[1]).toMatchObject({ base: 12, counts: [4] });
  });

  it('format 4 and 5: sparse entries, the base delta-coded along the message, a skew per count', () => {
    const e = (base: number, counts: number[]): WireEntry => ({
      origin: 0,
      policy: 0,
      key: 'k',
      base,
      counts,
      demand: 1,
    });
    const m = { policies: [], seq: 1, sentAt: 0, members: 1, reach: 1, entries: [] as WireEntry[] };
    const size = (entries: WireEntry[]) => encodeGossip({ ...m, entries }).length;
    // policy, key (2), base delta, n, count, its skew, demand: 8 bytes, whatever the window
    expect(size([e(1_700_000_000, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3])]) - size([])).toBe(8 + 4);
    expect(size([e(1_700_000_000, [3]), e(1_700_000_000, [5])]) - size([e(1_700_000_000, [3])])).toBe(8);
    // a further count costs its skip, itself and its skew
    expect(size([e(5, [1, 0, 0, 2])]) - size([e(5, [1])])).toBe(3);
    // a skew is at most its count
    expectReason(
      rawGossip({ table: [{ name: 'api' }], n: 1, entries: (w) => rawEntry(w, { counts: [2], skews: [3] }) }),
      'bad-field',
    );
    const skewed = decodeMessage(
      rawGossip({
        table: [{ name: 'api' }],
        n: 1,
        entries: (w) => rawEntry(w, { counts: [2, 5], skews: [2, 1] }),
      }),
    );
    expect(skewed.ok && skewed.message.type === TYPE_GOSSIP && skewed.message.entries[0]!.skews).toEqual([
      2, 1,
    ]);
    // counts of zero are not accepted on the wire, nor a base delta without counts
    expectReason(
      rawGossip({ table: [{ name: 'api' }], n: 1, entries: (w) => rawEntry(w, { counts: [1, 0] }) }),
      'bad-field',
    );
    expectReason(
      rawGossip({ table: [{ name: 'api' }], n: 1, entries: (w) => rawEntry(w, { counts: [], base: 2 }) }),
      'bad-field',
    );
    expect(decodeMessage(rawGossip({ n: 1, entries: (w) => rawEntry(w, { counts: [], base: 0 }) })).ok).toBe(
      true,
    );
    // skips past the window, and a base past ±2^50
    expectReason(
      rawGossip({ n: 1, entries: (w) => rawEntry(w, { counts: [1, 1], skips: [0, LIMITS.counts] }) }),
      'bad-field',
    );
    expectReason(
      rawGossip({ n: 1, entries: (w) => rawEntry(w, { counts: [1, 1], skips: [0, LIMITS.counts - 1] }) }),
      'bad-field',
    );
    expect(
      decodeMessage(
        rawGossip({ n: 1, entries: (w) => rawEntry(w, { counts: [1, 1], skips: [0, LIMITS.counts - 2] }) }),
      ).ok,
    ).toBe(true);
    expectReason(rawGossip({ n: 1, entries: (w) => rawEntry(w, { base: LIMITS.bucket + 1 }) }), 'bad-field');
    expectReason(rawGossip({ n: 1, entries: (w) => rawEntry(w, { base: -LIMITS.bucket - 1 }) }), 'bad-field');
    expect(decodeMessage(rawGossip({ n: 1, entries: (w) => rawEntry(w, { base: LIMITS.bucket }) })).ok).toBe(
      true,
    );
    expect(decodeMessage(rawGossip({ n: 1, entries: (w) => rawEntry(w, { base: -LIMITS.bucket }) })).ok).toBe(
      true,
    );
  });

  it('nacks and repair: bounded, have <= seen, repair <= seq', () => {
    const nack = { origin: 'a', have: 1, seen: 2 };
    expect(decodeMessage(rawGossip({ seq: 5, repair: 5, nacks: [nack] })).ok).toBe(true);
    expectReason(rawGossip({ seq: 5, repair: 6 }), 'bad-field');
    expectReason(rawGossip({ nacks: [{ origin: 'a', have: 3, seen: 2 }] }), 'bad-field');
    expectReason(rawGossip({ nacks: [{ origin: 'x'.repeat(129), have: 0, seen: 0 }] }), 'bad-field');
    expectReason(rawGossip({ nacks: [{ origin: '', have: 0, seen: 0 }] }), 'bad-field');
    expectReason(rawGossip({ nackCount: LIMITS.nacks + 1 }), 'bad-field');
    expect(decodeMessage(rawGossip({ nackCount: 2, nacks: [nack] })).ok).toBe(false);
  });

  it('format 3: the policy table is carried whole, one 8-byte version per policy, and entries index it', () => {
    const bytes = encodeGossip(gossip);
    const dec = decodeMessage(bytes);
    expect(dec.ok && dec.message.type === TYPE_GOSSIP && dec.message.policies).toEqual(TABLE);
    // header (3) + rows (1) + per row: name length (1) + name + 8 version bytes
    const tableBytes = 1 + TABLE.reduce((n, r) => n + 1 + r.name.length + 8, 0);
    const noTable = encodeGossip({ ...gossip, policies: [], entries: [] });
    expect(encodeGossip({ ...gossip, entries: [] }).length - noTable.length).toBe(tableBytes - 1);
    expect(FORMAT).toBe(5);
  });

  const keyArb = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).filter((s) => {
    const n = new TextEncoder().encode(s).length;
    return n > 0 && n <= LIMITS.keyBytes;
  });
  const entryArb = (origins: number): fc.Arbitrary<WireEntry> =>
    fc.record({
      origin: origins > 0 ? fc.integer({ min: 0, max: origins - 1 }) : fc.constant(0),
      policy: fc.nat({ max: TABLE.length - 1 }),
      key: keyArb,
      base: fc.integer({ min: -(2 ** 49), max: 2 ** 49 }),
      counts: fc.array(fc.integer({ min: 0, max: LIMITS.count }), { minLength: 0, maxLength: LIMITS.counts }),
      demand: fc.integer({ min: 0, max: LIMITS.count }),
    });

  it('random gossip messages round-trip exactly (property)', () => {
    fc.assert(
      fc.property(
        fc.maxSafeNat(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer({ min: 1, max: LIMITS.origins }),
        fc.integer({ min: 1, max: LIMITS.origins }),
        fc.array(entryArb(0), { maxLength: 8 }),
        (seq, sentAt, members, reach, entries) => {
          const m = { policies: TABLE, seq, sentAt, members, reach, repair: 0, nacks: [], entries };
          const dec = decodeMessage(encodeGossip(m));
          expect(dec).toEqual({ ok: true, message: { type: TYPE_GOSSIP, ...m, entries: normal(entries) } });
        },
      ),
      { numRuns: 200 },
    );
  });

  it('random sync responses round-trip exactly (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.string({ minLength: 1, maxLength: 20 }).filter((s) => new TextEncoder().encode(s).length <= 128),
          {
            minLength: 1,
            maxLength: 5,
          },
        ),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer({ min: 0, max: 5 }),
        (origins, t0, t1, n) => {
          const entries = fc.sample(
            fc.array(entryArb(origins.length), { minLength: n, maxLength: n }),
            1,
          )[0]!;
          const m = { policies: TABLE, t0, t1, origins, entries };
          expect(decodeMessage(encodeSyncResponse(m))).toEqual({
            ok: true,
            message: { type: TYPE_SYNC_RESPONSE, ...m, entries: normal(entries) },
          });
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('codec rejects malformed input whole, never throwing', () => {
  const valid = [
    ['gossip', encodeGossip(gossip)],
    ['sync request', encodeSyncRequest({ t0: 3 })],
    ['sync response', encodeSyncResponse(syncRes)],
  ] as const;

  for (const [name, bytes] of valid) {
    it(`${name}: truncated at every byte offset`, () => {
      for (let n = 0; n < bytes.length; n++) {
        // also a copy, so the decoder cannot read past the end of a shared buffer
        expectReason(bytes.subarray(0, n), 'truncated');
        expectReason(bytes.slice(0, n), 'truncated');
      }
    });

    it(`${name}: trailing bytes`, () => {
      const longer = new Uint8Array(bytes.length + 1);
      longer.set(bytes);
      expectReason(longer, 'bad-field');
    });

    it(`${name}: a decode from an offset inside a larger buffer works`, () => {
      const big = new Uint8Array(bytes.length + 7);
      big.set(bytes, 7);
      expect(decodeMessage(big.subarray(7)).ok).toBe(true);
    });
  }

  it('an empty buffer is truncated', () => expectReason(new Uint8Array(0), 'truncated'));
  it('bad magic', () => expectReason(rawGossip({ magic: 0x53 }), 'bad-magic'));
  it('bad format (format 1, without reach, is refused too)', () => {
    expectReason(rawGossip({ format: FORMAT + 1 }), 'bad-format');
    expectReason(rawGossip({ format: 1 }), 'bad-format');
  });
  it('bad type', () => {
    expectReason(rawGossip({ type: 0 }), 'bad-type');
    expectReason(rawGossip({ type: 4 }), 'bad-type');
    expectReason(rawGossip({ type: 255 }), 'bad-type');
  });
  it('another version of a policy is not an error for the codec (the engine decides what merges)', () => {
    expect(decodeMessage(rawGossip({ table: [{ name: 'api', version: OTHER }] })).ok).toBe(true);
  });
  it('a bad policy table is refused whole', () => {
    // an entry indexing past the table
    const entry = (w: Writer) => rawEntry(w, { policy: 1 });
    expectReason(rawGossip({ n: 1, entries: entry }), 'bad-field');
    expect(decodeMessage(rawGossip({ n: 1, entries: (w) => rawEntry(w, { policy: 0 }) })).ok).toBe(true);
    // duplicate names, empty, too long, not a policy name, invalid UTF-8
    expectReason(rawGossip({ table: [{ name: 'api' }, { name: 'api' }] }), 'bad-field');
    expectReason(rawGossip({ table: [{ name: '' }] }), 'bad-field');
    expectReason(rawGossip({ table: [{ name: 'x'.repeat(LIMITS.policyNameBytes + 1) }] }), 'bad-field');
    expect(decodeMessage(rawGossip({ table: [{ name: 'x'.repeat(LIMITS.policyNameBytes) }] })).ok).toBe(true);
    expectReason(rawGossip({ table: [{ name: 'a b' }] }), 'bad-field');
    expectReason(rawGossip({ table: [{ name: new Uint8Array([0xff, 0xfe]) }] }), 'bad-field');
    // more rows than the cap, and a row count the frame does not hold
    expectReason(rawGossip({ table: [], rows: LIMITS.policies + 1 }), 'bad-field');
    expect(decodeMessage(rawGossip({ rows: 2 })).ok).toBe(false);
  });
  it('not a Uint8Array', () => {
    expectReason('hello' as unknown as Uint8Array, 'bad-field');
    expectReason(null as unknown as Uint8Array, 'bad-field');
    expectReason([MAGIC, FORMAT] as unknown as Uint8Array, 'bad-field');
  });

  it('oversized gossip (> 1 MiB) and oversized anything (> 16 MiB)', () => {
    const g = new Uint8Array(LIMITS.gossipBytes + 1);
    g.set(encodeGossip(gossip));
    expectReason(g, 'too-large');
    const s = new Uint8Array(LIMITS.syncBytes + 1);
    s.set(encodeSyncResponse(syncRes));
    expectReason(s, 'too-large');
    // a sync response may be larger than a gossip message
    const okSync = new Uint8Array(LIMITS.gossipBytes + 10);
    okSync.set(encodeSyncResponse(syncRes));
    expectReason(okSync, 'bad-field'); // trailing zeros, but not 'too-large'
  });

  it('too many entries (declared count over the cap)', () => {
    expectReason(rawGossip({ n: LIMITS.entries + 1 }), 'too-many-entries');
    const w = new Writer();
    w.u8(MAGIC);
    w.u8(FORMAT);
    w.u8(TYPE_SYNC_RESPONSE);
    w.varint(0); // an empty policy table
    w.f64(1);
    w.f64(2);
    w.varint(1);
    w.str('a');
    w.varint(LIMITS.entries + 1);
    expectReason(w.finish(), 'too-many-entries');
  });

  it('declared entries missing', () => expectReason(rawGossip({ n: 3 }), 'truncated'));

  it('members above the cap; 0 is a farewell', () => {
    expectReason(rawGossip({ members: LIMITS.origins + 1 }), 'bad-field');
    expect(decodeMessage(rawGossip({ members: LIMITS.origins })).ok).toBe(true);
    const bye = decodeMessage(rawGossip({ members: 0 }));
    expect(bye.ok && bye.message.type === TYPE_GOSSIP && bye.message.members).toBe(0);
  });

  it('reach 0 or above the cap', () => {
    expectReason(rawGossip({ reach: 0 }), 'bad-field');
    expectReason(rawGossip({ reach: LIMITS.origins + 1 }), 'bad-field');
    expect(decodeMessage(rawGossip({ reach: LIMITS.origins })).ok).toBe(true);
  });

  it('peekGossipReach reads reach from the header, and 0 from anything that is not a gossip header of this version', () => {
    expect(peekGossipReach(encodeGossip({ ...gossip, reach: 7 }))).toBe(7);
    expect(peekGossipReach(rawGossip({ reach: 5, n: 3 }))).toBe(5); // entries are not read
    expect(peekGossipReach(rawGossip({ reach: 5, table: [{ name: 'api' }, { name: 'api' }] }))).toBe(0);
    expect(peekGossipReach(rawGossip({ reach: 0 }))).toBe(0);
    expect(peekGossipReach(rawGossip({ members: LIMITS.origins + 1 }))).toBe(0);
    expect(peekGossipReach(rawGossip({ members: 0, reach: 3 }))).toBe(3); // a farewell
    expect(peekGossipReach(rawGossip({ format: 1 }))).toBe(0);
    expect(peekGossipReach(encodeSyncRequest({ t0: 1 }))).toBe(0);
    expect(peekGossipReach(encodeGossip(gossip).subarray(0, 20))).toBe(0);
    expect(peekGossipReach(new Uint8Array(0))).toBe(0);
    expect(peekGossipReach('x' as unknown as Uint8Array)).toBe(0);
  });

  it('a non-finite time', () => {
    expectReason(rawGossip({ sentAt: Number.NaN }), 'bad-field');
    expectReason(rawGossip({ sentAt: Number.POSITIVE_INFINITY }), 'bad-field');
    expectReason(encodeSyncRequest({ t0: Number.NEGATIVE_INFINITY }), 'bad-field');
  });

  it('key too long, zero-length key, invalid UTF-8', () => {
    const e = (key: Uint8Array) => rawGossip({ n: 1, entries: (w) => rawEntry(w, { key }) });
    expect(decodeMessage(e(new Uint8Array(LIMITS.keyBytes).fill(0x61))).ok).toBe(true);
    expectReason(e(new Uint8Array(LIMITS.keyBytes + 1).fill(0x61)), 'bad-key');
    expectReason(e(new Uint8Array(0)), 'bad-key');
    expectReason(e(new Uint8Array([0x61, 0xff, 0x62])), 'bad-key');
    expectReason(e(new Uint8Array([0xc3])), 'bad-key'); // a cut multi-byte sequence
    expectReason(e(new Uint8Array([0xed, 0xa0, 0x80])), 'bad-key'); // an encoded surrogate
  });

  it('counts: too many, too large, zero; demand too large', () => {
    const e = (x: Parameters<typeof rawEntry>[1]) => rawGossip({ n: 1, entries: (w) => rawEntry(w, x) });
    expect(decodeMessage(e({ counts: [] })).ok).toBe(true); // a demand update
    expectReason(e({ counts: [0] }), 'bad-field');
    expectReason(e({ counts: new Array(LIMITS.counts + 1).fill(1) }), 'bad-field');
    expect(decodeMessage(e({ counts: new Array(LIMITS.counts).fill(1) })).ok).toBe(true);
    expectReason(e({ counts: [LIMITS.count + 1] }), 'bad-field');
    expect(decodeMessage(e({ counts: [LIMITS.count] })).ok).toBe(true);
    expectReason(e({ demand: LIMITS.count + 1 }), 'bad-field');
    expectReason(e({ counts: [Number.MAX_SAFE_INTEGER] }), 'bad-field');
  });

  it('a varint longer than 8 bytes or above 2^53', () => {
    const tooLong = rawGossip({ seq: 0, table: [] }).slice(0, 4); // header and an empty policy table
    const w = new Writer();
    w.bytes(tooLong);
    for (let i = 0; i < 8; i++) w.u8(0xff);
    w.u8(0x01);
    expectReason(w.finish(), 'bad-field');
    const big = new Writer();
    big.bytes(tooLong);
    for (let i = 0; i < 7; i++) big.u8(0xff);
    big.u8(0x7f); // 2^56 - 1
    expectReason(big.finish(), 'bad-field');
  });

  it('sync response: no origins, an origin index out of range, a bad origin id', () => {
    const base = (origins: string[], entries: WireEntry[]) =>
      encodeSyncResponse({ ...syncRes, origins, entries });
    expectReason(base([], []), 'bad-field');
    expectReason(base(['a'], [{ ...syncRes.entries[0]!, origin: 1 }]), 'bad-field');
    expectReason(base(['x'.repeat(129)], []), 'bad-field');
    expect(decodeMessage(base(['x'.repeat(128)], [])).ok).toBe(true);
  });

  it('random bytes never throw (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const res = decodeMessage(bytes);
        if (!res.ok) expect(typeof res.reason).toBe('string');
      }),
      { numRuns: 2000 },
    );
  });

  it('random bytes after a valid header never throw and never half-decode (property)', () => {
    const head = encodeGossip({ ...gossip, policies: [{ name: 'api', version: V }], entries: [] }).subarray(
      0,
      11,
    );
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 200 }),
        fc.constantFrom(TYPE_GOSSIP, TYPE_SYNC_REQUEST, TYPE_SYNC_RESPONSE),
        (tail, type) => {
          const bytes = new Uint8Array(11 + tail.length);
          bytes.set(head);
          bytes[2] = type;
          bytes.set(tail, 11);
          const res = decodeMessage(bytes);
          if (res.ok) {
            // whatever decodes re-encodes to the same bytes (accepted whole, nothing invented)
            const m = res.message;
            const again =
              m.type === TYPE_GOSSIP
                ? encodeGossip(m)
                : m.type === TYPE_SYNC_REQUEST
                  ? encodeSyncRequest(m)
                  : encodeSyncResponse(m);
            expect(decodeMessage(again)).toEqual(res);
          } else expect(typeof res.reason).toBe('string');
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('random single-byte corruption of a valid message never throws (property)', () => {
    const bytes = encodeSyncResponse(syncRes);
    fc.assert(
      fc.property(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 0, max: 255 }), (i, b) => {
        const copy = bytes.slice();
        copy[i] = b;
        const res = decodeMessage(copy);
        expect(typeof res.ok).toBe('boolean');
      }),
      { numRuns: 1000 },
    );
  });
});

describe('Writer.str', () => {
  /** What str wrote before its ASCII path: the varint of the UTF-8 length, then the bytes. */
  function reference(s: string): Uint8Array {
    const b = new TextEncoder().encode(s);
    const w = new Writer();
    w.varint(b.length);
    w.bytes(b);
    return w.finish();
  }
  const str = (s: string) => {
    const w = new Writer();
    w.u8(7); // not at the buffer's start
    w.str(s);
    return w.finish().subarray(1);
  };

  it('writes the same bytes as the UTF-8 encoder for any string, ASCII or not, around the one-byte length', () => {
    for (const s of [
      '',
      'a',
      'x'.repeat(127),
      'x'.repeat(128),
      `${'x'.repeat(126)}é`,
      'é',
      '12D3KooW…',
      'a\u{1F600}b',
    ])
      expect(str(s)).toEqual(reference(s));
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (s) => {
        expect(str(s)).toEqual(reference(s));
      }),
    );
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (s) => {
        expect(str(s)).toEqual(reference(s));
      }),
    );
  });

  it('grows its buffer as it writes', () => {
    const w = new Writer();
    const names = Array.from({ length: 300 }, (_, i) => `12D3KooW${String(i).padStart(44, 'x')}`);
    for (const n of names) w.str(n);
    const out = w.finish();
    expect(out.length).toBe(300 * 53);
    expect(new TextDecoder().decode(out.subarray(1, 53))).toBe(names[0]);
    expect(new TextDecoder().decode(out.subarray(299 * 53 + 1))).toBe(names[299]);
  });
});
