/**
 * Every rate-limit response header ratemesh writes is formatted here, and only here.
 *
 * - `draft-11` (default): `RateLimit-Policy` and `RateLimit` as Structured Field
 *   Lists (RFC 9651) per draft-ietf-httpapi-ratelimit-headers-11: one member per
 *   applying policy, the member a String (the policy name) with `q`, `w` (and
 *   `pk` when configured) on the policy, `r`, `t` (and `pk`) on the live field.
 * - `draft-8`, `draft-7`, `draft-6`: the shapes express-rate-limit emits for
 *   those drafts, so clients written against it keep working.
 * - legacy `X-RateLimit-Limit` / `-Remaining` / `-Reset` (epoch seconds).
 * - `Retry-After` in delta-seconds (RFC 9110), rounded up, never 0.
 */
import { createHash } from 'node:crypto';

/** The header shapes `standardHeaders` selects. */
export type HeaderDraft = 'draft-6' | 'draft-7' | 'draft-8' | 'draft-11';

export const HEADER_DRAFTS: readonly HeaderDraft[] = ['draft-6', 'draft-7', 'draft-8', 'draft-11'];

/** One applying (policy, key) pair, as the header formatters need it. */
export interface HeaderMember {
  /** Policy name: the String item of both fields. */
  readonly policy: string;
  readonly limit: number;
  readonly windowMs: number;
  /** Cells left (clamped to a non-negative integer when formatted). */
  readonly remaining: number;
  /** Seconds for `t`: already rounded by {@link seconds} or {@link retryAfterSeconds}. */
  readonly resetSeconds: number;
  /** Base64 of the partition key bytes, when `pk` is to be sent. */
  readonly pk?: string | undefined;
}

/** A header sink: `(name, value)`; the adapters pass `res.setHeader` or `reply.header`. */
export type SetHeader = (name: string, value: string) => void;

/** Milliseconds to whole delta-seconds, rounded up, never negative. */
export function seconds(ms: number): number {
  return ms > 0 ? Math.ceil(ms / 1000) : 0;
}

/**
 * `Retry-After` delta-seconds for a denial: rounded up so a client that waits
 * exactly this long is never early, and at least 1 (a 0 would invite a retry storm).
 */
export function retryAfterSeconds(ms: number): number {
  return ms > 1000 ? Math.ceil(ms / 1000) : 1;
}

/** The window as `w` wants it: whole seconds, at least 1 (the draft forbids 0). */
export function windowSeconds(windowMs: number): number {
  return Math.max(1, Math.ceil(windowMs / 1000));
}

/** A non-negative integer, as `q` and `r` must be. */
function count(n: number): number {
  return n > 0 ? Math.floor(n) : 0;
}

/**
 * A Structured Field String (RFC 9651 §4.1.6): quoted, `"` and `\` escaped.
 * Characters outside printable ASCII cannot be carried; they become `?`.
 */
export function sfString(s: string): string {
  if (/^[\x20\x21\x23-\x5b\x5d-\x7e]*$/.test(s)) return `"${s}"`;
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c >= 0x20 && c <= 0x7e) out += ch;
    else out += '?';
  }
  return `${out}"`;
}

/**
 * The partition key sent as `pk`: the first 12 bytes of SHA-256 of the limiter
 * key, base64. The raw key is never sent: it can hold an IP address or account id
 * (the draft asks servers to avoid sensitive partition keys).
 */
export function partitionKey(key: string): string {
  return createHash('sha256').update(key).digest().subarray(0, 12).toString('base64');
}

/** One draft-11 `RateLimit-Policy` member: `"name";q=L;w=W[;pk=:..:]`. */
export function policyMember(m: Pick<HeaderMember, 'policy' | 'limit' | 'windowMs' | 'pk'>): string {
  const pk = m.pk === undefined ? '' : `;pk=:${m.pk}:`;
  return `${sfString(m.policy)};q=${count(m.limit)};w=${windowSeconds(m.windowMs)}${pk}`;
}

/** One draft-11 `RateLimit` member from an already quoted name (see {@link sfString}): the hot path. */
export function limitMemberQuoted(quotedName: string, remaining: number, resetSeconds: number): string {
  return `${quotedName};r=${count(remaining)};t=${resetSeconds}`;
}

/** One draft-11 `RateLimit` member: `"name";r=R;t=T[;pk=:..:]`. */
export function limitMember(m: HeaderMember): string {
  const pk = m.pk === undefined ? '' : `;pk=:${m.pk}:`;
  return `${sfString(m.policy)};r=${count(m.remaining)};t=${m.resetSeconds}${pk}`;
}

/** The draft-11 `RateLimit-Policy` value: a List, one member per policy. */
export function formatRateLimitPolicy(members: readonly HeaderMember[]): string {
  let out = '';
  for (let i = 0; i < members.length; i++) out += (i === 0 ? '' : ', ') + policyMember(members[i]!);
  return out;
}

/** The draft-11 `RateLimit` value: a List, one member per policy. */
export function formatRateLimit(members: readonly HeaderMember[]): string {
  let out = '';
  for (let i = 0; i < members.length; i++) out += (i === 0 ? '' : ', ') + limitMember(members[i]!);
  return out;
}

/**
 * Writes the selected standard fields. `members` lists every applying policy;
 * `main` is the one the single-policy drafts (6, 7) report: the decision's.
 * `policyValue` is a precomputed draft-11 `RateLimit-Policy` value, if the
 * caller has one (it does not change between requests unless `pk` is sent).
 */
export function setStandardHeaders(
  set: SetHeader,
  draft: HeaderDraft,
  members: readonly HeaderMember[],
  main: HeaderMember,
  key: string,
  policyValue?: string,
): void {
  switch (draft) {
    case 'draft-11':
      set('RateLimit-Policy', policyValue ?? formatRateLimitPolicy(members));
      set('RateLimit', formatRateLimit(members));
      return;
    case 'draft-8': {
      // express-rate-limit's draft-8 shape: the partition key is always sent.
      const pk = partitionKey(key);
      set(
        'RateLimit-Policy',
        `${sfString(main.policy)}; q=${count(main.limit)}; w=${windowSeconds(main.windowMs)}; pk=:${pk}:`,
      );
      set('RateLimit', `${sfString(main.policy)}; r=${count(main.remaining)}; t=${main.resetSeconds}`);
      return;
    }
    case 'draft-7':
      set('RateLimit-Policy', `${count(main.limit)};w=${windowSeconds(main.windowMs)}`);
      set(
        'RateLimit',
        `limit=${count(main.limit)}, remaining=${count(main.remaining)}, reset=${main.resetSeconds}`,
      );
      return;
    case 'draft-6':
      set('RateLimit-Policy', `${count(main.limit)};w=${windowSeconds(main.windowMs)}`);
      set('RateLimit-Limit', String(count(main.limit)));
      set('RateLimit-Remaining', String(count(main.remaining)));
      set('RateLimit-Reset', String(main.resetSeconds));
      return;
  }
}

/** Legacy `X-RateLimit-*`; `X-RateLimit-Reset` is the reset time in epoch seconds. */
export function setLegacyHeaders(set: SetHeader, main: HeaderMember, nowMs: number): void {
  set('X-RateLimit-Limit', String(count(main.limit)));
  set('X-RateLimit-Remaining', String(count(main.remaining)));
  set('X-RateLimit-Reset', String(Math.ceil(nowMs / 1000) + main.resetSeconds));
}

/** `Retry-After` delta-seconds. */
export function setRetryAfter(set: SetHeader, secs: number): void {
  set('Retry-After', String(secs));
}
