import { createHash } from 'node:crypto';
import { ErrorCodes, RateMeshError } from '../errors.js';
import { DEFAULT_BUCKETS, MAX_BUCKETS, MAX_CELLS, MAX_WINDOW_MS } from '../policy/constants.js';
import type { AlgorithmName, PolicySpec } from '../types.js';
import { EnvoyConfigError } from './errors.js';
import type { DescriptorLevel, DescriptorNode, EnvoyRateLimit, WildcardEntry } from './tree.js';
import { type EnvoyUnit, parseUnit, UNIT_SECONDS } from './units.js';
import { type JsonValue, type YamlNode, YamlReader } from './yaml-reader.js';

export { EnvoyConfigError };

/**
 * How matched descriptors are counted. `sliding-window` (default): a global
 * ratemesh policy, the mesh-wide sliding-window counter kept in the windowed
 * G-counter. The others are ratemesh's local algorithms: each node enforces
 * the whole limit on its own traffic (no mesh sharing).
 */
export type EnvoyAlgorithm = 'sliding-window' | Exclude<AlgorithmName, 'leaky-bucket'>;

/** Every {@link EnvoyAlgorithm}, for validation and messages. */
export const ENVOY_ALGORITHMS: readonly EnvoyAlgorithm[] = [
  'sliding-window',
  'gcra',
  'token-bucket',
  'fixed-window',
  'sliding-window-counter',
  'sliding-window-log',
];

/** Options of {@link parseEnvoyConfig}. */
export interface EnvoyConfigOptions {
  /** Default `sliding-window`. */
  algorithm?: EnvoyAlgorithm;
  /** Buckets per window of each policy (sliding-window, sliding-window-counter). Default 10. */
  buckets?: number;
  /**
   * Merge files that name the same domain (envoyproxy/ratelimit's
   * `MERGE_DOMAIN_CONFIG`). Default false: a domain in two files is an error.
   */
  mergeDomains?: boolean;
}

/** One config file's text and the name used in errors. */
export interface EnvoyConfigSource {
  file: string;
  text: string;
}

/** A validated set of envoyproxy/ratelimit config files. */
export interface EnvoyConfig {
  /** The descriptor tree of each domain. */
  readonly domains: ReadonlyMap<string, DescriptorLevel>;
  /** Every `rate_limit` block, in file order. */
  readonly rateLimits: readonly EnvoyRateLimit[];
  /** The ratemesh policies that count them (one per counted block), for the limiter. */
  readonly policies: readonly PolicySpec[];
  readonly files: readonly string[];
  readonly algorithm: EnvoyAlgorithm;
}

/** Deepest descriptor nesting accepted. */
export const MAX_DEPTH = 32;

const ROOT_FIELDS = ['domain', 'descriptors'];
const DESCRIPTOR_FIELDS = [
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'quota_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
];
const RATE_LIMIT_FIELDS = ['requests_per_unit', 'unit', 'unit_multiplier', 'unlimited', 'name', 'replaces'];

/** Mutable twins of the tree types while loading. */
interface LevelBuild {
  exact: Map<string, Map<string, NodeBuild>>;
  wildcards: Map<string, { parts: string[]; node: NodeBuild }[]>;
  keyOnly: Map<string, NodeBuild>;
  /** envoyproxy/ratelimit's composite keys (`key` or `key_value`) at this level, for duplicates. */
  composite: Map<string, string>;
}
interface NodeBuild {
  rateLimit: EnvoyRateLimit | undefined;
  children: LevelBuild;
  sharedValue: string | undefined;
}

/**
 * Parses and validates envoyproxy/ratelimit config files (their YAML as it
 * is) into descriptor trees and the ratemesh policies that count them.
 * Throws an {@link EnvoyConfigError} naming the file, the YAML path and the
 * reason for the first problem, rejecting what their loader rejects (empty or
 * duplicate domain, empty key, duplicate descriptor, bad unit, unit with
 * `unlimited`, `unit_multiplier: 0`, unknown fields, floats, empty or
 * self-naming `replaces`, `share_threshold` without a wildcard, YAML errors,
 * duplicate YAML keys) and, beyond theirs, what ratemesh cannot enforce: a
 * window over 366 days, more than 10^9 requests per unit,
 * a `rate_limit` without `requests_per_unit` (theirs reads it as 0).
 */
export function parseEnvoyConfig(
  sources: readonly EnvoyConfigSource[],
  options: EnvoyConfigOptions = {},
): EnvoyConfig {
  const algorithm = options.algorithm ?? 'sliding-window';
  if (!ENVOY_ALGORITHMS.includes(algorithm)) {
    throw new RateMeshError(
      ErrorCodes.CONFIG_INVALID,
      `must be one of ${ENVOY_ALGORITHMS.join(', ')} (got ${String(algorithm)})`,
      'algorithm',
    );
  }
  const buckets = options.buckets ?? DEFAULT_BUCKETS;
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > MAX_BUCKETS) {
    throw new RateMeshError(
      ErrorCodes.CONFIG_INVALID,
      `must be an integer 1..${MAX_BUCKETS} (got ${String(buckets)})`,
      'buckets',
    );
  }
  const loader = new Loader(algorithm, buckets, options.mergeDomains ?? false);
  for (const src of sources) loader.load(src);
  return loader.finish(sources.map((s) => s.file));
}

class Loader {
  readonly domains = new Map<string, LevelBuild>();
  readonly domainFile = new Map<string, string>();
  readonly rateLimits: EnvoyRateLimit[] = [];
  readonly policies: PolicySpec[] = [];
  readonly policyNames = new Map<string, string>();
  /** The file being read. */
  private y: YamlReader = new YamlReader('', '');

  constructor(
    readonly algorithm: EnvoyAlgorithm,
    readonly buckets: number,
    readonly mergeDomains: boolean,
  ) {}

  load(src: EnvoyConfigSource): void {
    this.y = new YamlReader(src.file, src.text);
    const root = this.y.root();
    // An empty file is an empty mapping, as yaml.v2 reads it: no domain.
    const fields = root === null ? new Map<string, YamlNode | null>() : this.y.mapping(root, '', ROOT_FIELDS);
    const domain = this.y.optString(fields.get('domain') ?? null, 'domain');
    if (domain === undefined || domain === '')
      this.y.fail('domain', 'config file cannot have empty domain', this.y.lineOf(root));

    let level = this.domains.get(domain);
    if (level !== undefined) {
      if (!this.mergeDomains) {
        this.y.fail(
          'domain',
          `duplicate domain '${domain}': already defined in ${this.domainFile.get(domain)} (set envoy.mergeDomains to merge files of one domain)`,
          this.y.lineOf(fields.get('domain') ?? null),
        );
      }
    } else {
      level = newLevel();
      this.domains.set(domain, level);
      this.domainFile.set(domain, src.file);
    }
    const list = fields.get('descriptors') ?? null;
    if (list !== null) this.descriptors(list, 'descriptors', level, domain, [domain], 1);
  }

  finish(files: string[]): EnvoyConfig {
    const domains = new Map<string, DescriptorLevel>();
    for (const [name, level] of this.domains) domains.set(name, freezeLevel(level));
    return Object.freeze({
      domains,
      rateLimits: Object.freeze(this.rateLimits),
      policies: Object.freeze(this.policies),
      files: Object.freeze(files),
      algorithm: this.algorithm,
    });
  }

  /** A `descriptors` list into `level`; `names` is the path of `key_value` names so far (their stats key). */
  private descriptors(
    list: YamlNode,
    path: string,
    level: LevelBuild,
    domain: string,
    names: string[],
    depth: number,
  ): void {
    if (depth > MAX_DEPTH)
      this.y.fail(path, `descriptors nest deeper than ${MAX_DEPTH} levels`, this.y.lineOf(list));
    const items = this.y.sequence(list, path);
    for (let i = 0; i < items.length; i++) {
      const p = `${path}[${i}]`;
      const item = items[i]!;
      const f = this.y.mapping(item, p, DESCRIPTOR_FIELDS);
      const key = this.y.optString(f.get('key') ?? null, `${p}.key`) ?? '';
      if (key === '') this.y.fail(`${p}.key`, 'descriptor has empty key', this.y.lineOf(item));
      const value = this.y.optString(f.get('value') ?? null, `${p}.value`) ?? '';
      const composite = value === '' ? key : `${key}_${value}`;
      const fullName = [...names, composite].join('.');
      const earlier = level.composite.get(composite);
      if (earlier !== undefined) {
        this.y.fail(
          p,
          `duplicate descriptor composite key '${fullName}' (same as ${earlier}; envoyproxy/ratelimit names a descriptor key_value)`,
          this.y.lineOf(item),
        );
      }
      level.composite.set(composite, p);

      const shadow = this.y.optBool(f.get('shadow_mode') ?? null, `${p}.shadow_mode`) ?? false;
      const quota = this.y.optBool(f.get('quota_mode') ?? null, `${p}.quota_mode`) ?? false;
      const detailedMetric =
        this.y.optBool(f.get('detailed_metric') ?? null, `${p}.detailed_metric`) ?? false;
      this.y.optBool(f.get('value_to_metric') ?? null, `${p}.value_to_metric`);
      const share = this.y.optBool(f.get('share_threshold') ?? null, `${p}.share_threshold`) ?? false;
      const wildcard = value.includes('*');
      if (share && !wildcard) {
        this.y.fail(
          `${p}.share_threshold`,
          `share_threshold can only be used with wildcard values (containing '*'), but found key '${composite}'`,
          this.y.lineOf(f.get('share_threshold') ?? null),
        );
      }
      const metaNode = f.get('metadata') ?? null;
      const metadata =
        metaNode === null
          ? undefined
          : (this.y.json(metaNode, `${p}.metadata`) as { [key: string]: JsonValue } | null);
      if (
        metadata !== undefined &&
        (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))
      ) {
        this.y.fail(`${p}.metadata`, 'must be a mapping', this.y.lineOf(metaNode));
      }

      const rl = f.get('rate_limit') ?? null;
      const rateLimit =
        rl === null
          ? undefined
          : this.rateLimit(rl, `${p}.rate_limit`, domain, fullName, shadow, quota, detailedMetric, metadata);

      const node: NodeBuild = { rateLimit, children: newLevel(), sharedValue: share ? value : undefined };
      const nested = f.get('descriptors') ?? null;
      if (nested !== null) {
        this.descriptors(nested, `${p}.descriptors`, node.children, domain, [...names, composite], depth + 1);
      }

      if (value === '') level.keyOnly.set(key, node);
      else {
        let byValue = level.exact.get(key);
        if (byValue === undefined) {
          byValue = new Map();
          level.exact.set(key, byValue);
        }
        byValue.set(value, node);
        if (wildcard) {
          let list = level.wildcards.get(key);
          if (list === undefined) {
            list = [];
            level.wildcards.set(key, list);
          }
          list.push({ parts: value.split('*'), node });
        }
      }
    }
  }

  private rateLimit(
    rl: YamlNode,
    path: string,
    domain: string,
    fullKey: string,
    shadow: boolean,
    quota: boolean,
    detailedMetric: boolean,
    metadata: { [key: string]: JsonValue } | undefined,
  ): EnvoyRateLimit {
    const f = this.y.mapping(rl, path, RATE_LIMIT_FIELDS);
    const unlimited = this.y.optBool(f.get('unlimited') ?? null, `${path}.unlimited`) ?? false;
    const unitText = this.y.optString(f.get('unit') ?? null, `${path}.unit`) ?? '';
    const name = this.y.optString(f.get('name') ?? null, `${path}.name`) ?? '';
    const replaces = this.replaces(f.get('replaces') ?? null, `${path}.replaces`, name);
    const unit = parseUnit(unitText);
    const rpuNode = f.get('requests_per_unit') ?? null;
    const multNode = f.get('unit_multiplier') ?? null;
    const base = {
      name,
      replaces,
      shadow,
      quota,
      metadata: metadata === undefined ? undefined : Object.freeze(metadata),
      detailedMetric,
      fullKey,
      file: this.y.file,
      path,
    };

    if (unlimited) {
      if (unitText !== '') {
        this.y.fail(
          `${path}.unit`,
          'should not specify rate limit unit when unlimited',
          this.y.lineOf(f.get('unit') ?? null),
        );
      }
      if (multNode !== null) this.y.uint32(multNode, `${path}.unit_multiplier`);
      if (rpuNode !== null) this.y.uint32(rpuNode, `${path}.requests_per_unit`);
      const r: EnvoyRateLimit = Object.freeze({
        ...base,
        policy: undefined,
        requestsPerUnit: 0,
        unit: undefined,
        unitMultiplier: 1,
        windowMs: 0,
        unlimited: true,
      });
      this.rateLimits.push(r);
      return r;
    }
    if (unit === undefined) {
      this.y.fail(
        `${path}.unit`,
        `invalid rate limit unit '${unitText}' (expected one of ${Object.keys(UNIT_SECONDS).join(', ')})`,
        this.y.lineOf(f.get('unit') ?? rl),
      );
    }
    if (rpuNode === null) {
      this.y.fail(
        `${path}.requests_per_unit`,
        'is required (envoyproxy/ratelimit reads a missing value as 0, which refuses every request; write requests_per_unit: 0 if that is meant)',
        this.y.lineOf(rl),
      );
    }
    const requestsPerUnit = this.y.uint32(rpuNode, `${path}.requests_per_unit`);
    if (requestsPerUnit > MAX_CELLS) {
      this.y.fail(
        `${path}.requests_per_unit`,
        `ratemesh counts at most ${MAX_CELLS} requests per window (got ${requestsPerUnit})`,
        this.y.lineOf(rpuNode),
      );
    }
    let unitMultiplier = 1;
    if (multNode !== null) {
      unitMultiplier = this.y.uint32(multNode, `${path}.unit_multiplier`);
      if (unitMultiplier === 0)
        this.y.fail(`${path}.unit_multiplier`, 'invalid unit multiplier of 0', this.y.lineOf(multNode));
    }
    const windowMs = UNIT_SECONDS[unit] * unitMultiplier * 1000;
    if (windowMs > MAX_WINDOW_MS) {
      this.y.fail(
        unitMultiplier === 1 ? `${path}.unit` : `${path}.unit_multiplier`,
        `ratemesh enforces windows of at most 366 days (${MAX_WINDOW_MS / 1000} s); ${unitMultiplier} × ${unit} is ${windowMs / 1000} s`,
        this.y.lineOf(multNode ?? f.get('unit') ?? rl),
      );
    }
    const policy =
      requestsPerUnit === 0
        ? undefined
        : this.policyFor(domain, fullKey, requestsPerUnit, windowMs, shadow, path);
    const r: EnvoyRateLimit = Object.freeze({
      ...base,
      policy,
      requestsPerUnit,
      unit,
      unitMultiplier,
      windowMs,
      unlimited: false,
    });
    this.rateLimits.push(r);
    return r;
  }

  private replaces(node: YamlNode | null, path: string, ownName: string): readonly string[] {
    if (node === null) return Object.freeze([]);
    const items = this.y.sequence(node, path);
    const out: string[] = [];
    for (let i = 0; i < items.length; i++) {
      const p = `${path}[${i}]`;
      const f = this.y.mapping(items[i]!, p, ['name']);
      const name = this.y.optString(f.get('name') ?? null, `${p}.name`) ?? '';
      if (name === '') this.y.fail(p, 'should not have an empty replaces entry', this.y.lineOf(items[i]!));
      if (name === ownName)
        this.y.fail(
          `${p}.name`,
          'replaces should not contain name of same descriptor',
          this.y.lineOf(items[i]!),
        );
      out.push(name);
    }
    return Object.freeze(out);
  }

  /** The ratemesh policy counting one rate limit: a stable name from the domain and the descriptor path. */
  private policyFor(
    domain: string,
    fullKey: string,
    limit: number,
    windowMs: number,
    shadow: boolean,
    path: string,
  ): string {
    const hash = createHash('sha256')
      .update(JSON.stringify([domain, fullKey]))
      .digest('hex')
      .slice(0, 10);
    const slug = fullKey.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64 - 'envoy:'.length - 1 - hash.length);
    const name = `envoy:${slug}:${hash}`;
    const earlier = this.policyNames.get(name);
    if (earlier !== undefined) {
      // Unreachable but for a hash collision or a descriptor the merge saw twice; never merge two limits silently.
      this.y.fail(path, `its ratemesh policy name ${name} is already used by ${earlier}`);
    }
    this.policyNames.set(name, `${this.y.file} ${path}`);
    const spec: PolicySpec =
      this.algorithm === 'sliding-window'
        ? { name, limit, windowMs, buckets: Math.min(this.buckets, windowMs), maxCost: MAX_CELLS, shadow }
        : {
            name,
            scope: 'local',
            algorithm: this.algorithm,
            limit,
            windowMs,
            maxCost: MAX_CELLS,
            shadow,
            ...(this.algorithm === 'sliding-window-counter'
              ? { buckets: Math.min(this.buckets, windowMs) }
              : {}),
          };
    this.policies.push(spec);
    return name;
  }
}

function newLevel(): LevelBuild {
  return { exact: new Map(), wildcards: new Map(), keyOnly: new Map(), composite: new Map() };
}

function freezeLevel(level: LevelBuild): DescriptorLevel {
  const nodes = new Map<NodeBuild, DescriptorNode>();
  const node = (n: NodeBuild): DescriptorNode => {
    let out = nodes.get(n);
    if (out === undefined) {
      const empty = n.children.composite.size === 0;
      out = Object.freeze({
        rateLimit: n.rateLimit,
        children: empty ? undefined : freezeLevel(n.children),
        sharedValue: n.sharedValue,
      });
      nodes.set(n, out);
    }
    return out;
  };
  const exact = new Map<string, Map<string, DescriptorNode>>();
  for (const [k, byValue] of level.exact) {
    const m = new Map<string, DescriptorNode>();
    for (const [v, n] of byValue) m.set(v, node(n));
    exact.set(k, m);
  }
  const wildcards = new Map<string, readonly WildcardEntry[]>();
  for (const [k, list] of level.wildcards) {
    wildcards.set(
      k,
      Object.freeze(list.map((w) => Object.freeze({ parts: Object.freeze(w.parts), node: node(w.node) }))),
    );
  }
  const keyOnly = new Map<string, DescriptorNode>();
  for (const [k, n] of level.keyOnly) keyOnly.set(k, node(n));
  return Object.freeze({ exact, wildcards, keyOnly });
}

/** The unit names a config may use (re-exported for callers of this module). */
export type { EnvoyUnit };
