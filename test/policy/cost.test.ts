import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../src/errors.js';
import { checkCost, compilePolicy } from '../../src/policy/index.js';
import { expectRateMeshError } from './expect-error.js';

const policy = compilePolicy({ name: 'api', limit: 100, windowMs: 1000, maxCost: 250 });

describe('checkCost', () => {
  it.each([1, 2, 99, 100, 101, 250])(
    'accepts %s (costs above the limit are the decision’s to deny)',
    (cost) => {
      expect(checkCost(cost, policy)).toBe(cost);
    },
  );

  it('treats an absent cost as 1', () => {
    expect(checkCost(undefined, policy)).toBe(1);
  });

  it('defaults maxCost to the limit', () => {
    const p = compilePolicy({ name: 'p', limit: 10, windowMs: 1000 });
    expect(checkCost(10, p)).toBe(10);
    expectRateMeshError(() => checkCost(11, p), ErrorCodes.COST_INVALID, 'cost');
  });

  const range = 'an integer between 1 and 250';
  const cases: [string, unknown, string][] = [
    ['zero', 0, `cost: must be at least 1: ${range} (got 0)`],
    ['negative zero', -0, `cost: must be at least 1: ${range} (got -0)`],
    ['negative', -3, `cost: must be at least 1: ${range} (got -3)`],
    ['fractional', 1.5, `cost: must be a whole number: ${range} (got 1.5)`],
    ['tiny fraction', 0.0001, `cost: must be a whole number: ${range} (got 0.0001)`],
    ['NaN', Number.NaN, `cost: must be a number, not NaN: ${range} (got NaN)`],
    ['Infinity', Number.POSITIVE_INFINITY, `cost: must be finite: ${range} (got Infinity)`],
    ['-Infinity', Number.NEGATIVE_INFINITY, `cost: must be finite: ${range} (got -Infinity)`],
    ['above maxCost', 251, `cost: exceeds maxCost 250 of policy "api": ${range} (got 251)`],
    ['huge', 1e300, `cost: exceeds maxCost 250 of policy "api": ${range} (got 1e+300)`],
    ['string', '2', `cost: must be a number: ${range} (got "2")`],
    ['null', null, `cost: must be a number: ${range} (got null)`],
    ['boolean', true, `cost: must be a number: ${range} (got true)`],
    ['bigint', 2n, `cost: must be a number: ${range} (got 2n (a bigint))`],
    ['object', { valueOf: () => 2 }, `cost: must be a number: ${range} (got an object)`],
  ];

  it.each(cases)('rejects %s', (_what, cost, message) => {
    const err = expectRateMeshError(() => checkCost(cost, policy), ErrorCodes.COST_INVALID, 'cost');
    expect(err.message).toBe(message);
  });
});
