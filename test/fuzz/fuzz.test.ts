import { describe, expect, it } from 'vitest';
import { engine, expectCode, T0 } from '../decision/helpers.js';
import { fuzz } from './fuzz.js';

describe('fuzz: decoder and every engine entry point (seeded)', () => {
  it('20,000 random, mutated and hostile inputs: nothing escapes, every refusal is counted, tables stay bounded', () => {
    const r = fuzz(20_000, 11);
    expect(r.failures).toEqual([]);
    expect(r.inputs).toBe(20_000);
    // every kind and target was exercised, and both verdicts happened
    for (const k of ['random', 'mutated', 'hostile', 'valid']) expect(r.kinds[k]).toBeGreaterThan(1000);
    for (const t of ['decodeMessage', 'receiveGossip', 'answerSync', 'receiveSyncResponse', 'check']) {
      expect(r.targets[t]).toBeGreaterThan(1000);
    }
    expect(r.accepted).toBeGreaterThan(300);
    expect(r.capped).toBeGreaterThan(0);
    expect(r.peersIgnored).toBeGreaterThan(0);
    for (const reason of [
      'bad-magic',
      'truncated',
      'bad-field',
      'sync-bad-type',
      'too-many-keys',
      'too-many-peers',
      'peer-ignored',
      'sync-self',
      // third-party origins of an answer: taken as members gone, or skipped where heard (was sync-foreign-entry)
      'sync-known-origin',
      'sync-gone-over-limit',
    ]) {
      expect(r.dropped[reason] ?? 0, reason).toBeGreaterThan(0);
    }
  });

  it('is deterministic for a seed', () => {
    expect(fuzz(2000, 3)).toEqual(fuzz(2000, 3));
  });
});

describe('what the fuzzer found (regressions)', () => {
  it('BUG: a time of 2^60 ms hung the engine for good (bucket ids past 2^53: b++ stood still); now ERR_CLOCK_INVALID', () => {
    const { e } = engine([{ name: 'p', limit: 5, windowMs: 1000 }]);
    expectCode(() => e.checkAt(2 ** 60, 'p', 'k'), 'ERR_CLOCK_INVALID');
    expectCode(() => e.checkAt(-(2 ** 60), 'p', 'k'), 'ERR_CLOCK_INVALID');
    expect(e.checkAt(T0, 'p', 'k').allowed).toBe(true);
  });

  it('BUG: checkAll with a pair missing its key threw a TypeError; now ERR_KEY_INVALID', () => {
    const { e } = engine([{ name: 'p', limit: 5, windowMs: 1000 }]);
    expectCode(() => e.checkAll([['p'] as unknown as [string, string]]), 'ERR_KEY_INVALID');
    expect(e.check('p', 'k').allowed).toBe(true);
  });
});
