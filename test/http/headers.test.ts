import { parseItem, parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import {
  formatRateLimit,
  formatRateLimitPolicy,
  type HeaderMember,
  partitionKey,
  retryAfterSeconds,
  setLegacyHeaders,
  setStandardHeaders,
  sfString,
} from '../../src/http/headers.js';

const a: HeaderMember = { policy: 'per-ip', limit: 5, windowMs: 10_000, remaining: 3, resetSeconds: 7 };
const b: HeaderMember = {
  policy: 'acct.daily',
  limit: 1000,
  windowMs: 86_400_000,
  remaining: 0,
  resetSeconds: 61,
};

function collect(fn: (set: (n: string, v: string) => void) => void): Record<string, string> {
  const out: Record<string, string> = {};
  fn((n, v) => {
    out[n] = v;
  });
  return out;
}

describe('draft-11 fields', () => {
  it('RateLimit-Policy is an SF List of Strings with q and w, one member per policy', () => {
    const v = formatRateLimitPolicy([a, b]);
    expect(v).toBe('"per-ip";q=5;w=10, "acct.daily";q=1000;w=86400');
    const list = parseList(v);
    expect(list.map(([item]) => item)).toEqual(['per-ip', 'acct.daily']);
    expect(Object.fromEntries(list[0]![1])).toEqual({ q: 5, w: 10 });
    expect(Object.fromEntries(list[1]![1])).toEqual({ q: 1000, w: 86400 });
  });

  it('RateLimit carries r and t; pk is a Byte Sequence when given', () => {
    const pk = partitionKey('ip:203.0.113.7');
    const v = formatRateLimit([{ ...a, pk }, b]);
    const list = parseList(v);
    expect(list[0]![0]).toBe('per-ip');
    const p = list[0]![1];
    expect(p.get('r')).toBe(3);
    expect(p.get('t')).toBe(7);
    expect(p.get('pk')).toBeInstanceOf(ArrayBuffer);
    expect(Buffer.from(p.get('pk') as ArrayBuffer).length).toBe(12);
    expect(Object.fromEntries(list[1]![1])).toEqual({ r: 0, t: 61 });
  });

  it('never writes a window of 0 seconds, negative or fractional counts', () => {
    const v = formatRateLimitPolicy([{ ...a, windowMs: 250, limit: 2.7 }]);
    expect(Object.fromEntries(parseList(v)[0]![1])).toEqual({ q: 2, w: 1 });
    const r = formatRateLimit([{ ...a, remaining: -3 }]);
    expect(parseList(r)[0]![1].get('r')).toBe(0);
  });

  it('escapes names so they stay one valid String', () => {
    expect(parseItem(sfString('a"b\\c'))[0]).toBe('a"b\\c');
    expect(parseItem(sfString('naïve'))[0]).toBe('na?ve');
  });
});

describe('older drafts, as express-rate-limit shapes them', () => {
  it('draft-8: quoted name with q, w, pk; r and t', () => {
    const h = collect((set) => setStandardHeaders(set, 'draft-8', [a], a, 'ip:1.2.3.4'));
    const pol = parseList(h['RateLimit-Policy']!);
    expect(pol[0]![0]).toBe('per-ip');
    expect(pol[0]![1].get('q')).toBe(5);
    expect(pol[0]![1].get('w')).toBe(10);
    expect(pol[0]![1].get('pk')).toBeInstanceOf(ArrayBuffer);
    expect(Object.fromEntries(parseList(h.RateLimit!)[0]![1])).toEqual({ r: 3, t: 7 });
  });
  it('draft-7: limit=, remaining=, reset= in one field', () => {
    const h = collect((set) => setStandardHeaders(set, 'draft-7', [a], a, 'k'));
    expect(h).toEqual({ 'RateLimit-Policy': '5;w=10', RateLimit: 'limit=5, remaining=3, reset=7' });
  });
  it('draft-6: separate Limit, Remaining, Reset', () => {
    const h = collect((set) => setStandardHeaders(set, 'draft-6', [a], a, 'k'));
    expect(h).toEqual({
      'RateLimit-Policy': '5;w=10',
      'RateLimit-Limit': '5',
      'RateLimit-Remaining': '3',
      'RateLimit-Reset': '7',
    });
  });
  it('legacy X-RateLimit-* with the reset in epoch seconds', () => {
    const h = collect((set) => setLegacyHeaders(set, a, 1_700_000_000_000));
    expect(h).toEqual({
      'X-RateLimit-Limit': '5',
      'X-RateLimit-Remaining': '3',
      'X-RateLimit-Reset': '1700000007',
    });
  });
});

describe('Retry-After', () => {
  it('rounds up and is never 0', () => {
    expect(retryAfterSeconds(0)).toBe(1);
    expect(retryAfterSeconds(1)).toBe(1);
    expect(retryAfterSeconds(1000)).toBe(1);
    expect(retryAfterSeconds(1001)).toBe(2);
    expect(retryAfterSeconds(10_200)).toBe(11);
  });
});
