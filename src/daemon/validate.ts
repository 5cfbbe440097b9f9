import { ErrorCodes, RateMeshError } from '../errors.js';

/**
 * Small validators for untrusted configuration and request bodies. Each takes
 * the value and the path that names it (`config.http.port`, `--http`,
 * `body.cost`) and throws a {@link RateMeshError} whose `field` is that path.
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

/** Throws a CONFIG_INVALID (or the given code) error naming `path`. */
export function fail(path: string, message: string, code = ErrorCodes.CONFIG_INVALID): never {
  throw new RateMeshError(code, message, path);
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

export function integer(v: unknown, path: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    fail(path, `must be an integer ${min}..${max} (got ${shown(v)})`);
  }
  return v;
}

export function finite(v: unknown, path: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    fail(path, `must be a number ${min}..${max} (got ${shown(v)})`);
  }
  return v;
}

export function boolean(v: unknown, path: string): boolean {
  if (typeof v !== 'boolean') fail(path, `must be true or false (got ${shown(v)})`);
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

export function stringArray(v: unknown, path: string, maxItems: number, maxLength = 1024): string[] {
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
