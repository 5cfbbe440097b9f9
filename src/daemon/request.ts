import type { IncomingMessage } from 'node:http';
import { ErrorCodes, isRateMeshError, RateMeshError } from '../errors.js';
import { validateKey } from '../keys/key.js';
import type { PolicyKey } from '../types.js';
import { fail, fieldPath, isPlainObject, shown } from '../validate.js';

/**
 * The daemon's requests as they arrive: the content type, the body within its cap, the JSON
 * shape of a check, and the errors of the HTTP layer itself. The values inside a check
 * (policy exists, key well formed, cost in range) are the limiter's to validate; its errors
 * are renamed to the path the client sent ({@link inRequest}).
 */

/**
 * Error codes of the HTTP layer itself, beside the library's {@link ErrorCodes}
 * (which a check can also return: ERR_POLICY_UNKNOWN, ERR_KEY_INVALID,
 * ERR_COST_INVALID, ERR_NOT_STARTED).
 */
export const HttpErrorCodes = {
  NOT_FOUND: 'ERR_NOT_FOUND',
  METHOD_NOT_ALLOWED: 'ERR_METHOD_NOT_ALLOWED',
  BODY_TOO_LARGE: 'ERR_BODY_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'ERR_UNSUPPORTED_MEDIA_TYPE',
  INTERNAL: 'ERR_INTERNAL',
} as const;

/** Most keys (or pairs) one check may carry. */
export const MAX_KEYS_PER_CHECK = 32;
/** An error answered with its own status (404, 405, 413, 415, ...). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export type CheckRequest =
  | { kind: 'one'; policy: string; keys: string[]; cost: number | undefined; path: string; list: boolean }
  | { kind: 'all'; pairs: PolicyKey[]; cost: number | undefined; path: string };

/**
 * The limiter names fields as its API has them (`key`, `policy`, `cost`, `pairs[1]`); a client
 * of this API needs the path in what it sent (`body.keys[1]`, `body.checks[1].policy`).
 */
export function inRequest(err: unknown, r: CheckRequest): unknown {
  if (!isRateMeshError(err) || err.field === undefined) return err;
  const keys = r.kind === 'one' ? r.keys : r.pairs.map((pk) => pk[1]);
  const firstBadKey = () => {
    const i = keys.findIndex((k) => {
      try {
        validateKey(k);
        return false;
      } catch {
        return true;
      }
    });
    return Math.max(0, i);
  };
  let field: string;
  const pair = /^pairs\[(\d+)\](.*)$/.exec(err.field);
  if (err.field === 'key') {
    field =
      r.kind === 'all'
        ? `${r.path}.checks[${firstBadKey()}].key`
        : r.list
          ? `${r.path}.keys[${firstBadKey()}]`
          : `${r.path}.key`;
  } else if (pair && r.kind === 'all') {
    field = `${r.path}.checks[${pair[1]}]${pair[2] || '.policy'}`;
  } else {
    field = `${r.path}.${err.field}`;
  }
  return new RateMeshError(err.code, err.reason, field);
}

const CHECK_FIELDS = ['policy', 'key', 'keys', 'cost', 'checks'];

/**
 * Validates the JSON shape of a check. Types only: the limiter validates the
 * values themselves (policy exists, key well formed, cost in range).
 */
export function parseCheck(body: unknown, p = 'body'): CheckRequest {
  const bad = (field: string, message: string): never => fail(field, message, ErrorCodes.REQUEST_INVALID);
  if (!isPlainObject(body)) return bad(p, `must be a JSON object (got ${shown(body)})`);
  for (const k of Object.keys(body)) {
    if (!CHECK_FIELDS.includes(k))
      bad(fieldPath(p, k), `unknown field (expected ${CHECK_FIELDS.join(', ')})`);
  }
  let cost: number | undefined;
  if (body.cost !== undefined) {
    if (typeof body.cost !== 'number') bad(`${p}.cost`, `must be a number (got ${shown(body.cost)})`);
    cost = body.cost as number;
  }
  if (body.checks !== undefined) {
    for (const f of ['policy', 'key', 'keys']) {
      if (body[f] !== undefined)
        bad(`${p}.${f}`, 'give either `checks` or `policy` with `key`/`keys`, not both');
    }
    const list = body.checks;
    if (!Array.isArray(list) || list.length === 0 || list.length > MAX_KEYS_PER_CHECK) {
      return bad(`${p}.checks`, `must be a list of 1..${MAX_KEYS_PER_CHECK} {policy, key} objects`);
    }
    const pairs = list.map((c, i): PolicyKey => {
      const path = `${p}.checks[${i}]`;
      if (!isPlainObject(c)) return bad(path, `must be an object {policy, key} (got ${shown(c)})`);
      for (const k of Object.keys(c)) {
        if (k !== 'policy' && k !== 'key') bad(fieldPath(path, k), 'unknown field (expected policy, key)');
      }
      if (typeof c.policy !== 'string') bad(`${path}.policy`, `must be a string (got ${shown(c.policy)})`);
      if (typeof c.key !== 'string') bad(`${path}.key`, `must be a string (got ${shown(c.key)})`);
      return [c.policy as string, c.key as string];
    });
    return { kind: 'all', pairs, cost, path: p };
  }
  if (typeof body.policy !== 'string')
    return bad(`${p}.policy`, `must be a string (got ${shown(body.policy)})`);
  if (body.key !== undefined && body.keys !== undefined)
    return bad(`${p}.keys`, 'give `key` or `keys`, not both');
  let keys: string[];
  if (body.key !== undefined) {
    if (typeof body.key !== 'string') return bad(`${p}.key`, `must be a string (got ${shown(body.key)})`);
    keys = [body.key];
  } else if (body.keys !== undefined) {
    const list = body.keys;
    if (!Array.isArray(list) || list.length === 0 || list.length > MAX_KEYS_PER_CHECK) {
      return bad(`${p}.keys`, `must be a list of 1..${MAX_KEYS_PER_CHECK} strings (got ${shown(list)})`);
    }
    keys = list.map((k, i) =>
      typeof k === 'string' ? k : bad(`${p}.keys[${i}]`, `must be a string (got ${shown(k)})`),
    );
  } else {
    return bad(`${p}.key`, 'required: give `key` (a string) or `keys` (a list of strings)');
  }
  return { kind: 'one', policy: body.policy, keys, cost, path: p, list: body.keys !== undefined };
}

export function checkContentType(header: string | undefined): void {
  const [type, ...params] = (header ?? '').split(';').map((s) => s.trim().toLowerCase());
  const json =
    type === 'application/json' || (type !== undefined && /^application\/[a-z0-9.+-]+\+json$/.test(type));
  const charset = params.find((p) => p.startsWith('charset='));
  const utf8 = charset === undefined || /^charset="?utf-8"?$/.test(charset);
  if (!json || !utf8) {
    throw new HttpError(
      415,
      HttpErrorCodes.UNSUPPORTED_MEDIA_TYPE,
      `content-type must be application/json (UTF-8) (got ${shown(header)})`,
      'content-type',
    );
  }
}

/** Reads the body, refusing more than `max` bytes (by content-length up front, or as it streams). */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const tooLarge = () =>
    new HttpError(413, HttpErrorCodes.BODY_TOO_LARGE, `request body larger than ${max} bytes`, 'body');
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > max) {
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: Error | undefined, buf?: Buffer) => {
      if (done) return;
      done = true;
      req.off('data', onData);
      if (err) {
        // Discard the rest instead of buffering it; the connection closes after the response.
        req.resume();
        reject(err);
      } else {
        resolve(buf ?? Buffer.alloc(0));
      }
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) return finish(tooLarge());
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => finish(undefined, Buffer.concat(chunks, size)));
    req.on('error', (err) => finish(err));
    req.on('aborted', () => finish(new Error('request aborted')));
  });
}
