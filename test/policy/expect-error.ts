import { expect } from 'vitest';
import { type ErrorCode, isRateMeshError, RateMeshError } from '../../src/errors.js';

/** Runs `fn`, asserts it throws a RateMeshError with `code` and `field`, and returns the error. */
export function expectRateMeshError(
  fn: () => unknown,
  code: ErrorCode,
  field: string | undefined,
): RateMeshError {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(RateMeshError);
  if (!isRateMeshError(thrown)) throw new Error('unreachable');
  expect({ code: thrown.code, field: thrown.field }).toEqual({ code, field });
  // The message starts with the field path and says what was got.
  if (field !== undefined) expect(thrown.message.startsWith(`${field}: `)).toBe(true);
  return thrown;
}
