/** Longest piece of a string value quoted in an error message. */
const MAX_SHOWN = 48;

/**
 * A short, safe rendering of an untrusted value for an error message: strings
 * are JSON-quoted (so control characters show as escapes) and truncated,
 * objects are named by kind rather than dumped.
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'string': {
      if (value.length <= MAX_SHOWN) return JSON.stringify(value);
      return `${JSON.stringify(value.slice(0, MAX_SHOWN))}… (${value.length} characters)`;
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
