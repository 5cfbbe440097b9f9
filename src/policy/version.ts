import { createHash } from 'node:crypto';
import type { Policy } from '../types.js';

/**
 * Tag hashed with the policies; bump it when the meaning of a compiled field
 * changes, so nodes on old and new code do not claim the same version.
 */
export const POLICY_SCHEMA = 'ratemesh.policy/1';

/**
 * The canonical JSON of a set of compiled policies: policies sorted by name
 * (UTF-16 code unit order, locale independent), object keys sorted, every
 * default filled (the compiler fills them), an absent front limiter as `null`.
 * The order policies were given in therefore does not matter: only what they
 * mean does.
 */
export function canonicalPolicyJson(policies: readonly Policy[]): string {
  const sorted = [...policies].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return canonicalJson({ schema: POLICY_SCHEMA, policies: sorted });
}

/**
 * A stable version of a set of compiled policies: the first 16 hex characters
 * (64 bits) of the SHA-256 of {@link canonicalPolicyJson}. The same policies
 * give the same version in every process and in any order; any change to a
 * field (after defaults are filled) gives a different one. Nodes compare it to
 * tell whether they enforce the same limits.
 */
export function policySetVersion(policies: readonly Policy[]): string {
  return createHash('sha256').update(canonicalPolicyJson(policies)).digest('hex').slice(0, 16);
}

/**
 * The version of one compiled policy: the first 16 hex characters (64 bits)
 * of the SHA-256 of its canonical JSON (with the schema tag). Nodes version
 * each policy on its own, so changing one policy leaves the versions of the
 * others as they were: they keep merging counts across old and new nodes
 * during a rollout (the wire format carries one version per policy).
 */
export function policyVersion(policy: Policy): string {
  return createHash('sha256')
    .update(canonicalJson({ schema: POLICY_SCHEMA, policy }))
    .digest('hex')
    .slice(0, 16);
}

/** JSON with object keys sorted; `undefined` fields are written as `null` so absent and present differ visibly. */
function canonicalJson(value: unknown): string {
  if (value === undefined || value === null) return 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
  }
  if (typeof value === 'number' && !Number.isFinite(value)) {
    throw new TypeError(`cannot hash a non-finite number (${value})`);
  }
  return JSON.stringify(value);
}
