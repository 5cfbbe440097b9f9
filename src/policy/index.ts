export { compilePolicies, compilePolicy, type PolicySet } from './compile.js';
export {
  DEFAULT_BUCKETS,
  MAX_BUCKETS,
  MAX_CELLS,
  MAX_NAME_LENGTH,
  MAX_WINDOW_MS,
  MIN_WINDOW_MS,
} from './constants.js';
export { checkCost } from './cost.js';
export { canonicalPolicyJson, POLICY_SCHEMA, policySetVersion, policyVersion } from './version.js';
