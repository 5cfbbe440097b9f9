import { ErrorCodes, RateMeshError } from '../errors.js';
import type { Policy } from '../types.js';
import { describeValue } from '../validate.js';

/**
 * Validates a request's weighted cost against a policy: an integer from 1 to
 * `policy.maxCost`; `undefined` means the default cost, 1. Anything else throws
 * RateMeshError `ERR_COST_INVALID` (field `cost`) naming the reason, and is
 * never admitted. A valid cost above the policy's limit is returned: the
 * decision then denies it with rule `cost-exceeds-limit` instead of throwing.
 */
export function checkCost(cost: unknown, policy: Pick<Policy, 'name' | 'maxCost'>): number {
  if (typeof cost === 'number' && Number.isInteger(cost) && cost >= 1 && cost <= policy.maxCost) return cost;
  if (cost === undefined) return 1;
  throw new RateMeshError(
    ErrorCodes.COST_INVALID,
    `${costReason(cost, policy)} (got ${describeValue(cost)})`,
    'cost',
  );
}

function costReason(cost: unknown, policy: Pick<Policy, 'name' | 'maxCost'>): string {
  const range = `an integer between 1 and ${policy.maxCost}`;
  if (typeof cost !== 'number') return `must be a number: ${range}`;
  if (Number.isNaN(cost)) return `must be a number, not NaN: ${range}`;
  if (!Number.isFinite(cost)) return `must be finite: ${range}`;
  if (!Number.isInteger(cost)) return `must be a whole number: ${range}`;
  if (cost < 1) return `must be at least 1: ${range}`;
  return `exceeds maxCost ${policy.maxCost} of policy ${JSON.stringify(policy.name)}: ${range}`;
}
