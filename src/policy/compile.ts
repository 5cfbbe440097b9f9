import { ErrorCodes, RateMeshError } from '../errors.js';
import { ALGORITHMS, type AlgorithmName, type LocalAlgorithmSpec, type Policy } from '../types.js';
import { invalid } from '../validate.js';
import {
  DEFAULT_BUCKETS,
  MAX_BUCKETS,
  MAX_CELLS,
  MAX_DEADLINE_MS,
  MAX_NAME_LENGTH,
  MAX_WINDOW_MS,
  MIN_WINDOW_MS,
  NAME_PATTERN,
} from './constants.js';
import { policySetVersion, policyVersion } from './version.js';

/** A validated, frozen set of policies with unique names. Produced by {@link compilePolicies}. */
export interface PolicySet {
  /** The policies in the order they were given. */
  readonly policies: readonly Policy[];
  /** The policy of that name, if any. */
  byName(name: string): Policy | undefined;
  /**
   * The position of the named policy in {@link PolicySet.policies}, or -1. The
   * position follows the given order, which the version hash ignores: two nodes
   * with the same version may number policies differently, so identify a policy
   * by name (not by this index) in anything sent between nodes.
   */
  index(name: string): number;
  /** {@link policySetVersion} of the set: equal on every node that runs the same policies. */
  readonly version: string;
  /** {@link policyVersion} of the named policy (what the wire carries per policy), or undefined. */
  versionOf(name: string): string | undefined;
}

type Local = Required<LocalAlgorithmSpec>;
type Fields = Readonly<Record<string, unknown>>;

const POLICY_FIELDS: readonly string[] = [
  'name',
  'scope',
  'limit',
  'windowMs',
  'buckets',
  'algorithm',
  'burst',
  'queue',
  'deadlineMs',
  'local',
  'failureMode',
  'shadow',
  'maxCost',
  'overAdmission',
  'fallback',
  'routing',
  'placement',
  'ownerDeadlineMs',
];
const LOCAL_FIELDS: readonly string[] = [
  'algorithm',
  'limit',
  'windowMs',
  'burst',
  'buckets',
  'queue',
  'deadlineMs',
];

/** Fields of a local algorithm spec that only some algorithms use. */
const ALGORITHM_FIELDS: Readonly<Record<string, readonly AlgorithmName[]>> = {
  burst: ['gcra', 'token-bucket'],
  buckets: ['sliding-window-counter'],
  queue: ['leaky-bucket'],
  deadlineMs: ['leaky-bucket'],
};

/** The longest ownerDeadlineMs a policy may set: an ask waits at most this long for its owner. */
const MAX_OWNER_DEADLINE_MS = 10_000;
const CELLS = `a positive integer number of cells, at most ${MAX_CELLS}`;
const WINDOW = `an integer number of milliseconds between ${MIN_WINDOW_MS} and ${MAX_WINDOW_MS}`;

/**
 * Validates untrusted policy input (parsed YAML or JSON, or objects typed as
 * {@link PolicySpec}[]) once, at construction, and returns the frozen set with
 * every default filled in. Throws a RateMeshError: `ERR_POLICY_INVALID` with a
 * `field` path such as `policies[2].windowMs` and a message naming the reason
 * and the value got, or `ERR_POLICY_DUPLICATE` when two policies share a name.
 *
 * Rules, beyond each field's type and range (see `constants.ts`): unknown
 * fields are errors (typos); a field that does not apply to the policy's scope
 * or algorithm is an error, not ignored; `undefined` counts as absent.
 */
export function compilePolicies(specs: unknown): PolicySet {
  if (!Array.isArray(specs)) fail('policies', 'must be an array of policies', specs);
  if (specs.length === 0) fail('policies', 'must hold at least one policy', specs);

  const policies: Policy[] = [];
  const positions = new Map<string, number>();
  for (let i = 0; i < specs.length; i++) {
    const path = `policies[${i}]`;
    const policy = compilePolicy(specs[i], path);
    const earlier = positions.get(policy.name);
    if (earlier !== undefined) {
      throw new RateMeshError(
        ErrorCodes.POLICY_DUPLICATE,
        `policy name ${JSON.stringify(policy.name)} is already used by policies[${earlier}]; names must be unique`,
        `${path}.name`,
      );
    }
    positions.set(policy.name, i);
    policies.push(policy);
  }

  Object.freeze(policies);
  const version = policySetVersion(policies);
  const versions = new Map(policies.map((p) => [p.name, policyVersion(p)]));
  return Object.freeze({
    policies,
    version,
    versionOf: (name: string): string | undefined => versions.get(name),
    byName: (name: string): Policy | undefined => {
      const i = positions.get(name);
      return i === undefined ? undefined : policies[i];
    },
    index: (name: string): number => positions.get(name) ?? -1,
  });
}

/**
 * Validates one untrusted policy spec; `path` prefixes every error's field.
 * Returns a frozen {@link Policy}: for scope `local`, `local` holds the
 * policy's own algorithm with every field filled (limit and windowMs copied
 * from the policy); for scope `global`, `local` is the filled front limiter if
 * one was given, else undefined.
 *
 * Defaults: scope `global`; buckets 10 (or windowMs when the window is shorter
 * than 10 ms); algorithm `gcra` (local scope); burst, queue and maxCost the
 * limit; deadlineMs the window; failureMode `open`; shadow false;
 * overAdmission `controlled`; fallback true.
 */
export function compilePolicy(spec: unknown, path = 'policies[0]'): Policy {
  const s = asFields(spec, path);
  rejectUnknown(s, POLICY_FIELDS, path);

  const name = policyName(s, path);
  const scope = oneOf(s, 'scope', path, ['global', 'local'] as const, 'global');
  const limit = integer(s, 'limit', path, 1, MAX_CELLS, CELLS);
  const windowMs = integer(s, 'windowMs', path, MIN_WINDOW_MS, MAX_WINDOW_MS, WINDOW);
  const failureMode = oneOf(s, 'failureMode', path, ['open', 'closed'] as const, 'open');
  const shadow = boolean(s, 'shadow', path, false);
  // maxCost may exceed the limit: such costs are denied with a reason when checked, never admitted.
  const maxCost = integer(s, 'maxCost', path, 1, MAX_CELLS, CELLS, limit);

  if (scope === 'local') {
    for (const field of ['local', 'overAdmission', 'fallback', 'placement', 'ownerDeadlineMs']) {
      if (present(s, field)) {
        fail(
          join(path, field),
          'applies only to scope "global"; a local policy is enforced by its algorithm on this process alone',
          s[field],
        );
      }
    }
    const algorithm = oneOf(s, 'algorithm', path, ALGORITHMS, 'gcra');
    const local = localAlgorithm(s, path, algorithm, limit, windowMs);
    return Object.freeze({
      name,
      scope,
      limit,
      windowMs,
      buckets: local.buckets,
      local,
      failureMode,
      shadow,
      maxCost,
      overAdmission: 'controlled',
      fallback: true,
    });
  }

  const algorithm = oneOf(s, 'algorithm', path, ALGORITHMS, 'sliding-window-counter');
  if (algorithm !== 'sliding-window-counter') {
    fail(
      join(path, 'algorithm'),
      'a global policy is always enforced on the sliding-window-counter estimate of the mesh-wide sum; ' +
        `to check ${algorithm} in front of it, give local: { algorithm: '${algorithm}', limit, windowMs }, ` +
        `or set scope: 'local' to enforce ${algorithm} on this process alone`,
      algorithm,
    );
  }
  for (const field of ['burst', 'queue', 'deadlineMs']) {
    if (present(s, field)) {
      fail(
        join(path, field),
        'applies only to scope "local", or to the front limiter given in `local`',
        s[field],
      );
    }
  }
  const buckets = bucketCount(s, path, windowMs);
  const local = present(s, 'local') ? frontLimiter(s.local, join(path, 'local')) : undefined;
  const overAdmission = oneOf(s, 'overAdmission', path, ['controlled', 'naive'] as const, 'controlled');
  const fallback = boolean(s, 'fallback', path, true);
  if (present(s, 'routing'))
    fail(
      join(path, 'routing'),
      'was removed: the decision rule needs no routing hint (every member holds at least its fair part of the headroom)',
      s.routing,
    );
  // owner placement (issue 27, docs/owner.md); the defaults are left out of the compiled policy
  const placement = oneOf(s, 'placement', path, ['auto', 'local', 'owner'] as const, 'auto');
  const ownerDeadlineMs = integer(
    s,
    'ownerDeadlineMs',
    path,
    1,
    MAX_OWNER_DEADLINE_MS,
    `an integer number of milliseconds between 1 and ${MAX_OWNER_DEADLINE_MS}`,
    50,
  );
  return Object.freeze({
    name,
    scope,
    limit,
    windowMs,
    buckets,
    local,
    failureMode,
    shadow,
    maxCost,
    overAdmission,
    fallback,
    // the defaults are left out: a policy that does not set them keeps the version it had
    ...(placement === 'auto' ? {} : { placement }),
    ...(ownerDeadlineMs === 50 ? {} : { ownerDeadlineMs }),
  });
}

/** The `local` front limiter of a global policy: its own algorithm (default gcra), limit and window. */
function frontLimiter(spec: unknown, path: string): Readonly<Local> {
  const s = asFields(spec, path);
  rejectUnknown(s, LOCAL_FIELDS, path);
  const algorithm = oneOf(s, 'algorithm', path, ALGORITHMS, 'gcra');
  const limit = integer(s, 'limit', path, 1, MAX_CELLS, CELLS);
  const windowMs = integer(s, 'windowMs', path, MIN_WINDOW_MS, MAX_WINDOW_MS, WINDOW);
  return localAlgorithm(s, path, algorithm, limit, windowMs);
}

/** The algorithm-specific fields, each allowed only for the algorithms that use it, with defaults filled. */
function localAlgorithm(
  s: Fields,
  path: string,
  algorithm: AlgorithmName,
  limit: number,
  windowMs: number,
): Readonly<Local> {
  for (const field in ALGORITHM_FIELDS) {
    const users = ALGORITHM_FIELDS[field]!;
    if (present(s, field) && !users.includes(algorithm)) {
      fail(join(path, field), `applies only to algorithm ${users.join(' or ')}, not ${algorithm}`, s[field]);
    }
  }
  return Object.freeze({
    algorithm,
    limit,
    windowMs,
    burst: integer(s, 'burst', path, 1, MAX_CELLS, CELLS, limit),
    buckets: bucketCount(s, path, windowMs),
    queue: integer(s, 'queue', path, 1, MAX_CELLS, CELLS, limit),
    deadlineMs: integer(
      s,
      'deadlineMs',
      path,
      1,
      MAX_DEADLINE_MS,
      `an integer number of milliseconds between 1 and ${MAX_DEADLINE_MS}`,
      Math.min(windowMs, MAX_DEADLINE_MS),
    ),
  });
}

/**
 * Buckets per window: 1..60, and no more than windowMs so each bucket spans at
 * least 1 ms. The width windowMs / buckets need not be a whole number of ms.
 */
function bucketCount(s: Fields, path: string, windowMs: number): number {
  const buckets = integer(
    s,
    'buckets',
    path,
    1,
    MAX_BUCKETS,
    `an integer between 1 and ${MAX_BUCKETS}`,
    Math.min(DEFAULT_BUCKETS, windowMs),
  );
  if (buckets > windowMs) {
    fail(
      join(path, 'buckets'),
      `must not exceed windowMs (${windowMs}): each bucket must span at least 1 ms`,
      buckets,
    );
  }
  return buckets;
}

function policyName(s: Fields, path: string): string {
  const name = s.name;
  const rule = `a string of 1 to ${MAX_NAME_LENGTH} characters from A-Z a-z 0-9 _ . : -`;
  if (name === undefined) fail(join(path, 'name'), `is required: ${rule}`, name);
  if (
    typeof name !== 'string' ||
    name.length === 0 ||
    name.length > MAX_NAME_LENGTH ||
    !NAME_PATTERN.test(name)
  ) {
    fail(join(path, 'name'), `must be ${rule}`, name);
  }
  return name;
}

/** A required integer in [min, max] (or `dflt` when absent and a default exists). */
function integer(
  s: Fields,
  field: string,
  path: string,
  min: number,
  max: number,
  rule: string,
  dflt?: number,
): number {
  const v = s[field];
  if (v === undefined) {
    if (dflt !== undefined) return dflt;
    fail(join(path, field), `is required: ${rule}`, v);
  }
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    const hint =
      typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))
        ? '; write it without quotes'
        : '';
    fail(join(path, field), `must be ${rule}${hint}`, v);
  }
  return v;
}

function oneOf<T extends string>(s: Fields, field: string, path: string, allowed: readonly T[], dflt: T): T {
  const v = s[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) {
    fail(join(path, field), `must be one of ${allowed.map((a) => `"${a}"`).join(', ')}`, v);
  }
  return v as T;
}

function boolean(s: Fields, field: string, path: string, dflt: boolean): boolean {
  const v = s[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') fail(join(path, field), 'must be true or false', v);
  return v;
}

/** The object's own enumerable fields; anything but a plain object is an error. */
function asFields(v: unknown, path: string): Fields {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(path, 'must be an object', v);
  const proto: unknown = Object.getPrototypeOf(v);
  if (proto !== null && Object.getPrototypeOf(proto) !== null) fail(path, 'must be a plain object', v);
  // Copy own enumerable fields only, so nothing is read through the prototype chain.
  const out: Record<string, unknown> = Object.create(null);
  for (const key of Object.keys(v)) out[key] = (v as Record<string, unknown>)[key];
  return out;
}

function rejectUnknown(s: Fields, known: readonly string[], path: string): void {
  for (const key in s) {
    if (known.includes(key)) continue;
    const guess = closest(key, known);
    const hint = guess === undefined ? `known fields: ${known.join(', ')}` : `did you mean "${guess}"?`;
    fail(join(path, key), `unknown field; ${hint}`, s[key]);
  }
}

/** The known field within edit distance 2 of `key` (case-insensitive), if any. */
function closest(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  const k = key.toLowerCase();
  if (k.length > 32) return undefined;
  for (const candidate of known) {
    const d = editDistance(k, candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const sub = prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1);
      cur.push(Math.min(prev[j]! + 1, cur[j - 1]! + 1, sub));
    }
    prev = cur;
  }
  return prev[b.length]!;
}

function present(s: Fields, field: string): boolean {
  return s[field] !== undefined;
}

function join(path: string, field: string): string {
  if (/^[A-Za-z_$][\w$]*$/.test(field) && field.length <= 64) return `${path}.${field}`;
  return field.length <= 64
    ? `${path}[${JSON.stringify(field)}]`
    : `${path}[${JSON.stringify(field.slice(0, 64))}…]`;
}

function fail(field: string, reason: string, got: unknown): never {
  return invalid(field, reason, got, ErrorCodes.POLICY_INVALID);
}
