import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EnvoyConfigError } from '../../src/envoy/config.js';
import { config, match } from './helpers.js';

/**
 * A line-by-line port of envoyproxy/ratelimit's matching (src/config/config_impl.go:
 * loadDescriptors and GetLimit, without stats), over its composite keys
 * `key` / `key_value`, to check the matcher against on generated configs and
 * requests. Keys and values here hold no `_`, where their composite keys
 * would be ambiguous (see the README).
 */
interface RefNode {
  descriptors: Map<string, RefNode>;
  wildcards: { key: string; parts: string[] }[];
  limit: string | undefined;
}

interface Spec {
  key: string;
  value: string;
  limit: boolean;
  children: Spec[];
}

function refLoad(node: RefNode, specs: Spec[], parentKey: string): void {
  for (const d of specs) {
    const finalKey = d.value === '' ? d.key : `${d.key}_${d.value}`;
    const full = parentKey + finalKey;
    if (node.descriptors.has(finalKey)) throw new Error(`duplicate descriptor composite key '${full}'`);
    if (finalKey.includes('*')) node.wildcards.push({ key: finalKey, parts: finalKey.split('*') });
    const child: RefNode = { descriptors: new Map(), wildcards: [], limit: d.limit ? full : undefined };
    refLoad(child, d.children, `${full}.`);
    node.descriptors.set(finalKey, child);
  }
}

function refWildcard(parts: string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value;
  if (!value.startsWith(parts[0]!) || !value.endsWith(parts[parts.length - 1]!)) return false;
  if (value.length < parts.reduce((a, p) => a + p.length, 0)) return false;
  let remaining = value.slice(parts[0]!.length);
  const last = parts[parts.length - 1]!;
  if (last !== '') remaining = remaining.slice(0, remaining.length - last.length);
  for (const part of parts.slice(1, -1)) {
    const idx = remaining.indexOf(part);
    if (idx < 0) return false;
    remaining = remaining.slice(idx + part.length);
  }
  return true;
}

function refGetLimit(domain: RefNode, entries: [string, string][]): string | undefined {
  let map = domain.descriptors;
  let prev = domain;
  let limit: string | undefined;
  for (let i = 0; i < entries.length; i++) {
    const [k, v] = entries[i]!;
    let finalKey = `${k}_${v}`;
    let next = map.get(finalKey);
    if (next === undefined && prev.wildcards.length > 0) {
      for (const w of prev.wildcards) {
        if (refWildcard(w.parts, finalKey)) {
          next = map.get(w.key);
          break;
        }
      }
    }
    if (next === undefined) {
      finalKey = k;
      next = map.get(finalKey);
    }
    if (next?.limit !== undefined && i === entries.length - 1) limit = next.limit;
    if (next !== undefined && next.descriptors.size > 0) map = next.descriptors;
    else break;
    prev = next;
  }
  return limit;
}

function toYaml(specs: Spec[], indent: string): string {
  let out = '';
  for (const s of specs) {
    out += `${indent}- key: ${JSON.stringify(s.key)}\n`;
    if (s.value !== '') out += `${indent}  value: ${JSON.stringify(s.value)}\n`;
    if (s.limit) out += `${indent}  rate_limit: { unit: second, requests_per_unit: 5 }\n`;
    if (s.children.length > 0) out += `${indent}  descriptors:\n${toYaml(s.children, `${indent}    `)}`;
  }
  return out;
}

const KEYS = ['a', 'b', 'c'];
const VALUES = ['', 'x', 'y', 'xy', 'x*', '*', '*y', 'x*y', '*x*'];
const REQUEST_VALUES = ['', 'x', 'y', 'xy', 'xxy', 'yx', 'z', 'x*'];

const spec: fc.Memo<Spec[]> = fc.memo((depth) =>
  fc.array(
    fc.record({
      key: fc.constantFrom(...KEYS),
      value: fc.constantFrom(...VALUES),
      limit: fc.boolean(),
      children: depth > 1 ? spec(depth - 1) : fc.constant([]),
    }),
    { maxLength: 4 },
  ),
);

const request = fc.array(fc.tuple(fc.constantFrom(...KEYS), fc.constantFrom(...REQUEST_VALUES)), {
  minLength: 1,
  maxLength: 4,
});

describe('the matcher agrees with a port of envoyproxy/ratelimit', () => {
  it('on generated configs and requests: the same limit, or none; the same refusals', () => {
    fc.assert(
      fc.property(spec(3), fc.array(request, { minLength: 1, maxLength: 20 }), (specs, requests) => {
        const ref: RefNode = { descriptors: new Map(), wildcards: [], limit: undefined };
        let refError: string | undefined;
        try {
          refLoad(ref, specs, 'd.');
        } catch (err) {
          refError = (err as Error).message;
        }
        let cfg: ReturnType<typeof config> | undefined;
        try {
          cfg = config(`domain: d\ndescriptors:\n${toYaml(specs, '  ')}`);
        } catch (err) {
          if (!(err instanceof EnvoyConfigError)) throw err;
          expect(refError).toBeDefined();
          expect(err.problem).toContain(refError!);
          return;
        }
        expect(refError).toBeUndefined();
        for (const entries of requests) {
          const want = refGetLimit(ref, entries);
          const got = match(cfg, 'd', ...entries.map(([k, v]) => `${k}=${v}`));
          expect(got?.limit.fullKey, JSON.stringify(entries)).toBe(want);
        }
      }),
      { numRuns: 400, seed: 12 },
    );
  });
});
