import { type ErrorCode, ErrorCodes, RateMeshError } from './errors.js';

/**
 * The one family of validators for everything a user hands ratemesh: engine, mesh and
 * middleware options, daemon config files and flags, request bodies, algorithm and policy
 * parameters. Each takes the value and the path that names it (`maxKeys`,
 * `config.http.port`, `--http`, `body.cost`, `routes[1].statusCode`) and throws a
 * {@link RateMeshError} whose `field` is that path and whose `reason` says what is wrong and
 * what was got; the code is CONFIG_INVALID unless the caller names another (POLICY_INVALID,
 * KEY_INVALID, ...). A default for an absent value goes through {@link optional}.
 *
 * Two renderings of the value got: {@link shown} shows it (strings, numbers, small lists and
 * objects, all capped: config and request bodies, where the content helps), and
 * {@link describeValue} names its kind (policies, keys, costs: API inputs of any type).
 */

/**
 * A short, printable rendering of an untrusted value for an error message: at most 60
 * characters, strings JSON-quoted (control characters escaped, never echoed raw), lists and
 * objects rendered only a few levels and items deep, so a value nested thousands deep costs
 * no more than a flat one (and cannot overflow the stack).
 */
export function shown(value: unknown): string {
  if (value === undefined) return 'nothing';
  const s = render(value, 0);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

function render(v: unknown, depth: number): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}` : v);
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v !== 'object') return typeof v;
  if (depth >= 3) return Array.isArray(v) ? '[...]' : '{...}';
  if (Array.isArray(v)) {
    const items = v.slice(0, 4).map((x) => render(x, depth + 1));
    return `[${items.join(',')}${v.length > 4 ? ',...' : ''}]`;
  }
  const keys = Object.keys(v).slice(0, 4);
  const items = keys.map(
    (k) => `${JSON.stringify(k.slice(0, 40))}:${render((v as Record<string, unknown>)[k], depth + 1)}`,
  );
  return `{${items.join(',')}${Object.keys(v).length > 4 ? ',...' : ''}}`;
}

/**
 * `base.name` for a plain field name, else `base[<quoted>]`: names from a request body are
 * untrusted and go into error messages and logs (no control characters, no unbounded length).
 */
export function fieldPath(base: string, name: string): string {
  return /^[A-Za-z_][A-Za-z0-9_-]{0,39}$/.test(name) ? `${base}.${name}` : `${base}[${shown(name)}]`;
}

/** The deepest nesting of lists and objects in a parsed JSON value, counted without recursion. */
export function jsonDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (d > deepest) deepest = d;
    if (deepest > limit) return deepest;
    for (const x of Array.isArray(v) ? v : Object.values(v))
      if (typeof x === 'object' && x !== null) stack.push([x, d + 1]);
  }
  return deepest;
}

/** Throws a CONFIG_INVALID (or the given code) error naming `path`; `reason` says what is wrong. */
export function fail(path: string, reason: string, code: ErrorCode = ErrorCodes.CONFIG_INVALID): never {
  throw new RateMeshError(code, reason, path);
}

/** {@link fail} with the value got named by {@link describeValue}: `${reason} (got ${kind})`. */
export function invalid(path: string, reason: string, got: unknown, code: ErrorCode): never {
  throw new RateMeshError(code, `${reason} (got ${describeValue(got)})`, path);
}

/** `value` checked by `check`, or `dflt` when it is undefined (an option left out). */
export function optional<T, D = T>(value: unknown, dflt: D, check: (v: unknown) => T): T | D {
  return value === undefined ? dflt : check(value);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** An object whose keys are all in `allowed`; any other key is an error naming it. */
export function objectOf(v: unknown, path: string, allowed: readonly string[]): Record<string, unknown> {
  if (!isPlainObject(v)) fail(path, `must be an object (got ${shown(v)})`);
  for (const k of Object.keys(v)) {
    if (!allowed.includes(k)) {
      fail(`${path}.${k}`, `unknown field (expected one of: ${allowed.join(', ')})`);
    }
  }
  return v;
}

/** An integer in `min..max` (no upper bound but the exact integers when `max` is left out). */
export function integer(
  v: unknown,
  path: string,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
  code: ErrorCode = ErrorCodes.CONFIG_INVALID,
): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `${min}..${max}`;
    fail(path, `must be an integer ${range} (got ${shown(v)})`, code);
  }
  return v;
}

/** A finite number in `min..max` (no upper bound when `max` is left out). */
export function finite(
  v: unknown,
  path: string,
  min: number,
  max = Number.MAX_VALUE,
  code: ErrorCode = ErrorCodes.CONFIG_INVALID,
): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    const range = max === Number.MAX_VALUE ? `>= ${min}` : `${min}..${max}`;
    fail(path, `must be a number ${range} (got ${shown(v)})`, code);
  }
  return v;
}

/** A finite number above 0. */
export function positive(v: unknown, path: string, code: ErrorCode = ErrorCodes.CONFIG_INVALID): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) {
    fail(path, `must be a finite number > 0 (got ${shown(v)})`, code);
  }
  return v;
}

export function boolean(v: unknown, path: string): boolean {
  if (typeof v !== 'boolean') fail(path, `must be true or false (got ${shown(v)})`);
  return v;
}

/** A function (a callback option). */
export function func<T>(v: unknown, path: string): T {
  if (typeof v !== 'function') fail(path, `must be a function (got ${shown(v)})`);
  return v as T;
}

/** A non-empty byte array (a key, a psk). */
export function bytes(v: unknown, path: string): Uint8Array {
  if (!(v instanceof Uint8Array) || v.byteLength === 0) fail(path, 'must be a non-empty Uint8Array');
  return v;
}

export function string(v: unknown, path: string, maxLength = 4096): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > maxLength) {
    fail(path, `must be a non-empty string of at most ${maxLength} characters (got ${shown(v)})`);
  }
  if (/[\u0000-\u001f\u007f]/.test(v)) fail(path, `must not contain control characters (got ${shown(v)})`);
  return v;
}

export function oneOf<T extends string>(v: unknown, path: string, values: readonly T[]): T {
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) {
    fail(path, `must be one of ${values.join(', ')} (got ${shown(v)})`);
  }
  return v as T;
}

export function stringArray(
  v: unknown,
  path: string,
  maxItems = Number.MAX_SAFE_INTEGER,
  maxLength = 1024,
): string[] {
  if (!Array.isArray(v)) fail(path, `must be a list of strings (got ${shown(v)})`);
  if (v.length > maxItems) fail(path, `must hold at most ${maxItems} entries (got ${v.length})`);
  return v.map((s, i) => string(s, `${path}[${i}]`, maxLength));
}

/** Parses a decimal number given as text (a flag or an environment variable). */
export function numberText(s: string, path: string): number {
  const t = s.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(t)) fail(path, `must be a number (got ${shown(s)})`);
  return Number(t);
}

/** Longest piece of a string value quoted by describeValue. */
const MAX_DESCRIBED = 48;

/**
 * A short, safe rendering of an untrusted value for an error message: strings
 * are JSON-quoted (so control characters show as escapes) and truncated,
 * objects are named by kind rather than dumped.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'string': {
      if (value.length <= MAX_DESCRIBED) return JSON.stringify(value);
      return `${JSON.stringify(value.slice(0, MAX_DESCRIBED))}… (${value.length} characters)`;
    }
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'bigint':
      return `${value}n (a bigint)`;
    case 'boolean':
    case 'undefined':
      return String(value);
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
    default:
      if (value === null) return 'null';
      if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : `an array of ${value.length}`;
      return 'an object';
  }
}
