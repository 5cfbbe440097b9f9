import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Clock, ManualClock } from '../../src/clock.js';
import { decodeMessage, LIMITS, TYPE_GOSSIP } from '../../src/crdt/codec.js';
import { Engine } from '../../src/decision/engine.js';
import { ErrorCodes } from '../../src/errors.js';
import { worstRolling } from '../../src/sim/metrics.js';
import type { PolicySpec } from '../../src/types.js';
import { engine, expectCode, spend, T0 } from './helpers.js';

const P: PolicySpec = { name: 'p', limit: 10, windowMs: 1000 };

describe('Engine as a single-node limiter', () => {
  it('admits L in a window, counting remaining down, then denies with rule global-limit', () => {
    const { e, clock } = engine([P]);
    for (let i = 0; i < 10; i++) {
      clock.advance(3);
      const d = e.check('p', 'k');
      expect(d).toMatchObject({
        allowed: true,
        limited: false,
        rule: 'allow',
        mode: 'global',
        policy: 'p',
        key: 'k',
      });
      expect(d.remaining).toBe(9 - i);
      expect(d.retryAfterMs).toBe(0);
      expect(d.limit).toBe(10);
      expect(e.estimate('p', 'k')).toBe(i + 1);
    }
    for (let i = 0; i < 5; i++) {
      const d = e.check('p', 'k');
      expect(d).toMatchObject({
        allowed: false,
        limited: true,
        rule: 'global-limit',
        mode: 'global',
        remaining: 0,
      });
      expect(d.retryAfterMs).toBeGreaterThan(0);
    }
    expect(e.estimate('p', 'k')).toBe(10); // denied requests spend nothing
    const s = e.stats();
    expect(s).toMatchObject({ decisions: 15, allowed: 10, limited: 5, shadowLimited: 0, keys: 1 });
    expect(s.byMode.global).toBe(15);
  });

  it('a new window admits again: own admissions leave it when they are W old, a burst at once', () => {
    const { e, clock } = engine(
      [{ name: 'p', limit: 10, windowMs: 1000, buckets: 10 }],
      {},
      new ManualClock(0),
    );
    expect(spend(e, 'p', 'k', 20)).toBe(10); // all at t = 0, in bucket 0 = [0, 100)
    clock.set(999);
    expect(e.check('p', 'k').allowed).toBe(false);
    clock.set(1000); // bucket 0 is the oldest; its burst is exactly W old: out (window (now - W, now])
    expect(e.estimate('p', 'k')).toBe(0);
    // The sliding-window-counter weight would still count half of it at 1050 (5) and admit only 5:
    // a burst decided at one instant is wholly in or wholly out, never pro rata.
    clock.set(1050);
    expect(spend(e, 'p', 'k', 20)).toBe(10);
    expect(e.estimate('p', 'k')).toBe(10);
  });

  it('bursts decided at one instant (a batch, a backlog) do not open the limit (issue 11 flood drill)', () => {
    // 2,000/s offered in bursts against L = 1,000/s, k = 50: the uniform weight of the oldest
    // bucket counted a burst pro rata as it slid out and admitted 1,183 (bursts of 200) to
    // 1,225 (bursts of 990) in a rolling second
    for (const burst of [1, 200, 990]) {
      const { e, clock } = engine(
        [{ name: 'hot', limit: 1000, windowMs: 1000, buckets: 50 }],
        {},
        new ManualClock(T0),
      );
      const admitted: number[] = [];
      let seed = 7;
      const rnd = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
      };
      for (let i = 0; i < 40_000 / burst; i++) {
        clock.advance(Math.round(rnd() * burst));
        for (let j = 0; j < burst; j++) if (e.check('hot', 'ip:hot').allowed) admitted.push(clock.now());
      }
      expect(worstRolling(admitted, 1000), `bursts of ${burst}`).toBeLessThanOrEqual(
        burst === 1 ? 1010 : 1000,
      );
    }
  });

  it('own admissions spread over a bucket leave the window by eighth of it, never fewer than are inside', () => {
    const { e, clock } = engine(
      [{ name: 'p', limit: 100, windowMs: 1000, buckets: 10 }],
      {},
      new ManualClock(0),
    );
    // 10 admissions at t = 20, 30, ..., 80 and 2 more at 80: span 20..80 of bucket 0
    for (let t = 20; t <= 80; t += 10) {
      clock.set(t);
      e.check('p', 'k');
    }
    e.check('p', 'k');
    e.check('p', 'k');
    expect(e.estimate('p', 'k')).toBe(9);
    clock.set(1010); // cut at 10 of [0, 100): all inside
    expect(e.estimate('p', 'k')).toBe(9);
    // kept by eighth of the bucket (12.5 ms) with each eighth's last admission, rounded up to
    // 1/504 of the bucket (0.2 ms): [12.5, 25) 1 (last 20.04), [25, 37.5) 1 (30.16),
    // [37.5, 50) 1 (40.08), [50, 62.5) 2 (60.12), [62.5, 75) 1 (70.04), [75, 87.5) 3 (80.16)
    clock.set(1050); // 60, 70 and the three at 80 are inside (5): the eighths still holding any, whole
    expect(e.estimate('p', 'k')).toBe(6);
    clock.set(1070); // the one at 70 is W old, its time kept as 70.04: in for 0.04 ms more
    expect(e.estimate('p', 'k')).toBe(4);
    clock.set(1071);
    expect(e.estimate('p', 'k')).toBe(3);
    clock.set(1081); // the last ones are more than W old
    expect(e.estimate('p', 'k')).toBe(0);
  });

  it('retryAfterMs: 1 ms before it (at t + r - 2) still denies, 1 ms after it (t + r + 1) admits (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 10, max: 3000 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 5 })), {
          minLength: 1,
          maxLength: 40,
        }),
        (L, W, k, start, steps) => {
          const spec = [{ name: 'p', limit: L, windowMs: W, buckets: Math.min(k, W) }];
          const replay = (n: number) => {
            const r = engine(spec, {}, new ManualClock(T0 + start));
            for (const [dt, c] of steps.slice(0, n)) {
              r.clock.advance(dt);
              r.e.check('p', 'k', Math.min(c, L));
            }
            return r;
          };
          const { e, clock } = replay(0);
          for (let i = 0; i < steps.length; i++) {
            const [dt, c] = steps[i]!;
            clock.advance(dt);
            const cost = Math.min(c, L);
            const d = e.check('p', 'k', cost);
            if (d.allowed) continue;
            expect(d.rule).toBe('global-limit');
            const r = d.retryAfterMs;
            expect(r).toBeGreaterThanOrEqual(1);
            const t = clock.now();
            if (r >= 2) {
              const early = replay(i);
              early.clock.set(t + r - 2);
              expect(early.e.check('p', 'k', cost).allowed).toBe(false);
            }
            const late = replay(i);
            late.clock.set(t + r + 1);
            expect(late.e.check('p', 'k', cost).allowed).toBe(true);
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it('advancing by exactly retryAfterMs admits (epoch 0: float rounding at a whole-ms boundary)', () => {
    // L = 10, W = 1000, 4 buckets of 250 ms. 10 admitted at t = 0 (bucket 0); at t = 1 one more is denied.
    // They were admitted at one instant, so they leave the window together at exactly t = 1000.
    const { e, clock } = engine(
      [{ name: 'p', limit: 10, windowMs: 1000, buckets: 4 }],
      {},
      new ManualClock(0),
    );
    expect(spend(e, 'p', 'k', 10)).toBe(10);
    clock.set(1);
    const d = e.check('p', 'k');
    expect(d.retryAfterMs).toBe(999);
    clock.advance(d.retryAfterMs);
    expect(e.check('p', 'k')).toMatchObject({ allowed: true });
  });

  it('BUG: advancing by exactly retryAfterMs admits at a real epoch time (T0 = 1.7e12 ms)', () => {
    // L = 10, W = 1000, 1 bucket. 10 admitted at T0 + 125 (bucket [T0, T0 + 1000), the start of
    // its second eighth: a time kept exactly); at T0 + 225 one more is denied. They leave together
    // at T0 + 1125, so retryAfterMs = 900. now / bw = 1700000001.125 keeps only ~7 decimal digits
    // of its fraction: the comparison must hold at that boundary.
    const { e, clock } = engine(
      [{ name: 'p', limit: 10, windowMs: 1000, buckets: 1 }],
      {},
      new ManualClock(T0 + 125),
    );
    expect(spend(e, 'p', 'k', 10)).toBe(10);
    clock.set(T0 + 225);
    const d = e.check('p', 'k');
    expect(d.retryAfterMs).toBe(900);
    clock.advance(d.retryAfterMs);
    expect(e.check('p', 'k')).toMatchObject({ allowed: true });
    expect(e.estimate('p', 'k')).toBeCloseTo(1, 9);
  });

  it('resetMs: the window is empty again after resetMs', () => {
    const { e, clock } = engine(
      [{ name: 'p', limit: 10, windowMs: 1000, buckets: 10 }],
      {},
      new ManualClock(0),
    );
    e.check('p', 'k');
    clock.set(30);
    const d = e.check('p', 'k');
    expect(d.resetMs).toBe(1070); // bucket 0 leaves the window at 1100
    clock.advance(d.resetMs);
    expect(e.estimate('p', 'k')).toBe(0);
    expect(e.check('p', 'k').remaining).toBe(9);
  });

  it('resetMs of the first admission counts what it spent', () => {
    // Decision.resetMs: "ms until the deciding key's window has room for a full limit again".
    // After the first admission the window holds 1 until t = 1100, yet the decision says 0.
    const { e } = engine([{ name: 'p', limit: 10, windowMs: 1000, buckets: 10 }], {}, new ManualClock(0));
    expect(e.check('p', 'k').resetMs).toBe(1100);
  });

  it('keys are independent', () => {
    const { e } = engine([P]);
    expect(spend(e, 'p', 'a', 15)).toBe(10);
    expect(spend(e, 'p', 'b', 15)).toBe(10);
    expect(e.estimate('p', 'a')).toBe(10);
    expect(e.estimate('p', 'zzz')).toBe(0);
    expect(e.estimate('nope', 'a')).toBe(0);
  });

  it('weighted costs spend their cost; remaining accounts for it', () => {
    const { e } = engine([{ name: 'p', limit: 10, windowMs: 1000, maxCost: 10 }]);
    expect(e.check('p', 'k', 4)).toMatchObject({ allowed: true, remaining: 6 });
    expect(e.check('p', 'k', 6)).toMatchObject({ allowed: true, remaining: 0 });
    expect(e.check('p', 'k', 1)).toMatchObject({ allowed: false, rule: 'global-limit' });
    expect(e.estimate('p', 'k')).toBe(10);
  });
});

describe('multi-key requests: spend only if every key allows', () => {
  it('check(policy, keys[]): a denied key spends nothing on any key', () => {
    const { e } = engine([P]);
    expect(spend(e, 'p', 'full', 10)).toBe(10);
    spend(e, 'p', 'b', 3);
    const d = e.check('p', ['a', 'b', 'full']);
    expect(d).toMatchObject({ allowed: false, limited: true, key: 'full', rule: 'global-limit' });
    expect(e.estimate('p', 'a')).toBe(0);
    expect(e.estimate('p', 'b')).toBe(3);
    expect(e.estimate('p', 'full')).toBe(10);
    const ok = e.check('p', ['a', 'b']);
    expect(ok).toMatchObject({ allowed: true, limited: false, key: 'b', remaining: 6 }); // b has the least left
    expect(e.estimate('p', 'a')).toBe(1);
    expect(e.estimate('p', 'b')).toBe(4);
  });

  it('checkAll across policies: outcomes per pair, the refusing pair decides, nothing spent when denied', () => {
    const { e } = engine([
      { name: 'ip', limit: 5, windowMs: 1000 },
      { name: 'acct', limit: 3, windowMs: 60_000 },
      { name: 'loc', scope: 'local', limit: 100, windowMs: 1000 },
    ]);
    const pairs = [
      ['ip', 'ip:1.2.3.4'],
      ['acct', 'acct:7'],
      ['loc', 'acct:7'],
    ] as const;
    for (let i = 0; i < 3; i++) {
      const d = e.checkAll(pairs);
      expect(d.allowed).toBe(true);
      expect(d.policy).toBe('acct'); // least remaining relative to its limit
      expect(d.outcomes).toEqual([
        {
          policy: 'ip',
          key: 'ip:1.2.3.4',
          limit: 5,
          windowMs: 1000,
          remaining: 4 - i,
          resetMs: expect.any(Number),
          retryAfterMs: 0,
          limited: false,
          shadow: false,
        },
        {
          policy: 'acct',
          key: 'acct:7',
          limit: 3,
          windowMs: 60_000,
          remaining: 2 - i,
          resetMs: expect.any(Number),
          retryAfterMs: 0,
          limited: false,
          shadow: false,
        },
        {
          policy: 'loc',
          key: 'acct:7',
          limit: 100,
          windowMs: 1000,
          remaining: expect.any(Number),
          resetMs: expect.any(Number),
          retryAfterMs: 0,
          limited: false,
          shadow: false,
        },
      ]);
    }
    const d = e.checkAll(pairs);
    expect(d).toMatchObject({
      allowed: false,
      limited: true,
      policy: 'acct',
      key: 'acct:7',
      rule: 'global-limit',
    });
    expect(d.outcomes.map((o) => o.limited)).toEqual([false, true, false]);
    // the refusing pair's wait is the request's wait; allowing pairs say 0
    expect(d.outcomes[1]!.retryAfterMs).toBe(d.retryAfterMs);
    expect(d.retryAfterMs).toBeGreaterThan(0);
    expect(d.outcomes[0]!.retryAfterMs).toBe(0);
    expect(e.estimate('ip', 'ip:1.2.3.4')).toBe(3);
    expect(e.estimate('acct', 'acct:7')).toBe(3);
    // the local policy spent nothing either: it still has 97 of 100
    expect(e.check('loc', 'acct:7').remaining).toBe(96);
    expect(e.checkAll([['ip', 'ip:1.2.3.4']]).allowed).toBe(true);
    expect(e.estimate('ip', 'ip:1.2.3.4')).toBe(4);
  });

  it('checkAll rejects bad input before spending anything', () => {
    const { e } = engine([P]);
    expectCode(() => e.checkAll([]), ErrorCodes.KEY_INVALID);
    expectCode(() => e.checkAll('p' as never), ErrorCodes.KEY_INVALID);
    expectCode(
      () =>
        e.checkAll([
          ['p', 'a'],
          ['nope', 'b'],
        ]),
      ErrorCodes.POLICY_UNKNOWN,
    );
    expectCode(() => e.checkAll([['p', 'a'], 'p' as never]), ErrorCodes.POLICY_UNKNOWN);
    expectCode(() => e.checkAll([['p', 'a']], 0), ErrorCodes.COST_INVALID);
    expectCode(
      () =>
        e.checkAll([
          ['p', 'a'],
          ['p', ''],
        ]),
      ErrorCodes.KEY_INVALID,
    );
    expect(e.estimate('p', 'a')).toBe(0);
  });
});

describe('shadow mode', () => {
  const S: PolicySpec = { name: 's', limit: 3, windowMs: 1000, shadow: true };

  it('checkAll: a limited shadow policy is allowed, flagged limited, and spends nothing; others still spend', () => {
    const { e } = engine([S, P]);
    for (let i = 0; i < 3; i++) expect(e.checkAll([['s', 'k']]).allowed).toBe(true);
    for (let i = 0; i < 4; i++) {
      const d = e.checkAll([
        ['s', 'k'],
        ['p', 'k'],
      ]);
      expect(d).toMatchObject({
        allowed: true,
        limited: true,
        shadow: true,
        policy: 's',
        rule: 'global-limit',
      });
    }
    expect(e.estimate('s', 'k')).toBe(3);
    expect(e.estimate('p', 'k')).toBe(4);
    expect(e.stats().shadowLimited).toBe(4);
    expect(e.stats().limited).toBe(0);
  });

  it('check with a key array: allowed true, limited true, nothing spent', () => {
    const { e } = engine([S]);
    spend(e, 's', 'k', 3);
    const d = e.check('s', ['k']);
    expect(d).toMatchObject({ allowed: true, limited: true, shadow: true });
    expect(e.estimate('s', 'k')).toBe(3);
  });

  it('check with a single key string: allowed true, limited true, nothing spent', () => {
    const { e } = engine([S]);
    spend(e, 's', 'k', 3);
    const d = e.check('s', 'k');
    expect(d).toMatchObject({ limited: true, shadow: true, rule: 'global-limit' });
    expect(e.estimate('s', 'k')).toBe(3);
    expect(d.allowed).toBe(true); // Decision.allowed: "true in shadow mode even when limited"
    expect(e.stats().shadowLimited).toBe(1);
  });

  it('a refusing real policy blocks even when a shadow policy is also limited', () => {
    const { e } = engine([S, { name: 'q', limit: 1, windowMs: 1000 }]);
    spend(e, 's', 'k', 3);
    spend(e, 'q', 'k', 1);
    const d = e.checkAll([
      ['s', 'k'],
      ['q', 'k'],
    ]);
    expect(d).toMatchObject({ allowed: false, limited: true, policy: 'q', shadow: false });
  });
});

describe('weighted cost validation', () => {
  const C: PolicySpec = { name: 'c', limit: 10, windowMs: 1000, maxCost: 50 };

  it('costs that are not integers from 1 to maxCost throw ERR_COST_INVALID and spend nothing', () => {
    const { e } = engine([C, P]);
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 51, 1e9]) {
      expectCode(() => e.check('c', 'k', bad), ErrorCodes.COST_INVALID);
      expectCode(() => e.checkAll([['c', 'k']], bad), ErrorCodes.COST_INVALID);
    }
    for (const bad of ['1', null, {}, 2n] as unknown[]) {
      expectCode(() => e.check('c', 'k', bad as number), ErrorCodes.COST_INVALID);
    }
    expectCode(() => e.check('p', 'k', 11), ErrorCodes.COST_INVALID); // maxCost defaults to the limit
    expect(e.stats().decisions).toBe(0);
    expect(e.estimate('c', 'k')).toBe(0);
    expect(e.check('c', 'k', 50).allowed).toBe(false);
  });

  it('a cost above the limit but within maxCost is denied as cost-exceeds-limit with retryAfterMs -1, never admitted', () => {
    const { e, clock } = engine([C]);
    for (let i = 0; i < 30; i++) {
      const d = e.check('c', 'k', 11);
      expect(d).toMatchObject({
        allowed: false,
        limited: true,
        rule: 'cost-exceeds-limit',
        retryAfterMs: -1,
      });
      clock.advance(500);
    }
    expect(e.estimate('c', 'k')).toBe(0);
    expect(e.check('c', 'k', 10).allowed).toBe(true);
  });

  it('cost-exceeds-limit on a local-scope policy too', () => {
    const { e } = engine([{ name: 'l', scope: 'local', limit: 5, windowMs: 1000, maxCost: 9 }]);
    expect(e.check('l', 'k', 6)).toMatchObject({
      allowed: false,
      rule: 'cost-exceeds-limit',
      retryAfterMs: -1,
      mode: 'local',
    });
  });
});

describe('bad input', () => {
  it('unknown policy throws ERR_POLICY_UNKNOWN', () => {
    const { e } = engine([P]);
    expectCode(() => e.check('nope', 'k'), ErrorCodes.POLICY_UNKNOWN);
    expectCode(() => e.check(undefined as never, 'k'), ErrorCodes.POLICY_UNKNOWN);
    expect(e.policy('nope')).toBeUndefined();
    expect(e.policy('p')?.limit).toBe(10);
  });

  it('bad keys throw ERR_KEY_INVALID and spend nothing', () => {
    const { e } = engine([P, { name: 'l', scope: 'local', limit: 5, windowMs: 1000 }]);
    const bad = [
      '',
      'x'.repeat(513),
      'é'.repeat(257), // 514 UTF-8 bytes
      'a\nb',
      '\u0000',
      'tab\there',
      'del\u007f',
      'c1\u0085',
      'half\ud800',
      42 as unknown as string,
    ];
    for (const key of bad) {
      for (const pol of ['p', 'l']) {
        expectCode(() => e.check(pol, key), ErrorCodes.KEY_INVALID);
        expectCode(() => e.check(pol, ['ok', key]), ErrorCodes.KEY_INVALID);
        expectCode(() => e.checkAll([[pol, key]]), ErrorCodes.KEY_INVALID);
      }
    }
    expectCode(() => e.check('p', []), ErrorCodes.KEY_INVALID);
    expect(e.estimate('p', 'ok')).toBe(0);
    expect(e.check('p', 'x'.repeat(512)).allowed).toBe(true);
    expect(e.check('p', 'é'.repeat(256)).allowed).toBe(true);
    expect(e.check('p', 'ok').remaining).toBe(9);
  });

  it('a NaN or infinite clock throws ERR_CLOCK_INVALID and changes nothing', () => {
    let t: number = T0;
    const clock: Clock = { now: () => t };
    const e = new Engine({ gossipIntervalMs: 10, policies: [P], clock });
    expect(e.check('p', 'k').allowed).toBe(true);
    for (const bad of [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      'x' as unknown as number,
    ]) {
      t = bad;
      expectCode(() => e.check('p', 'k'), ErrorCodes.CLOCK_INVALID);
      expectCode(() => e.buildGossip(), ErrorCodes.CLOCK_INVALID);
    }
    t = T0 + 1;
    expect(e.estimate('p', 'k')).toBe(1);
    expect(e.stats().decisions).toBe(1);
    expectCode(() => new ManualClock(Number.NaN), ErrorCodes.CLOCK_INVALID);
  });

  it('a clock that goes backwards never admits more than the same run on a clamped clock (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: -400, max: 300 }), fc.integer({ min: 1, max: 3 })), {
          maxLength: 120,
        }),
        (steps) => {
          const raw = new ManualClock(T0);
          const clamped = new ManualClock(T0);
          const specs: PolicySpec[] = [
            { name: 'p', limit: 8, windowMs: 500, buckets: 5 },
            { name: 'l', scope: 'local', limit: 8, windowMs: 500, algorithm: 'sliding-window-counter' },
            {
              name: 'f',
              limit: 50,
              windowMs: 500,
              local: { algorithm: 'token-bucket', limit: 4, windowMs: 200 },
            },
          ];
          const a = new Engine({ gossipIntervalMs: 10, policies: specs, clock: raw });
          const b = new Engine({ gossipIntervalMs: 10, policies: specs, clock: clamped });
          let t = T0;
          let max = Number.NEGATIVE_INFINITY;
          let admittedA = 0;
          let admittedB = 0;
          let backwards = 0;
          for (const [dt, cost] of steps) {
            t += dt;
            if (t < max) backwards++;
            max = Math.max(max, t);
            raw.set(t);
            clamped.set(max);
            for (const pol of ['p', 'l', 'f']) {
              const da = a.check(pol, 'k', cost);
              const db = b.check(pol, 'k', cost);
              expect(da.allowed).toBe(db.allowed);
              if (da.allowed) admittedA += cost;
              if (db.allowed) admittedB += cost;
            }
          }
          expect(admittedA).toBe(admittedB);
          // every reading earlier than one already used is counted (stats() reads the clock too)
          expect(a.stats().clockBackwards).toBe(backwards * 3 + (t < max ? 1 : 0));
          expect(b.stats().clockBackwards).toBe(0);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('local scope and front limiters', () => {
  it('a local-scope policy decides in mode local, refuses with local-limit and is never gossiped', () => {
    const { e, clock } = engine([{ name: 'l', scope: 'local', limit: 5, windowMs: 1000 }, P]);
    for (let i = 0; i < 5; i++)
      expect(e.check('l', 'k')).toMatchObject({ allowed: true, mode: 'local', rule: 'allow' });
    const d = e.check('l', 'k');
    expect(d).toMatchObject({ allowed: false, limited: true, mode: 'local', rule: 'local-limit' });
    expect(d.retryAfterMs).toBe(200); // GCRA: one cell per 200 ms
    expect(e.estimate('l', 'k')).toBe(0); // no global count
    const m = decodeMessage(e.buildGossip());
    expect(m.ok && m.message.type === TYPE_GOSSIP && m.message.entries.length).toBe(0);
    clock.advance(200);
    expect(e.check('l', 'k').allowed).toBe(true);
    expect(e.stats().byMode.local).toBe(7);
  });

  it('a global policy with a local front limiter refuses bursts with local-limit before the global limit', () => {
    const { e, clock } = engine([
      {
        name: 'g',
        limit: 100,
        windowMs: 1000,
        local: { algorithm: 'token-bucket', limit: 5, windowMs: 1000 },
      },
    ]);
    expect(spend(e, 'g', 'k', 5)).toBe(5);
    const d = e.check('g', 'k');
    expect(d).toMatchObject({ allowed: false, limited: true, rule: 'local-limit', mode: 'global' });
    expect(d.retryAfterMs).toBe(200);
    expect(e.estimate('g', 'k')).toBe(5);
    clock.advance(200);
    expect(e.check('g', 'k').allowed).toBe(true);
    expect(e.estimate('g', 'k')).toBe(6);
  });

  it('the global limit still applies behind a generous front limiter', () => {
    const { e } = engine([
      { name: 'g', limit: 5, windowMs: 1000, local: { algorithm: 'gcra', limit: 100, windowMs: 1000 } },
    ]);
    expect(spend(e, 'g', 'k', 5)).toBe(5);
    expect(e.check('g', 'k').rule).toBe('global-limit');
  });
});

describe('key cap', () => {
  it('a flood of distinct keys keeps keys <= maxKeys and counts evictions', () => {
    const { e, clock } = engine([P, { name: 'l', scope: 'local', limit: 5, windowMs: 1000 }], {
      maxKeys: 100,
    });
    for (let i = 0; i < 5000; i++) {
      e.check('p', `flood:${i}`);
      e.check('l', `flood:${i}`);
      if (i % 100 === 0) clock.advance(1);
      const s = i % 250 === 0 ? e.stats() : undefined;
      if (s !== undefined) expect(s.keys).toBeLessThanOrEqual(200);
    }
    const s = e.stats();
    expect(s.keys).toBeLessThanOrEqual(200); // 100 per policy store
    expect(s.evictions).toBeGreaterThanOrEqual(2 * 5000 - s.keys);
    expect(s.evictions + s.keys).toBe(10_000);
  });

  it('eviction drops idle keys first: a key with counts in its window survives a flood after time passes', () => {
    const { e, clock } = engine([P], { maxKeys: 50 });
    for (let i = 0; i < 49; i++) e.check('p', `old:${i}`);
    clock.advance(5000); // every old key has aged out
    e.check('p', 'live');
    for (let i = 0; i < 40; i++) e.check('p', `new:${i}`);
    expect(e.stats().keys).toBeLessThanOrEqual(50);
    expect(e.estimate('p', 'live')).toBe(1);
  });
});

describe('gossip header', () => {
  it('carries reach as given (clamped to 1..origin cap), else every live member', () => {
    const { e } = engine([P]);
    const read = (bytes: Uint8Array) => {
      const m = decodeMessage(bytes);
      if (!m.ok || m.message.type !== TYPE_GOSSIP) throw new Error('expected a gossip message');
      return m.message;
    };
    expect(read(e.buildGossip()).reach).toBe(1);
    expect(read(e.buildGossip(undefined, 5)).reach).toBe(5);
    expect(read(e.buildGossip(undefined, 0)).reach).toBe(1);
    expect(read(e.buildGossip(undefined, Number.NaN)).reach).toBe(1);
    expect(read(e.buildGossip(undefined, 1e9)).reach).toBe(LIMITS.origins);
    expect(e.memberCount()).toBe(1);
  });
});

describe('hot-key shortcut', () => {
  it('a hot key evicted by gossip for new keys starts a fresh window in the store, never the dropped one', () => {
    const clock = new ManualClock(T0);
    const peer = new Engine({ gossipIntervalMs: 10, policies: [P], clock, nodeId: 'peer', maxKeys: 1000 });
    const e = new Engine({ gossipIntervalMs: 10, policies: [P], clock, nodeId: 'self', maxKeys: 10 });
    expect(spend(e, 'p', 'hot', 3)).toBe(3);
    clock.advance(5000); // 'hot' has aged out: the first key eviction drops
    for (let i = 0; i < 20; i++) peer.check('p', `peer:${i}`);
    expect(e.receiveGossip('peer', peer.buildGossip()).ok).toBe(true);
    expect(e.stats().evictions).toBeGreaterThan(0);
    // the hot key was dropped from the store; checking it again must count in the store's window
    expect(e.check('p', 'hot').allowed).toBe(true);
    expect(e.estimate('p', 'hot')).toBe(1);
    const m = decodeMessage(e.buildGossip());
    if (!m.ok || m.message.type !== TYPE_GOSSIP) throw new Error('expected a gossip message');
    expect(m.message.entries.map((x) => x.key)).toContain('hot');
  });

  it('switching policies and keys between calls decides each on its own window', () => {
    const { e } = engine([P, { name: 'q', limit: 2, windowMs: 1000 }]);
    expect(spend(e, 'p', 'a', 10)).toBe(10);
    expect(e.check('q', 'a').allowed).toBe(true);
    expect(e.check('p', 'b').allowed).toBe(true);
    expect(e.check('q', 'a').allowed).toBe(true);
    expect(e.check('q', 'a').allowed).toBe(false);
    expect(e.check('p', 'a').allowed).toBe(false);
    expect(e.estimate('p', 'b')).toBe(1);
  });
});

describe('construction', () => {
  it('rejects bad options with ERR_CONFIG_INVALID and bad policies with ERR_POLICY_INVALID', () => {
    const c = new ManualClock(0);
    expectCode(() => new Engine(null as never), ErrorCodes.CONFIG_INVALID);
    expectCode(() => new Engine({ policies: [P], clock: c, gossipIntervalMs: 0 }), ErrorCodes.CONFIG_INVALID);
    expectCode(
      () => new Engine({ gossipIntervalMs: 10, policies: [P], clock: c, maxKeys: 1.5 }),
      ErrorCodes.CONFIG_INVALID,
    );
    expectCode(
      () => new Engine({ gossipIntervalMs: 10, policies: [P], clock: c, nodeId: '' }),
      ErrorCodes.CONFIG_INVALID,
    );
    expectCode(
      () => new Engine({ gossipIntervalMs: 10, policies: [P], clock: c, earlyPublishFraction: 0 }),
      ErrorCodes.CONFIG_INVALID,
    );
    // aligned rounds' lead, removed with them: refused, not silently ignored
    expectCode(
      () => new Engine({ gossipIntervalMs: 10, policies: [P], clock: c, roundLeadMs: 5 } as never),
      ErrorCodes.CONFIG_INVALID,
    );
    expect(
      () => new Engine({ gossipIntervalMs: 10, policies: [P], clock: c, roundLeadMs: 5 } as never),
    ).toThrow(/was removed/);
    expectCode(() => new Engine({ gossipIntervalMs: 10, policies: [], clock: c }), ErrorCodes.POLICY_INVALID);
    expectCode(
      () => new Engine({ gossipIntervalMs: 10, policies: [{ name: 'p', limit: 0, windowMs: 1 }], clock: c }),
      ErrorCodes.POLICY_INVALID,
    );
  });

  it('the default stale/depart thresholds follow g and d', () => {
    const e = new Engine({
      policies: [P],
      clock: new ManualClock(0),
      gossipIntervalMs: 20,
      expectedDelayMs: 5,
    });
    expect(e.staleAfterMs).toBe(3 * 20 + 2 * 5);
    expect(e.ready).toBe(true);
  });
});

describe('multi-policy retry-after', () => {
  it('when several pairs refuse, the request waits for the slowest of them', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const e = new Engine({
      gossipIntervalMs: 10,
      clock,
      policies: [
        { name: 'fast', limit: 1, windowMs: 1000 },
        { name: 'slow', limit: 1, windowMs: 60_000 },
      ],
    });
    expect(
      e.checkAll([
        ['fast', 'k'],
        ['slow', 'k'],
      ]).allowed,
    ).toBe(true);
    const d = e.checkAll([
      ['fast', 'k'],
      ['slow', 'k'],
    ]);
    expect(d.allowed).toBe(false);
    const fast = d.outcomes[0]!.retryAfterMs;
    const slow = d.outcomes[1]!.retryAfterMs;
    expect(fast).toBeGreaterThan(0);
    expect(slow).toBeGreaterThan(fast);
    expect(d.retryAfterMs).toBe(slow);
    clock.advance(fast);
    expect(
      e.checkAll([
        ['fast', 'k'],
        ['slow', 'k'],
      ]).allowed,
    ).toBe(false);
    clock.advance(slow - fast);
    expect(
      e.checkAll([
        ['fast', 'k'],
        ['slow', 'k'],
      ]).allowed,
    ).toBe(true);
  });
});

describe('early publish (unsent own cost, kept by the engine beside the window)', () => {
  it('asks once a key’s unsent own cost reaches earlyPublishFraction of L; a gossip resets it', () => {
    const { e } = engine([{ name: 'p', limit: 100, windowMs: 1000 }], { earlyPublishFraction: 0.05 });
    expect(spend(e, 'p', 'k', 4)).toBe(4);
    expect(e.wantsEarlyPublish()).toBe(false);
    expect(spend(e, 'p', 'k', 1)).toBe(1);
    expect(e.wantsEarlyPublish()).toBe(true);
    e.buildGossip();
    expect(e.wantsEarlyPublish()).toBe(false);
    // counted again from the gossip on: 4 more are not enough
    expect(spend(e, 'p', 'k', 4)).toBe(4);
    expect(e.wantsEarlyPublish()).toBe(false);
    expect(spend(e, 'p', 'k', 1)).toBe(1);
    expect(e.wantsEarlyPublish()).toBe(true);
  });
});
