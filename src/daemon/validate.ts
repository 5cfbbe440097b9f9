import { ErrorCodes, RateMeshError } from '../errors.js';

/**
 * Small validators for untrusted configuration and request bodies. Each takes
 * the value and the path that names it (`config.http.port`, `--http`,
 * `body.cost`) and throws a {@link RateMeshError} whose `field` is that path.
 */

/** A short, printable rendering of an untrusted value for an error message. */
export function shown(value: unknown): string {
  if (value === undefined) return 'nothing';
  let s: string;
  try {
    s = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    s = String(value);
  }
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
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
