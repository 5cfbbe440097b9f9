import type { EnvoyUnit } from './units.js';
import type { JsonValue } from './yaml-reader.js';

/**
 * One `rate_limit` block of an envoyproxy/ratelimit config, validated, with
 * the ratemesh policy that enforces it.
 */
export interface EnvoyRateLimit {
  /**
   * The ratemesh policy that counts this limit; undefined when nothing is
   * counted: `unlimited`, or `requests_per_unit: 0` (every request is over).
   */
  readonly policy: string | undefined;
  /** `requests_per_unit` (0 refuses every request). */
  readonly requestsPerUnit: number;
  /** `unit`; undefined when `unlimited`. */
  readonly unit: EnvoyUnit | undefined;
  /** `unit_multiplier` (default 1): the window is unit × multiplier. */
  readonly unitMultiplier: number;
  /** The window in ms (unit seconds × multiplier × 1000); 0 when unlimited. */
  readonly windowMs: number;
  readonly unlimited: boolean;
  /** `rate_limit.name`, or '' when absent. */
  readonly name: string;
  /** The names in `rate_limit.replaces`. */
  readonly replaces: readonly string[];
  /** `shadow_mode`: counted, never over the limit. */
  readonly shadow: boolean;
  /**
   * `quota_mode`: over the limit in its status, but the request is over only
   * when every quota descriptor of it is (and no other is).
   */
  readonly quota: boolean;
  /** The descriptor's `metadata` (a mapping), sent back in `dynamic_metadata` when enabled. */
  readonly metadata: { readonly [key: string]: JsonValue } | undefined;
  /** `detailed_metric`: metrics carry the request's values. */
  readonly detailedMetric: boolean;
  /** envoyproxy/ratelimit's name for it: `domain.key_value.key...` (their stats key). */
  readonly fullKey: string;
  /** The file and YAML path that defined it, for logs and errors. */
  readonly file: string;
  readonly path: string;
}

/** A node of the descriptor tree: a `key` (+ `value`) with its limit and children. */
export interface DescriptorNode {
  readonly rateLimit: EnvoyRateLimit | undefined;
  /** The nested `descriptors`; undefined when there are none. */
  readonly children: DescriptorLevel | undefined;
  /**
   * With `share_threshold` on a wildcard value: the pattern, used in the
   * counter key instead of the request's value, so every matching value shares
   * one count. Undefined otherwise (each value counts separately).
   */
  readonly sharedValue: string | undefined;
}

/** A wildcard `value` (one or more `*`), split at load time so matching allocates nothing. */
export interface WildcardEntry {
  /** The pattern split on `*` (`/api/` star `/x` gives `/api/` and `/x`). */
  readonly parts: readonly string[];
  readonly node: DescriptorNode;
}

/**
 * One level of the tree (a `descriptors` list). Lookups, in the order
 * envoyproxy/ratelimit tries them: `exact` (key, then value), the key's
 * `wildcards` in config order, then `keyOnly` (a descriptor without a value).
 */
export interface DescriptorLevel {
  readonly exact: ReadonlyMap<string, ReadonlyMap<string, DescriptorNode>>;
  readonly wildcards: ReadonlyMap<string, readonly WildcardEntry[]>;
  readonly keyOnly: ReadonlyMap<string, DescriptorNode>;
}

/**
 * Whether `value` matches a wildcard pattern split on `*`: each `*` matches
 * zero or more characters (envoyproxy/ratelimit's `wildcardMatch`). No allocation.
 */
export function wildcardMatch(parts: readonly string[], value: string): boolean {
  const n = parts.length;
  if (n === 1) return parts[0] === value;
  const first = parts[0]!;
  const last = parts[n - 1]!;
  if (!value.startsWith(first) || !value.endsWith(last)) return false;
  let fixed = 0;
  for (let i = 0; i < n; i++) fixed += parts[i]!.length;
  if (value.length < fixed) return false;
  let from = first.length;
  const end = value.length - last.length;
  for (let i = 1; i < n - 1; i++) {
    const part = parts[i]!;
    const at = value.indexOf(part, from);
    if (at < 0 || at + part.length > end) return false;
    from = at + part.length;
  }
  return true;
}
