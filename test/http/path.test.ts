import { describe, expect, it } from 'vitest';
import { foldCase, normalizePath } from '../../src/http/path.js';

describe('normalizePath', () => {
  it.each([
    [undefined, '/'],
    ['', '/'],
    ['/', '/'],
    ['/a/b', '/a/b'],
    ['/a/b?x=1', '/a/b'],
    ['/a/b#f', '/a/b'],
    ['/a//b///', '/a/b'],
    ['//', '/'],
    ['/%61%2Fb', '/a/b'],
    ['/%E0%A4%A', '/%E0%A4%A'],
    ['*', '/*'],
  ])('%j → %j', (input, want) => expect(normalizePath(input)).toBe(want));
  it('returns an already-normal path as is, and bounds the work on huge ones', () => {
    const p = '/already/normal';
    expect(normalizePath(p)).toBe(p);
    expect(normalizePath(`/${'a'.repeat(100_000)}`).length).toBeLessThanOrEqual(2048);
  });
  it('foldCase', () => {
    expect(foldCase('/Login')).toBe('/login');
    const s = '/login';
    expect(foldCase(s)).toBe(s);
  });
});
