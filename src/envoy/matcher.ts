import type { DescriptorLevel, DescriptorNode, EnvoyRateLimit } from './tree.js';
import { wildcardMatch } from './tree.js';

/** One `key`/`value` pair of a request descriptor. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/**
 * Finds the rate limit a request descriptor matches, as envoyproxy/ratelimit
 * does (`GetLimit`): walk the domain's tree one level per entry; at each
 * level try the entry's key with its value, then the key's wildcard values in
 * config order, then the key alone; stop at the first entry nothing matches.
 * Only a limit on the node reached by the **last** entry applies: a request
 * deeper or shallower than the config's `rate_limit` matches nothing. There
 * is no backtracking: once key+value matched, a key-only sibling is not tried.
 *
 * `shared[i]` is set to the value to count entry i under: the
 * `share_threshold` pattern when one matched, else undefined (the request's
 * own value, so a key-only or wildcard match counts each value separately).
 * A few map lookups per entry; nothing is allocated.
 */
export function matchDescriptor(
  root: DescriptorLevel,
  entries: readonly DescriptorEntry[],
  shared: (string | undefined)[],
): EnvoyRateLimit | undefined {
  let level: DescriptorLevel = root;
  const n = entries.length;
  for (let i = 0; i < n; i++) {
    const entry = entries[i]!;
    const node = lookup(level, entry.key, entry.value);
    if (node === undefined) return undefined;
    shared[i] = node.sharedValue;
    if (i === n - 1) return node.rateLimit;
    if (node.children === undefined) return undefined;
    level = node.children;
  }
  return undefined;
}

/** The node one entry matches at one level: key+value, then wildcards, then key only. */
function lookup(level: DescriptorLevel, key: string, value: string): DescriptorNode | undefined {
  const exact = level.exact.get(key)?.get(value);
  if (exact !== undefined) return exact;
  const wild = level.wildcards.get(key);
  if (wild !== undefined) {
    for (let j = 0; j < wild.length; j++) {
      const w = wild[j]!;
      if (wildcardMatch(w.parts, value)) return w.node;
    }
  }
  return level.keyOnly.get(key);
}
