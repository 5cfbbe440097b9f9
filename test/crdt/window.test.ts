import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KeyWindow, OWN_PARTS, peerLeft } from '../../src/crdt/window.js';

/** One peer entry: origin (>= 1), bucket id, count. */
type Entry = readonly [origin: number, bucket: number, count: number];

const K = 5;
const CUR = 100;

const entryArb = fc.tuple(
  fc.integer({ min: 1, max: 4 }),
  fc.integer({ min: CUR - K - 2, max: CUR + 3 }),
  fc.integer({ min: 0, max: 1000 }),
);

function windowFrom(entries: readonly Entry[], cur = CUR, k = K): KeyWindow {
  const kw = new KeyWindow(k);
  kw.roll(cur);
  for (const [o, b, c] of entries) kw.mergeEntry(o, b, c);
  return kw;
}

/** Merge every peer entry `src` holds into `dst` (a state-based merge built from mergeEntry). */
function mergeInto(dst: KeyWindow, src: KeyWindow): KeyWindow {
  for (let o = 1; o < src.peers.length; o++) {
    const p = src.peers[o];
    if (p === undefined) continue;
    for (let s = 0; s < src.r; s++) dst.mergeEntry(o, src.bucketOf(s), p[s]!);
  }
  return dst;
}

/** What an observer can see of a window. */
function snapshot(kw: KeyWindow) {
  const perBucket: Record<string, number> = {};
  const perPeer: Record<string, number> = {};
  for (let s = 0; s < kw.r; s++) {
    perBucket[String(kw.bucketOf(s))] = kw.sumOf(s);
    for (let o = 1; o < kw.peers.length; o++) {
      const p = kw.peers[o];
      if (p !== undefined && p[s]! > 0) perPeer[`${o}@${kw.bucketOf(s)}`] = p[s]!;
    }
  }
  return {
    full: kw.full,
    perBucket,
    perPeer,
    e1: kw.estimate(1),
    e03: kw.estimate(0.3),
    own: kw.ownEstimate(1),
  };
}

/** Reference: the max per (origin, bucket) over entries that fall inside [cur-k, cur+1]. */
function reference(entries: readonly Entry[], cur = CUR, k = K, w = 1): number {
  const best = new Map<string, number>();
  for (const [o, b, c] of entries) {
    if (b < cur - k || b > cur + 1) continue;
    const id = `${o}:${b}`;
    best.set(id, Math.max(best.get(id) ?? 0, c));
  }
  let est = 0;
  for (const [id, v] of best) {
    const b = Number(id.split(':')[1]);
    est += b === cur - k ? v * w : v;
  }
  return est;
}

describe('KeyWindow merge (CRDT laws)', () => {
  it('is commutative: any order of the same entries gives the same state', () => {
    fc.assert(
      fc.property(fc.array(entryArb, { maxLength: 40 }), fc.integer(), (entries, seed) => {
        const shuffled = fc.sample(fc.shuffledSubarray(entries, { minLength: entries.length }), {
          seed,
          numRuns: 1,
        })[0]!;
        expect(snapshot(windowFrom(shuffled))).toEqual(snapshot(windowFrom(entries)));
      }),
      { numRuns: 300 },
    );
  });

  it('is associative: (A ⊔ B) ⊔ C = A ⊔ (B ⊔ C)', () => {
    fc.assert(
      fc.property(
        fc.array(entryArb, { maxLength: 20 }),
        fc.array(entryArb, { maxLength: 20 }),
        fc.array(entryArb, { maxLength: 20 }),
        (a, b, c) => {
          const left = mergeInto(mergeInto(windowFrom(a), windowFrom(b)), windowFrom(c));
          const right = mergeInto(windowFrom(a), mergeInto(windowFrom(b), windowFrom(c)));
          expect(snapshot(left)).toEqual(snapshot(right));
          expect(left.estimate(1)).toBe(reference([...a, ...b, ...c]));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('is idempotent: duplicates and re-merging the same state change nothing', () => {
    fc.assert(
      fc.property(fc.array(entryArb, { maxLength: 40 }), (entries) => {
        const once = windowFrom(entries);
        const twice = windowFrom([...entries, ...entries, ...entries.slice().reverse()]);
        expect(snapshot(twice)).toEqual(snapshot(once));
        const self = mergeInto(windowFrom(entries), windowFrom(entries));
        expect(snapshot(self)).toEqual(snapshot(once));
        // a re-merge reports no increase at all
        for (const [o, b, c] of entries) expect(once.mergeEntry(o, b, c)).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('estimate equals the max-per-entry reference, oldest bucket weighted', () => {
    fc.assert(
      fc.property(
        fc.array(entryArb, { maxLength: 40 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (e, w) => {
          const kw = windowFrom(e);
          expect(kw.estimate(w)).toBeCloseTo(reference(e, CUR, K, w), 6);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('only max-merges per (origin, bucket): a smaller or equal count is ignored, other origins add', () => {
    const kw = new KeyWindow(K);
    kw.roll(CUR);
    expect(kw.mergeEntry(1, CUR, 7)).toBe(7);
    expect(kw.mergeEntry(1, CUR, 5)).toBe(0);
    expect(kw.mergeEntry(1, CUR, 7)).toBe(0);
    expect(kw.estimate(1)).toBe(7);
    expect(kw.mergeEntry(1, CUR, 9)).toBe(2);
    expect(kw.estimate(1)).toBe(9);
    // another origin in the same bucket is a separate entry: the sum adds
    expect(kw.mergeEntry(2, CUR, 4)).toBe(4);
    expect(kw.estimate(1)).toBe(13);
    expect(kw.peerEstimate(1, 1)).toBe(9);
    expect(kw.peerEstimate(2, 1)).toBe(4);
    expect(kw.peerEstimate(3, 1)).toBe(0);
    // peer entries never touch own counts; own counts add (the origin writes its own entry)
    expect(kw.ownEstimate(1)).toBe(0);
    kw.addOwn(3);
    kw.addOwn(2);
    expect(kw.ownEstimate(1)).toBe(5);
    expect(kw.estimate(1)).toBe(18);
    // what a gossip entry carries: own counts of c-k .. c, the current bucket last
    expect(kw.ownCounts()).toEqual([0, 0, 0, 0, 0, 5]);
  });

  it('ignores entries outside the ring [cur-k, cur+1]', () => {
    const kw = new KeyWindow(K);
    kw.roll(CUR);
    expect(kw.mergeEntry(1, CUR - K - 1, 10)).toBe(0);
    expect(kw.mergeEntry(1, CUR + 2, 10)).toBe(0);
    expect(kw.estimate(1)).toBe(0);
    // c+1 (a peer slightly ahead) counts in full, c-k only partly
    expect(kw.mergeEntry(1, CUR + 1, 10)).toBe(10);
    expect(kw.mergeEntry(2, CUR - K, 10)).toBe(10);
    expect(kw.full).toBe(10);
    expect(kw.estimate(0.25)).toBe(12.5);
  });
});

describe('KeyWindow roll and expiry', () => {
  it("finds a bucket's slot, near the ring from the current bucket's slot, as the bucket id modulo the ring, across rolls of any length (epoch-sized and negative ids too)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.oneof(fc.integer({ min: -1e6, max: 1e6 }), fc.integer({ min: 2 ** 40, max: 2 ** 43 })),
        fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 6 }),
        (k, start, steps) => {
          const kw = new KeyWindow(k);
          const r = k + 2;
          const mod = (b: number) => (((b % r) + r) % r) | 0;
          let c = start;
          for (const step of steps) {
            kw.roll(c);
            // own counts land in the slot the ring says: what addOwn wrote is read back at the bucket
            kw.addOwn(1);
            expect(kw.curSlot).toBe(mod(c));
            expect(kw.oldest).toBe(mod(c - k));
            for (let b = c - 3 * r; b <= c + 3 * r; b++) expect(kw.slotOf(b)).toBe(mod(b));
            expect(kw.ownOf(kw.slotOf(c))).toBe(1);
            c += step;
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('expires buckets that leave the window and weights the oldest by what is still inside', () => {
    const kw = new KeyWindow(4);
    kw.roll(10);
    kw.addOwn(8); // bucket 10
    kw.mergeEntry(1, 10, 4);
    expect(kw.estimate(1)).toBe(12);
    kw.roll(13);
    expect(kw.estimate(0.5)).toBe(12); // bucket 10 is still full weight (13-4 = 9 is the oldest)
    kw.roll(14); // bucket 10 is now the oldest, partly inside
    expect(kw.estimate(1)).toBe(12);
    expect(kw.estimate(0.5)).toBe(6);
    expect(kw.estimate(0.25)).toBe(3);
    expect(kw.ownEstimate(0.5)).toBe(4);
    expect(kw.peerEstimate(1, 0.5)).toBe(2);
    expect(kw.isEmpty()).toBe(false);
    kw.roll(15); // gone
    expect(kw.estimate(1)).toBe(0);
    expect(kw.ownEstimate(1)).toBe(0);
    expect(kw.peerEstimate(1, 1)).toBe(0);
    expect(kw.isEmpty()).toBe(true);
  });

  it('ignores a roll backwards (time never runs backwards here)', () => {
    const kw = new KeyWindow(4);
    kw.roll(20);
    kw.addOwn(5);
    kw.roll(10);
    expect(kw.cur).toBe(20);
    expect(kw.estimate(1)).toBe(5);
  });

  it('a long jump clears everything', () => {
    const kw = new KeyWindow(3);
    kw.roll(0);
    kw.addOwn(5);
    kw.mergeEntry(1, 1, 5);
    kw.roll(1000);
    expect(kw.estimate(1)).toBe(0);
    expect(kw.full).toBe(0);
    expect(Array.from({ length: kw.r }, (_, s) => kw.sumOf(s))).toEqual([0, 0, 0, 0, 0]);
    expect(kw.isEmpty()).toBe(true);
  });

  it('dropOrigin removes exactly that origin', () => {
    const kw = new KeyWindow(4);
    kw.roll(10);
    kw.addOwn(1);
    kw.mergeEntry(1, 9, 3);
    kw.mergeEntry(1, 6, 100); // the oldest, partly weighted
    kw.mergeEntry(2, 10, 5);
    kw.dropOrigin(1);
    expect(kw.estimate(1)).toBe(6);
    expect(kw.estimate(0.5)).toBe(6);
    expect(kw.peerEstimate(1, 1)).toBe(0);
    kw.dropOrigin(7); // unknown: no-op
    expect(kw.estimate(1)).toBe(6);
  });

  type Op =
    | { op: 'own'; cost: number }
    | { op: 'offer'; cost: number }
    | { op: 'merge'; origin: number; back: number; count: number }
    | { op: 'roll'; by: number };

  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ op: fc.constant('own' as const), cost: fc.integer({ min: 1, max: 20 }) }),
    fc.record({ op: fc.constant('offer' as const), cost: fc.integer({ min: 1, max: 20 }) }),
    fc.record({
      op: fc.constant('merge' as const),
      origin: fc.integer({ min: 1, max: 3 }),
      back: fc.integer({ min: -3, max: 9 }),
      count: fc.integer({ min: 0, max: 50 }),
    }),
    fc.record({ op: fc.constant('roll' as const), by: fc.integer({ min: -2, max: 9 }) }),
  );

  it('keeps full/own/offered/estimate equal to a brute-force recomputation (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: -50, max: 50 }),
        fc.array(opArb, { maxLength: 80 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (k, start, ops, w) => {
          const kw = new KeyWindow(k);
          kw.roll(start);
          let cur = start;
          // reference: bucket -> values
          const own = new Map<number, number>();
          const offered = new Map<number, number>();
          const peer = new Map<string, number>();
          const inRing = (b: number) => b >= cur - k && b <= cur + 1;
          for (const o of ops) {
            if (o.op === 'own') {
              kw.addOwn(o.cost);
              own.set(cur, (own.get(cur) ?? 0) + o.cost);
            } else if (o.op === 'offer') {
              kw.addOffered(o.cost);
              offered.set(cur, (offered.get(cur) ?? 0) + o.cost);
            } else if (o.op === 'merge') {
              const b = cur - o.back;
              const id = `${o.origin}:${b}`;
              const before = peer.get(id) ?? 0;
              const applied = kw.mergeEntry(o.origin, b, o.count);
              if (inRing(b)) {
                expect(applied).toBe(Math.max(0, o.count - before));
                peer.set(id, Math.max(before, o.count));
              } else expect(applied).toBe(0);
            } else {
              kw.roll(cur + o.by);
              if (o.by > 0) cur += o.by;
              for (const m of [own, offered]) for (const b of [...m.keys()]) if (!inRing(b)) m.delete(b);
              for (const id of [...peer.keys()]) if (!inRing(Number(id.split(':')[1]))) peer.delete(id);
            }
            const weigh = (b: number, v: number, wt: number) => (b === cur - k ? v * wt : v);
            // own counts without a time are spread evenly over the bucket's quarters, each
            // counted whole until its end
            let quarters = 0;
            for (let j = 0; j < OWN_PARTS; j++) if ((j + 1) / OWN_PARTS > 1 - w + 2 ** -23) quarters++;
            const ownW = 1 - w + 1e-9 >= 1 ? 0 : quarters / OWN_PARTS;
            let eOwn = 0;
            let eOff = 0;
            let eAll = 0;
            let eFull = 0;
            for (const [b, v] of own) {
              eOwn += weigh(b, v, ownW);
              eAll += weigh(b, v, ownW);
              eFull += weigh(b, v, 0);
            }
            for (const [b, v] of offered) eOff += weigh(b, v, w);
            const byPeer = new Map<number, number>();
            for (const [id, v] of peer) {
              const [o, b] = id.split(':').map(Number) as [number, number];
              eAll += weigh(b, v, w);
              eFull += weigh(b, v, 0);
              byPeer.set(o, (byPeer.get(o) ?? 0) + weigh(b, v, w));
            }
            expect(kw.cur).toBe(cur);
            expect(kw.full).toBeCloseTo(eFull, 6);
            expect(kw.estimate(w)).toBeCloseTo(eAll, 6);
            expect(kw.ownEstimate(w)).toBeCloseTo(eOwn, 6);
            expect(kw.offeredEstimate(w)).toBeCloseTo(eOff, 6);
            for (let o = 1; o <= 3; o++) expect(kw.peerEstimate(o, w)).toBeCloseTo(byPeer.get(o) ?? 0, 6);
            expect(kw.isEmpty()).toBe(eAll === 0 && eOff === 0 && eFull === 0 && allZero(own, offered, peer));
          }
        },
      ),
      { numRuns: 400 },
    );
  });
});

function allZero(...maps: Map<unknown, number>[]): boolean {
  for (const m of maps) for (const v of m.values()) if (v !== 0) return false;
  return true;
}

describe('KeyWindow peer spans (arrival times)', () => {
  // k = 10, buckets of 1 s; the ring is rolled to bucket 20
  const at = (ms: number) => ms / 1000;
  const AGE = 0.11; // g + D = 110 ms, in buckets

  it('a burst that arrived late in a bucket stays whole until the window passes its arrival', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    // origin 1 admitted 90 at 10.90 s, arrived at 10.91 s
    kw.mergeEntry(1, 10, 90, at(10_910), AGE);
    expect(kw.spanned?.[kw.slotOf(10)]).toBe(1);
    kw.roll(20);
    // bucket 10 is the oldest: at 20.5 s half of it is out, none of the burst
    expect(kw.estimate(0.5)).toBe(90);
    expect(kw.estimate(1 - 0.79)).toBe(90);
    // from 20.91 s (a step of the span's grid later) every count had arrived before the window began
    expect(kw.estimate(1 - 0.92)).toBe(0);
    expect(kw.estimate(0.05)).toBe(0);
  });

  it('own admissions with times: never fewer counted than are inside (or recent, ownSince), at most their eighth more, out within 1/504 of a bucket (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.integer({ min: 1, max: 5 })), {
          minLength: 1,
          maxLength: 30,
        }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (adm, cut) => {
          const sorted = [...adm].sort((a, b) => a[0] - b[0]);
          const kw = new KeyWindow(10);
          kw.roll(100);
          for (const [t, c] of sorted) kw.addOwn(c, t);
          kw.roll(110); // bucket 100 is the oldest: `cut` of it is out
          const counted = kw.ownEstimate(1 - cut);
          let inside = 0;
          let deficit = 0;
          const total = sorted.reduce((a, [, c]) => a + c, 0);
          const part = (t: number) => Math.min(OWN_PARTS - 1, Math.floor(t * OWN_PARTS));
          for (const [t, c] of sorted) {
            if (t > cut + 2 ** -23) inside += c;
          }
          for (const [t] of sorted) {
            const after = sorted.filter(([u]) => u >= t).reduce((a, [, c]) => a + c, 0);
            deficit = Math.max(deficit, after - total * (1 - t));
          }
          expect(counted).toBeGreaterThanOrEqual(inside - 1e-9);
          // a part counts whole while its last admission (rounded up by at most 1/504) is inside
          const parts = new Set(sorted.filter(([t]) => t > cut - 1 / 504).map(([t]) => part(t)));
          const bound = sorted.filter(([t]) => parts.has(part(t))).reduce((a, [, c]) => a + c, 0);
          expect(counted).toBeLessThanOrEqual(bound + 1e-9);
          // the skew a peer is sent covers what the times say exactly
          expect(kw.ownDeficit(kw.oldest)).toBeGreaterThanOrEqual(deficit - 1e-6);
          // our own counts at or after `since` (the share's recent counts): never fewer than
          // were admitted then, at most the parts holding one within 1/504 before
          for (const since of [cut, Math.round(cut * OWN_PARTS) / OWN_PARTS]) {
            const recent = kw.ownSince(kw.oldest, since);
            const after = sorted.filter(([t]) => t >= since).reduce((a, [, c]) => a + c, 0);
            const held = new Set(sorted.filter(([t]) => t >= since - 1 / 504).map(([t]) => part(t)));
            const most = sorted.filter(([t]) => held.has(part(t))).reduce((a, [, c]) => a + c, 0);
            expect(recent).toBeGreaterThanOrEqual(after - 1e-9);
            expect(recent).toBeLessThanOrEqual(Math.max(most, since > 0 ? 0 : total) + 1e-9);
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it('counts that kept arriving over the whole bucket weigh as before (the part still inside)', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    // a tick's counts every 100 ms, from the bucket's start to after its end: one group
    for (let i = 0; i < 10; i++) kw.mergeEntry(1, 10, 6 * (i + 1), at(10_060 + 100 * i), AGE);
    kw.roll(11);
    kw.mergeEntry(1, 10, 62, at(11_050), AGE);
    expect(kw.spanned?.[kw.slotOf(10)] ?? 0).toBe(0);
    kw.roll(20);
    expect(kw.estimate(0.3)).toBeCloseTo(62 * 0.3, 9);
  });

  it('gaps between arrivals keep the span, even over the whole bucket', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 1, at(10_030), AGE);
    kw.mergeEntry(1, 10, 81, at(10_840), AGE);
    kw.roll(11);
    // one more after the bucket's end: the burst before it stays whole until it arrived
    kw.mergeEntry(1, 10, 82, at(11_010), AGE);
    expect(kw.spanned?.[kw.slotOf(10)]).toBe(1);
    kw.roll(20);
    expect(kw.estimate(1 - 0.5)).toBe(82);
    expect(kw.estimate(1 - 0.86)).toBeGreaterThanOrEqual(1);
    expect(kw.estimate(1 - 0.86)).toBeLessThan(1.5);
  });

  it('a burst published in parts, arriving close together, stays whole until its last part', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    // admitted at 10.983 s, early publishes of 80, 85 and 90 relayed (age 0.14: g + D = 140 ms)
    kw.mergeEntry(1, 10, 80, at(10_985), 0.14);
    kw.mergeEntry(1, 10, 85, at(10_986), 0.14);
    kw.mergeEntry(1, 10, 90, at(10_987), 0.14);
    kw.roll(20);
    expect(kw.estimate(1 - 0.9)).toBe(90);
    expect(kw.estimate(1 - 0.98)).toBe(90);
    // the three parts are one group: whole until the last part arrived
    expect(kw.estimate(1 - 0.9868)).toBe(90);
    expect(kw.estimate(1 - 0.99)).toBe(0);
  });

  it('counts that arrived over part of the bucket: the earlier groups whole until the group before the last ended, the last until it arrived', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 10, at(10_400), AGE);
    kw.mergeEntry(1, 10, 20, at(10_600), AGE);
    kw.mergeEntry(1, 10, 30, at(10_800), AGE);
    kw.roll(20);
    expect(kw.estimate(1 - 0.2)).toBe(30);
    expect(kw.estimate(1 - 0.59)).toBe(30);
    // from 0.6 (the group before the last ended) only the last arrival's 10; none from 0.8
    expect(kw.estimate(1 - 0.7)).toBeCloseTo(10, 3);
    expect(kw.estimate(1 - 0.81)).toBe(0);
  });

  it('a burst in a middle group stays whole: an early request, the burst, one more request', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 1, at(10_100), AGE);
    kw.mergeEntry(1, 10, 92, at(10_900), AGE);
    kw.mergeEntry(1, 10, 93, at(10_950), 0.02);
    kw.roll(20);
    // the burst arrived at 0.9: whole until then (spread evenly it was 46)
    expect(kw.estimate(1 - 0.5)).toBe(93);
    expect(kw.estimate(1 - 0.89)).toBe(93);
    // then the last request's 1 (its share of the count kept to 1/255, rounded up)
    expect(kw.estimate(1 - 0.92)).toBeGreaterThanOrEqual(1);
    expect(kw.estimate(1 - 0.92)).toBeLessThan(1.2);
    expect(kw.estimate(1 - 0.96)).toBe(0);
  });

  it('counts folded into a bucket later than their arrival are out once it is the oldest', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    // a peer's clock runs ahead: its bucket 11 (our future) arrives at 10.5 s
    kw.mergeEntry(1, 11, 7, at(10_500), AGE);
    kw.roll(21);
    expect(kw.estimate(1)).toBe(0);
    expect(kw.estimateWhole(1)).toBe(7);
  });

  it('other origins and the floor keep the even spread beside a spanned one', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 20, at(10_950), AGE);
    kw.mergeEntry(2, 10, 10);
    kw.mergeFloor(10, 4);
    kw.addOwn(6, 0.5);
    kw.roll(20);
    // cut 0.4: origin 1 whole, origin 2 and the floor by 0.6, our own (at 0.5) whole
    expect(kw.estimate(0.6)).toBeCloseTo(20 + 14 * 0.6 + 6, 9);
    expect(kw.estimate(0.4)).toBeCloseTo(20 + 14 * 0.4 + 0, 9);
  });

  it('keeps the count of spanned origins per slot through merges, rolls and drops (property)', () => {
    const op = fc.oneof(
      fc.record({
        op: fc.constant('merge' as const),
        origin: fc.integer({ min: 1, max: 4 }),
        back: fc.integer({ min: -1, max: 11 }),
        count: fc.integer({ min: 0, max: 40 }),
        arrive: fc.double({ min: 0, max: 1, noNaN: true }),
        timed: fc.boolean(),
      }),
      fc.record({ op: fc.constant('roll' as const), by: fc.integer({ min: 0, max: 4 }) }),
      fc.record({
        op: fc.constant('drop' as const),
        origin: fc.integer({ min: 1, max: 4 }),
        fold: fc.boolean(),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), fc.double({ min: 0, max: 1, noNaN: true }), (ops, w) => {
        const kw = new KeyWindow(10);
        let cur = 100;
        kw.roll(cur);
        for (const o of ops) {
          if (o.op === 'merge') {
            const t = cur + o.arrive;
            if (o.timed) kw.mergeEntry(o.origin, cur - o.back, o.count, t, AGE);
            else kw.mergeEntry(o.origin, cur - o.back, o.count);
          } else if (o.op === 'roll') {
            cur += o.by;
            kw.roll(cur);
          } else kw.dropOrigin(o.origin, o.fold);
          for (let s = 0; s < kw.r; s++) {
            let n = 0;
            for (let i = 1; i < kw.peers.length; i++) {
              const p = kw.peers[i];
              if (p !== undefined && p.length > kw.r + 2 && p[kw.r + 2 + s]! >= 0) {
                n++;
                expect(p[s]).toBeGreaterThan(0);
              }
            }
            expect(kw.spanned?.[s] ?? 0).toBe(n);
          }
          // never more than peers' oldest counted whole, never less than nothing of it
          expect(kw.estimate(w)).toBeLessThanOrEqual(kw.estimateWhole(w) + 1e-9);
          expect(kw.estimate(w)).toBeGreaterThanOrEqual(kw.full - 1e-9);
          // and what a recomputation from the entry arrays gives (the estimate keeps a list of
          // the oldest bucket's spans between merges: it must follow every change)
          const old = kw.oldest;
          let rest = kw.sumOf(old) - kw.ownOf(old);
          let ref = kw.full + kw.ownOf(old) * kw.ownWeight(w);
          for (let i = 1; i < kw.peers.length; i++) {
            const p = kw.peers[i];
            if (p === undefined || p.length <= kw.r + 2 || p[kw.r + 2 + old]! < 0) continue;
            rest -= p[old]!;
            ref += p[old]! * peerLeft(1 - w, p[kw.r + 2 + old]!);
          }
          expect(kw.estimate(w)).toBeCloseTo(ref + rest * w, 9);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('KeyWindow peer spans: reserves, retry hints, groups, where kept', () => {
  const at = (ms: number) => ms / 1000;

  it('weighs a peer in peerEstimate as in the estimate (the stale reserve uses it)', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 90, at(10_950), 0.11);
    kw.mergeEntry(2, 10, 10);
    kw.roll(20);
    expect(kw.peerEstimate(1, 0.5)).toBe(90);
    expect(kw.peerEstimate(2, 0.5)).toBe(5);
    expect(kw.peerEstimate(1, 0.04)).toBe(0);
    expect(kw.estimate(0.5)).toBe(95);
  });

  it('retry hints match when the estimate drains', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 90, at(10_950), 0.11);
    kw.mergeEntry(2, 11, 5);
    kw.roll(20);
    const bw = 1000;
    const now = 20_500;
    const w = (t: number) => 1 - (t - 20_000) / bw;
    expect(kw.estimate(w(now))).toBe(95);
    // 10 must leave: the burst leaves at once when the window passes 10.95 s (a step of the
    // span's grid later)
    const hint = kw.timeToDrain(10, false, now, bw);
    expect(hint).toBeGreaterThan(440);
    expect(hint).toBeLessThan(452);
    expect(kw.estimate(w(now + hint - 2))).toBe(95);
    expect(kw.estimate(w(now + hint + 0.01))).toBe(5);
  });

  it('arrivals close together form one group, counted whole until its last arrival', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    // one count early, then a burst in three parts close together late in the bucket
    kw.mergeEntry(1, 10, 1, at(10_030), 0.11);
    kw.mergeEntry(1, 10, 40, at(10_800), 0.11);
    kw.mergeEntry(1, 10, 70, at(10_810), 0.11);
    kw.mergeEntry(1, 10, 81, at(10_820), 0.11);
    kw.roll(20);
    // the early count is out once the window passes its arrival (0.03); the burst whole until
    // 0.82 (its share of the count kept to 1/255, rounded up)
    expect(kw.estimate(1 - 0.02)).toBeCloseTo(81, 6);
    for (const cut of [0.5, 0.815]) {
      expect(kw.estimate(1 - cut)).toBeGreaterThanOrEqual(80);
      expect(kw.estimate(1 - cut)).toBeLessThan(80.5);
    }
    expect(kw.estimate(1 - 0.83)).toBe(0);
  });

  it('keeps no spans where the gossip horizon is over 15 % of a bucket', () => {
    for (const age of [0.16, 0.2, 0.6]) {
      const kw = new KeyWindow(10);
      kw.roll(10);
      kw.mergeEntry(1, 10, 90, at(10_950), age);
      expect(kw.spanned?.[kw.slotOf(10)] ?? 0).toBe(0);
      expect(kw.peers[1]!.length).toBe(kw.r + 2);
      kw.roll(20);
      expect(kw.estimate(0.5)).toBe(45);
    }
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 90, at(10_950), 0.15);
    kw.roll(20);
    expect(kw.estimate(0.5)).toBe(90);
  });

  it('the estimate follows merges into the oldest bucket and drops (its list of spans is rebuilt)', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 50, at(10_900), 0.11);
    kw.mergeEntry(2, 10, 30, at(10_950), 0.11);
    kw.roll(20);
    expect(kw.estimate(0.5)).toBe(80);
    // a late count for the oldest bucket: it arrived now (20.5), after the bucket: whole
    kw.mergeEntry(1, 10, 60, 20.5, 0.11);
    expect(kw.estimate(0.5)).toBe(90);
    kw.dropOrigin(2);
    expect(kw.estimate(0.5)).toBe(60);
    kw.mergeEntry(3, 10, 7, at(10_920), 0.11);
    expect(kw.estimate(0.5)).toBe(67);
    // at 0.93 origin 1's 50 (arrived by 0.9) and origin 3's 7 (0.92) are out: the late 10 stays
    expect(kw.estimate(1 - 0.93)).toBeGreaterThanOrEqual(10);
    expect(kw.estimate(1 - 0.93)).toBeLessThan(10.5);
  });

  it('drain hints count what leaves as a bucket becomes the oldest, at its start', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    // a peer whose clock runs ahead: its bucket 11 arrives at 10.5 (out as soon as it is the
    // oldest); its bucket 12 arrives at 12.5 (out half way through)
    kw.mergeEntry(1, 11, 5, at(10_500), 0.11);
    kw.roll(12);
    kw.mergeEntry(1, 12, 40, at(12_500), 0.11);
    kw.roll(20);
    const bw = 1000;
    expect(kw.estimate(1)).toBe(45);
    expect(kw.timeToDrain(5, false, 20_000, bw)).toBeCloseTo(1000, 6);
    expect(kw.timeToDrain(45, false, 20_000, bw)).toBeCloseTo(2500, 0);
    kw.roll(21);
    // at 21.0 exactly the 5 are out, and the 40 leave at 22.5
    expect(kw.estimate(1)).toBe(40);
    expect(kw.timeToDrain(40, false, 21_000, bw)).toBeCloseTo(1500, 0);
  });
});

describe('KeyWindow peer spans: bursts in parts, many peers', () => {
  const at = (ms: number) => ms / 1000;

  it('a burst in many parts after an early request, and a part after the bucket, stays whole', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    kw.mergeEntry(1, 10, 1, at(10_030), 0.02);
    // 80 more in 16 parts of 5 arriving at 0.9, then 1 more after the bucket's end, close by
    for (let i = 1; i <= 16; i++) kw.mergeEntry(1, 10, 1 + 5 * i, at(10_900), 0.02);
    kw.roll(11);
    kw.mergeEntry(1, 10, 82, at(11_005), 0.02);
    expect(kw.spanned?.[kw.slotOf(10)]).toBe(1);
    kw.roll(20);
    expect(kw.estimate(1 - 0.5)).toBe(82);
    expect(kw.estimate(1 - 0.89)).toBe(82);
    // the burst had arrived by 0.9 (a step of the grid later): only the late one is left
    expect(kw.estimate(1 - 0.95)).toBeCloseTo(1, 3);
  });

  it('retry hints skip what already left the oldest bucket, with many peers in one slot', () => {
    const kw = new KeyWindow(10);
    kw.roll(10);
    // 40 peers whose counts arrived at 0.3 of bucket 10, one untimed peer in bucket 11
    for (let o = 1; o <= 40; o++) kw.mergeEntry(o, 10, 2, at(10_300), 0.02);
    kw.mergeEntry(41, 11, 30);
    kw.roll(20);
    expect(kw.spanned?.[kw.slotOf(10)]).toBe(40);
    const bw = 1000;
    // at 20.5 the 80 are out; the 30 leave evenly over bucket 11's turn: all by 22.0
    expect(kw.estimate(0.5)).toBe(30);
    expect(kw.timeToDrain(30, false, 20_500, bw)).toBeCloseTo(1500, 0);
    expect(kw.timeToDrain(15, false, 20_500, bw)).toBeCloseTo(1000, 0);
    // at 20.2 they are in, and leave at 20.3 (a step of the span's grid later)
    expect(kw.timeToDrain(80, false, 20_200, bw)).toBeGreaterThan(99);
    expect(kw.timeToDrain(80, false, 20_200, bw)).toBeLessThan(102);
  });
});

describe('KeyWindow peer entries', () => {
  it('keys no peer reported share one empty list that no write reaches; a peer gets its own list and entry', () => {
    const a = new KeyWindow(10);
    const b = new KeyWindow(10);
    const c = new KeyWindow(10);
    for (const w of [a, b, c]) w.roll(100);
    expect(a.peers).toBe(b.peers);
    expect(a.peers.length).toBe(0);
    // a peer's counts on one key, a span grown on it, an origin dropped from the others
    a.mergeEntry(3, 100, 5, 100.5, 0);
    a.mergeEntry(3, 100, 7, 100.6, 0);
    b.dropOrigin(3);
    c.dropOrigin(3, true);
    expect(a.peers).not.toBe(b.peers);
    expect(a.peerEstimate(3, 1)).toBe(7);
    expect(b.peers).toBe(c.peers);
    expect(b.peers.length).toBe(0);
    expect(new KeyWindow(10).peers.length).toBe(0);
    // the entry: the r = k + 2 slots' counts, demand and its time (r + 2 numbers), and r spans
    // more once its counts keep arrival times
    expect([12 + 2, 2 * 12 + 2]).toContain(a.peers[3]!.length);
  });
});

describe('KeyWindow skews (counts late in a bucket, format 5)', () => {
  it("a sender's deficit: small for counts early in a bucket, the late part for counts in its second half", () => {
    const kw = new KeyWindow(10);
    kw.roll(100);
    for (let i = 0; i < 8; i++) kw.addOwn(1, 0.02 + i * 0.01);
    // a part counts whole until its last admission (kept to 1/504 of the bucket, rounded up): at
    // the cut 0.09, 8 against an even 7.28
    expect(kw.ownDeficit(kw.curSlot)).toBeGreaterThanOrEqual(8 * 0.09);
    expect(kw.ownDeficit(kw.curSlot)).toBeLessThanOrEqual(8 * (0.09 + 1 / 504));
    const late = new KeyWindow(10);
    late.roll(100);
    for (let i = 0; i < 8; i++) late.addOwn(1, 0.6 + i * 0.04);
    // by part: at the cut 0.6 (the first admission, alone in its eighth) all 8 count, an even
    // spread 8 × 0.4 (what the times say exactly)
    expect(late.ownDeficit(late.curSlot)).toBeGreaterThanOrEqual(8 - 8 * (1 - 0.6));
    expect(late.ownDeficit(late.curSlot)).toBeLessThanOrEqual(8 - 8 * (1 - 0.6 - 1 / 504));
    // one skew per count ownCounts gives, from any bucket on
    expect(late.ownSkews(late.cur - 100)).toHaveLength(late.ownCounts(late.cur - 100).length);
    // evenly spread over the bucket: at most a part's counts
    const even = new KeyWindow(10);
    even.roll(100);
    for (let i = 0; i < 40; i++) even.addOwn(1, (i + 0.5) / 40);
    expect(even.ownDeficit(even.curSlot)).toBeLessThanOrEqual(40 / OWN_PARTS + 1e-9);
  });

  it('the oldest bucket holds a peer skew on top of the even spread, never past its counts; a roll clears it', () => {
    const kw = new KeyWindow(10);
    kw.roll(100);
    kw.mergeEntry(1, 100, 10);
    kw.mergeSkew(1, 100, 4);
    kw.roll(110); // bucket 100 is the oldest now
    expect(kw.estimate(0.5)).toBeCloseTo(10 * 0.5 + 4, 9);
    expect(kw.estimate(0.9)).toBe(10);
    expect(kw.peerEstimate(1, 0.5)).toBeCloseTo(9, 9);
    // a skew is max-merged and capped by the count
    kw.mergeSkew(1, 100, 3);
    kw.mergeSkew(1, 100, 50);
    expect(kw.estimate(0.1)).toBe(10);
    kw.roll(111);
    expect(kw.estimate(0.5)).toBe(0);
    expect(kw.skews![kw.slotOf(110)]).toBe(0);
  });

  it('a dropped origin takes its skews with it; a folded one leaves them with its counts', () => {
    for (const fold of [false, true]) {
      const kw = new KeyWindow(10);
      kw.roll(100);
      kw.mergeEntry(1, 100, 10);
      kw.mergeSkew(1, 100, 6);
      kw.roll(110);
      kw.dropOrigin(1, fold);
      expect(kw.estimate(0.5)).toBeCloseTo(fold ? 10 : 0, 9);
    }
  });

  it('retry hints wait for the skewed counts: they leave at the end of their bucket', () => {
    const kw = new KeyWindow(10);
    kw.roll(100);
    kw.mergeEntry(1, 100, 10);
    kw.mergeSkew(1, 100, 4);
    kw.roll(110);
    const bw = 100;
    const now = 110 * bw + 50; // w = 0.5: the estimate holds 9 of the 10
    expect(kw.estimate(0.5)).toBeCloseTo(9, 9);
    // 5 more to leave: 4 of them only at the bucket's end, 50 ms on
    expect(kw.timeToDrain(5, false, now, bw)).toBeCloseTo(50, 6);
    // 1 leaves as the even part goes: 10 ms (the even 5 leave over the 50 ms left, but 4 stay)
    expect(kw.timeToDrain(1, false, now, bw)).toBeCloseTo(10, 6);
  });
});
