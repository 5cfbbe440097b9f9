/**
 * A seeded fuzzer for everything that reads input from outside: the wire
 * decoder and every engine entry point (receiveGossip, answerSync,
 * receiveSyncResponse, check / checkAt / checkAll / checkAllAt with odd
 * arguments). Inputs are random bytes, mutated valid frames and hostile but
 * well-formed frames (extreme seq, times, bases, counts, demands, origins that
 * name the receiver, keys at and past the limits).
 *
 * Invariants checked after every input:
 * - nothing throws out of decodeMessage, receiveGossip, answerSync,
 *   receiveSyncResponse, buildGossip, estimate, stats or peerViews;
 * - check paths throw only a RateMeshError (bad arguments are errors with a
 *   code; anything else is a bug);
 * - a refused message is counted: exactly one more `dropped` under its reason;
 * - the key and peer tables stay under their caps, every estimate is finite,
 *   non-negative and within what the peers in the table could have admitted.
 *
 * Deterministic for a given seed. `npm run fuzz -- <count> [seed]` runs it long.
 */
import { ManualClock } from '../../src/clock.js';
import {
  decodeMessage,
  encodeGossip,
  encodeSyncRequest,
  encodeSyncResponse,
  LIMITS,
  type WireEntry,
} from '../../src/crdt/codec.js';
import { Engine } from '../../src/decision/engine.js';
import { isRateMeshError } from '../../src/errors.js';
import { Prng } from '../../src/sim/prng.js';
import type { PolicySpec } from '../../src/types.js';

/** Counters of entries skipped inside a sync answer that is merged (per entry, with ok: true). */
const ENTRY_SKIPS = new Set([
  'sync-foreign-entry',
  'sync-known-origin',
  'sync-gone-over-limit',
  'sync-gone-no-room',
]);

export const FUZZ_POLICIES: PolicySpec[] = [
  { name: 'api', limit: 100, windowMs: 1000, buckets: 10 },
  { name: 'login', limit: 5, windowMs: 60_000, buckets: 60 },
  { name: 'naive', limit: 50, windowMs: 2000, buckets: 20, overAdmission: 'naive', maxCost: 100 },
  {
    name: 'front',
    limit: 40,
    windowMs: 1000,
    local: { algorithm: 'token-bucket', limit: 20, windowMs: 1000, burst: 10 },
  },
  { name: 'loc', scope: 'local', algorithm: 'gcra', limit: 10, windowMs: 1000 },
  { name: 'shadow', limit: 3, windowMs: 1000, shadow: true },
];
const MAX_KEYS = 400;
const MAX_PEERS = 12;
const T0 = 1_700_000_000_000;

export interface FuzzReport {
  inputs: number;
  seed: number;
  /** Inputs per target. */
  targets: Record<string, number>;
  /** Inputs per kind (random, mutated, hostile). */
  kinds: Record<string, number>;
  accepted: number;
  /** Messages the target capped (counts past what their origin could have admitted), and peers it ignored. */
  capped: number;
  peersIgnored: number;
  /** Drops by reason, over every engine. */
  dropped: Record<string, number>;
  /** Invariant violations (empty when all held); the first few are kept. */
  failures: string[];
  failureCount: number;
}

class Gen {
  constructor(readonly r: Prng) {}
  int(n: number): number {
    return Math.floor(this.r.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  chance(p: number): boolean {
    return this.r.next() < p;
  }
  bytes(n: number): Uint8Array {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
  /** Numbers at and around the edges a decoder or a merge must survive. */
  edgy(max: number): number {
    switch (this.int(8)) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return max;
      case 3:
        return Math.max(0, max - 1);
      case 4:
        return this.int(Math.min(max, 1000) + 1);
      case 5:
        return Math.min(max, 2 ** this.int(54));
      default:
        return Math.floor(this.r.next() * max);
    }
  }
  key(): string {
    switch (this.int(10)) {
      case 0:
        return 'x'.repeat(LIMITS.keyBytes);
      case 1:
        return 'é'.repeat(200 + this.int(100));
      case 2:
        return `k\u0000${this.int(10)}`;
      case 3:
        return 'hot';
      case 4:
        return `ip:203.0.113.${this.int(256)}`;
      default:
        return `k${this.int(600)}`;
    }
  }
}

export function fuzz(count: number, seed = 1): FuzzReport {
  const g = new Gen(new Prng(seed));
  const clock = new ManualClock(T0);
  const mk = (id: string) =>
    new Engine({
      policies: FUZZ_POLICIES,
      clock,
      nodeId: id,
      maxKeys: MAX_KEYS,
      maxPeers: MAX_PEERS,
      maxKeysPerMessage: 64,
      sketchSeed: 5,
      sketchWidth: 256,
      ignoreMs: 2000,
      gossipIntervalMs: 10,
      expectedDelayMs: 5,
    });
  const target = mk('target');
  const honest = ['h1', 'h2', 'h3'].map(mk);
  const ids = [
    'h1',
    'h2',
    'h3',
    'target',
    '',
    'x'.repeat(129),
    ...Array.from({ length: 30 }, (_, i) => `p${i}`),
  ];
  const table = target.policyTable();
  /**
   * The sender's policy table: mostly the target's own (every entry merges),
   * else one policy on another version (its entries skipped, the sender counted
   * at L/N), a policy the target does not have, or rows missing.
   */
  const tableOf = () => {
    const r = g.int(10);
    if (r < 6) return table;
    const t = table.map((row) => ({ ...row }));
    if (r === 6) t[g.int(t.length)]!.version = 'ffffffffffffffff';
    else if (r === 7) t.push({ name: 'zz-unknown', version: '0123456789abcdef' });
    else if (r === 8) t.splice(g.int(t.length), 1);
    else return [];
    return t;
  };
  const policyNames = [...FUZZ_POLICIES.map((p) => p.name), 'nope', '', 'api '];
  const report: FuzzReport = {
    inputs: 0,
    seed,
    targets: {},
    kinds: {},
    accepted: 0,
    capped: 0,
    peersIgnored: 0,
    dropped: {},
    failures: [],
    failureCount: 0,
  };
  const fail = (what: string): void => {
    report.failureCount++;
    if (report.failures.length < 20) report.failures.push(`#${report.inputs}: ${what}`);
  };
  const bump = (m: Record<string, number>, k: string): void => {
    m[k] = (m[k] ?? 0) + 1;
  };

  // a corpus of valid frames, refreshed as the honest engines gossip
  let corpus: Uint8Array[] = [];
  const refreshCorpus = (): void => {
    const next: Uint8Array[] = [];
    for (const h of honest) {
      for (let i = 0; i < 3; i++)
        h.check(g.pick(['api', 'login', 'naive', 'front']), g.pick(['hot', `k${g.int(600)}`]));
      next.push(h.buildGossip());
      next.push(h.buildSyncRequest());
      const ans = h.answerSync('target', target.buildSyncRequest());
      if (ans instanceof Uint8Array) next.push(ans);
    }
    corpus = next;
  };
  refreshCorpus();

  const mutate = (src: Uint8Array): Uint8Array => {
    let b: Uint8Array = src.slice();
    const n = 1 + g.int(4);
    for (let i = 0; i < n; i++) {
      switch (g.int(7)) {
        case 0: // bit flip
          if (b.length > 0) b[g.int(b.length)]! ^= 1 << g.int(8);
          break;
        case 1: // an extreme byte
          if (b.length > 0) b[g.int(b.length)] = g.pick([0, 0x7f, 0x80, 0xff]);
          break;
        case 2: // truncate
          b = b.subarray(0, g.int(b.length + 1));
          break;
        case 3: {
          // extend with random bytes
          const out = new Uint8Array(b.length + 1 + g.int(32));
          out.set(b);
          out.set(g.bytes(out.length - b.length), b.length);
          b = out;
          break;
        }
        case 4: {
          // splice with another frame
          const other = g.pick(corpus);
          const cut = g.int(b.length + 1);
          const from = g.int(other.length + 1);
          const out = new Uint8Array(cut + other.length - from);
          out.set(b.subarray(0, cut));
          out.set(other.subarray(from), cut);
          b = out;
          break;
        }
        case 5: {
          // a maximal varint somewhere after the header
          if (b.length > 12) {
            const at = 11 + g.int(b.length - 11);
            const v = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f];
            const out = new Uint8Array(b.length + v.length);
            out.set(b.subarray(0, at));
            out.set(v, at);
            out.set(b.subarray(at), at + v.length);
            b = out;
          }
          break;
        }
        default: // duplicate a region
          if (b.length > 2) {
            const s = g.int(b.length - 1);
            const e = s + 1 + g.int(Math.min(64, b.length - s));
            const out = new Uint8Array(b.length + (e - s));
            out.set(b.subarray(0, e));
            out.set(b.subarray(s));
            b = out;
          }
      }
    }
    return b;
  };

  const entry = (origins: number): WireEntry => {
    const now = clock.now();
    const bw = g.pick([100, 1000, 100]);
    const near = Math.floor(now / bw) - g.int(12);
    const n = g.chance(0.8) ? 1 + g.int(12) : 1 + g.edgy(LIMITS.counts - 1);
    return {
      origin: origins > 0 ? g.int(origins) : 0,
      // row of the policy table (the target's own: api 0, front 1, login 2, naive 3, shadow 4; loc is local, never on the wire)
      policy: g.chance(0.95) ? g.pick([0, 0, 1, 2, 3, 4]) : g.edgy(2 ** 20),
      key: g.chance(0.8) ? g.pick(['hot', `k${g.int(600)}`, `ip:203.0.113.${g.int(256)}`]) : g.key(),
      base: g.chance(0.8) ? Math.max(0, near) : g.edgy(2 ** 53 - 1),
      counts: Array.from({ length: n }, () => (g.chance(0.6) ? g.int(20) : g.edgy(LIMITS.count))),
      demand: g.chance(0.5) ? g.int(200) : g.edgy(LIMITS.count),
    };
  };
  /** A well-formed frame of `type` (1 gossip, 2 sync request, 3 sync response; 0: any) with hostile values. */
  const hostile = (type: number, from: string): Uint8Array => {
    const now = clock.now();
    // a message over the per-message key cap: well-formed otherwise (the target's table, rows it
    // holds), so it reaches the cap check rather than failing to decode
    const large = g.chance(0.05);
    const entries = Array.from({ length: large ? 65 + g.int(100) : g.int(8) }, () =>
      large ? { ...entry(0), policy: g.int(table.length) } : entry(0),
    );
    // mostly on time (so counts get merged and caps are hit), sometimes far off (skewed peers)
    const t = g.chance(0.7)
      ? now - g.int(20)
      : g.pick([now - g.int(100_000), now + g.int(100_000), 0, 1e15, -1e15]);
    switch (type === 0 || g.chance(0.15) ? 1 + g.int(3) : type) {
      case 1:
        return encodeGossip({
          policies: large ? table : tableOf(),
          seq: g.edgy(2 ** 53 - 1),
          sentAt: t,
          members: 1 + g.edgy(LIMITS.origins - 1),
          reach: 1 + g.edgy(LIMITS.origins - 1),
          // repair requests, mostly naming the target (it then resends whole windows), with
          // numbers it did or never did send
          ...(g.chance(0.3)
            ? {
                nacks: Array.from({ length: 1 + g.int(3) }, () => {
                  const have = g.chance(0.7) ? g.int(50) : g.edgy(2 ** 53 - 1);
                  return {
                    origin: g.chance(0.8) ? 'target' : g.pick(['a', 'b', g.key().slice(0, 100)]),
                    have,
                    seen: have + (g.chance(0.8) ? g.int(10) : 0),
                  };
                }),
              }
            : {}),
          entries,
        });
      case 2:
        return encodeSyncRequest({ t0: t });
      default: {
        // mostly an answer to a request the target did send (the rest are unsolicited)
        let t0 = g.pick([now - g.int(50), t, now + 5]);
        if (g.chance(0.7)) {
          const req = decodeMessage(target.buildSyncRequest());
          if (req.ok && req.message.type === 2) t0 = req.message.t0;
        }
        const no = 1 + g.int(6);
        const origins = Array.from({ length: no }, () =>
          g.pick(ids.filter((x) => x.length > 0 && x.length <= 128)),
        );
        // mostly signed by the sender (the rest are refused as sync-wrong-origin)
        if (g.chance(0.7) && from.length > 0 && from.length <= 128) origins[0] = from;
        return encodeSyncResponse({
          policies: tableOf(),
          t0,
          t1: t,
          origins,
          entries: Array.from({ length: g.int(8) }, () => entry(no)),
        });
      }
    }
  };

  const droppedTotal = (e: Engine): number => {
    let n = 0;
    // entries skipped inside an answer that is merged count per entry, not as a refused message
    for (const [k, v] of Object.entries(e.stats().dropped)) if (!ENTRY_SKIPS.has(k)) n += v;
    return n;
  };
  const guard = (what: string, fn: () => void): void => {
    try {
      fn();
    } catch (err) {
      fail(`${what} threw ${String(err)}`);
    }
  };
  const checkGuard = (what: string, fn: () => unknown): void => {
    try {
      fn();
    } catch (err) {
      if (!isRateMeshError(err)) fail(`${what} threw a non-RateMeshError: ${String(err)}`);
    }
  };
  const receipt = (what: string, before: number, r: unknown, e: Engine): void => {
    if (r instanceof Uint8Array) return;
    const rr = r as { ok?: unknown; reason?: unknown };
    if (typeof rr?.ok !== 'boolean') {
      fail(`${what} returned ${String(r)}`);
      return;
    }
    if (rr.ok) report.accepted++;
    const after = droppedTotal(e);
    const want = rr.ok ? before : before + 1;
    if (after !== want)
      fail(`${what}: dropped went ${before} -> ${after} (ok ${rr.ok}, ${String(rr.reason)})`);
  };

  for (let i = 0; i < count; i++) {
    report.inputs++;
    // time moves on, mostly forwards, sometimes backwards or a long way
    const step = g.int(20);
    if (step === 0 && g.chance(0.2)) clock.set(Math.max(0, clock.now() - g.int(500)));
    else if (step === 1 && g.chance(0.1)) clock.advance(g.int(120_000));
    else clock.advance(g.int(5));

    const from = g.chance(0.5) ? g.pick(ids) : g.pick(['p1', 'p2', 'h1']);
    const t = g.int(7);
    // the frame type the target takes (a mismatch is tried too, by the 15 % in hostile())
    const type = t === 0 ? 0 : t <= 2 ? 1 : t === 3 ? 2 : t === 4 ? 3 : 0;
    const kind = g.int(10);
    let bytes: Uint8Array;
    if (kind < 2) {
      bump(report.kinds, 'random');
      bytes = g.chance(0.1) ? g.bytes(g.int(4096)) : g.bytes(g.int(64));
      if (bytes.length > 0 && g.chance(0.5)) bytes[0] = 0x52;
      if (bytes.length > 1 && g.chance(0.5)) bytes[1] = 2;
    } else if (kind < 6) {
      bump(report.kinds, 'mutated');
      bytes = mutate(g.pick(corpus));
    } else if (kind < 9) {
      bump(report.kinds, 'hostile');
      bytes = hostile(type, from);
    } else {
      bump(report.kinds, 'valid');
      bytes = g.pick(corpus);
    }

    if (t === 0) {
      bump(report.targets, 'decodeMessage');
      guard('decodeMessage', () => {
        const d = decodeMessage(bytes);
        if (typeof d.ok !== 'boolean') fail('decodeMessage returned no verdict');
      });
    } else if (t <= 2) {
      bump(report.targets, 'receiveGossip');
      const before = droppedTotal(target);
      guard('receiveGossip', () =>
        receipt('receiveGossip', before, target.receiveGossip(from, bytes), target),
      );
    } else if (t === 3) {
      bump(report.targets, 'answerSync');
      const before = droppedTotal(target);
      guard('answerSync', () => receipt('answerSync', before, target.answerSync(from, bytes), target));
    } else if (t === 4) {
      bump(report.targets, 'receiveSyncResponse');
      const before = droppedTotal(target);
      guard('receiveSyncResponse', () =>
        receipt('receiveSyncResponse', before, target.receiveSyncResponse(from, bytes), target),
      );
    } else {
      bump(report.targets, 'check');
      const time = g.pick([
        clock.now(),
        clock.now() - 1000,
        Number.NaN,
        Number.POSITIVE_INFINITY,
        -1,
        0,
        2 ** 60,
      ]);
      const policy = g.pick(policyNames);
      const key = g.chance(0.8) ? g.key() : g.pick(['', 'a'.repeat(513), '\n', 'ok']);
      const cost = g.pick([1, 1, 1, 2, 0, -1, 1.5, Number.NaN, 100, 101, 2 ** 40]);
      const keys = g.chance(0.2) ? g.pick([[], [key, 'ok'], [key, key]]) : key;
      switch (g.int(4)) {
        case 0:
          checkGuard('check', () => target.check(policy, keys as string, cost));
          break;
        case 1:
          checkGuard('checkAt', () => target.checkAt(time, policy, keys as string, cost));
          break;
        case 2:
          checkGuard('checkAll', () =>
            target.checkAll(
              g.pick([
                [[policy, key]],
                [
                  [policy, key],
                  ['api', 'k1'],
                ],
                [],
                [['api']],
              ]) as [string, string][],
              cost,
            ),
          );
          break;
        default:
          checkGuard('checkAllAt', () => target.checkAllAt(time, [[policy, key]], cost));
      }
    }

    if (i % 64 === 0) {
      // the target keeps talking to honest peers, and they to it
      guard('buildGossip', () => {
        const m = target.buildGossip();
        for (const h of honest) {
          const r = h.receiveGossip('target', m);
          if (!r.ok && r.reason !== 'too-many-peers')
            fail(`honest peer refused the target's gossip: ${r.reason}`);
        }
      });
      if (i % 512 === 0) refreshCorpus();
      guard('invariants', () => {
        const s = target.stats();
        if (s.keys > MAX_KEYS) fail(`keys ${s.keys} > ${MAX_KEYS}`);
        if (s.peerTable > MAX_PEERS) fail(`peer table ${s.peerTable} > ${MAX_PEERS}`);
        target.peerViews();
        for (const p of FUZZ_POLICIES) {
          const limit = p.limit;
          for (const k of ['hot', 'k1', 'k2', `k${g.int(600)}`]) {
            const est = target.estimate(p.name, k);
            // every origin in the table at most 2L, the floor at most 2L, our own at most L
            const bound = (s.peerTable + 2) * 2 * limit + limit;
            if (!Number.isFinite(est) || est < 0 || est > bound)
              fail(`estimate ${p.name}/${k} = ${est} (bound ${bound})`);
          }
        }
      });
    }
  }
  report.capped = target.stats().capped;
  report.peersIgnored = target.stats().peersIgnored;
  for (const e of [target, ...honest]) {
    for (const [k, v] of Object.entries(e.stats().dropped)) report.dropped[k] = (report.dropped[k] ?? 0) + v;
  }
  return report;
}
