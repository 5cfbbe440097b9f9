import { ErrorCodes, isRateMeshError } from '../errors.js';
import { MAX_CELLS } from '../policy/constants.js';
import type { Decision, KeyOutcome, PolicyKey, RateLimiter } from '../types.js';
import type { EnvoyConfig } from './config.js';
import { counterKey } from './key.js';
import { type DescriptorEntry, matchDescriptor } from './matcher.js';
import type { DescriptorLevel, EnvoyRateLimit } from './tree.js';
import { UNIT_ENUM } from './units.js';

/** Most descriptors one ShouldRateLimit request may carry. */
export const MAX_DESCRIPTORS = 64;
/** Most entries one descriptor may carry. */
export const MAX_ENTRIES = 32;
/** Largest hits_addend accepted (ratemesh's largest limit); above it the request is refused as invalid. */
export const MAX_HITS = MAX_CELLS;
/** `limit_remaining` of an unlimited descriptor, as envoyproxy/ratelimit answers it (MaxUint32). */
export const UNLIMITED_REMAINING = 0xffff_ffff;

/** The response-header names envoyproxy/ratelimit uses by default (`LIMIT_*_HEADER`). */
export const DEFAULT_HEADER_NAMES = {
  limit: 'RateLimit-Limit',
  remaining: 'RateLimit-Remaining',
  reset: 'RateLimit-Reset',
} as const;

/** Options of {@link RlsService}. */
export interface RlsServiceOptions {
  config: EnvoyConfig;
  limiter: RateLimiter;
  /**
   * Add the draft RateLimit headers of the descriptor closest to its limit to
   * `response_headers_to_add` (envoyproxy/ratelimit's
   * `LIMIT_RESPONSE_HEADERS_ENABLED`), with these names. Off when absent.
   */
  responseHeaders?: { limit: string; remaining: string; reset: string } | undefined;
  /**
   * A domain no config names: `error` (default) refuses the call with
   * NOT_FOUND; `ok` answers OK with no limit for every descriptor, as
   * envoyproxy/ratelimit does.
   */
  unknownDomain?: 'error' | 'ok';
  /** Told of every decision that reached the limiter (for metrics); `seconds` is the limiter's time. */
  onDecision?: (
    decision: Decision,
    seconds: number,
    pairs: readonly PolicyKey[],
    costs: readonly number[],
  ) => void;
}

/** A gRPC status code name this service answers with instead of a response. */
export type RlsErrorCode = 'INVALID_ARGUMENT' | 'NOT_FOUND' | 'UNAVAILABLE' | 'INTERNAL';

/** `RateLimitResponse.DescriptorStatus`, in @grpc/proto-loader's shape (keepCase, enums as names). */
export interface RlsDescriptorStatus {
  code: 'OK' | 'OVER_LIMIT';
  current_limit?: { name: string; requests_per_unit: number; unit: string };
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}

/** `RateLimitResponse`, in @grpc/proto-loader's shape. */
export interface RlsResponse {
  overall_code: 'OK' | 'OVER_LIMIT';
  statuses: RlsDescriptorStatus[];
  response_headers_to_add: { key: string; value: string }[];
}

/** The outcome of one call: a response, or a gRPC error status with a message naming the field. */
export type RlsResult =
  | { ok: true; response: RlsResponse }
  | { ok: false; code: RlsErrorCode; message: string };

/** What a matched descriptor does this call: no limit (none matched, or replaced). */
const NONE = 0;
/** `unlimited: true`. */
const UNLIMITED = 1;
/** `requests_per_unit: 0`: always over the limit (unless shadow). */
const ZERO = 2;
/** Counted on the limiter. */
const COUNTED = 3;
type Kind = typeof NONE | typeof UNLIMITED | typeof ZERO | typeof COUNTED;

/**
 * envoyproxy/ratelimit's `ShouldRateLimit` on a ratemesh limiter. Input is
 * the request as @grpc/proto-loader decodes it (keepCase, longs as numbers)
 * and is validated field by field: it comes from the network. A decision,
 * over the limit or not, is a response; a bad request is an error status
 * naming the field; nothing throws.
 *
 * One difference is kept on purpose: the request spends only if every
 * counted descriptor allows (all-or-nothing, like every ratemesh check),
 * where envoyproxy/ratelimit increments every matching descriptor even when
 * another one is over.
 */
export class RlsService {
  private domains: ReadonlyMap<string, DescriptorLevel>;
  private readonly limiter: RateLimiter;
  private headers: RlsServiceOptions['responseHeaders'];
  private unknownDomain: 'error' | 'ok';
  private readonly onDecision: RlsServiceOptions['onDecision'];
  /** Reused by the matcher for share_threshold values (one call at a time: JavaScript is single-threaded). */
  private readonly shared: (string | undefined)[] = new Array(MAX_ENTRIES).fill(undefined);
  /** Per-descriptor scratch of one call, reused (decide is synchronous and never re-entered). */
  private readonly limits: (EnvoyRateLimit | undefined)[] = new Array(MAX_DESCRIPTORS).fill(undefined);
  private readonly keys: string[] = new Array(MAX_DESCRIPTORS).fill('');
  private readonly hits: number[] = new Array(MAX_DESCRIPTORS).fill(0);
  private readonly kinds: Kind[] = new Array(MAX_DESCRIPTORS).fill(NONE);
  private readonly slot: number[] = new Array(MAX_DESCRIPTORS).fill(0);

  constructor(opts: RlsServiceOptions) {
    this.domains = opts.config.domains;
    this.limiter = opts.limiter;
    this.headers = opts.responseHeaders;
    this.unknownDomain = opts.unknownDomain ?? 'error';
    this.onDecision = opts.onDecision;
  }

  /**
   * Serve another descriptor config from the next call on (a config reload).
   * The limiter must already hold the policies it names.
   */
  reconfigure(opts: Pick<RlsServiceOptions, 'config' | 'responseHeaders' | 'unknownDomain'>): void {
    this.domains = opts.config.domains;
    this.headers = opts.responseHeaders;
    this.unknownDomain = opts.unknownDomain ?? 'error';
  }

  /**
   * {@link shouldRateLimit}, asking the owner of a descriptor key that another node owns (owner
   * placement, issue 27): the result at once when every key is decided here, else a promise.
   */
  shouldRateLimitOrAsk(request: unknown): RlsResult | Promise<RlsResult> {
    try {
      const r = this.decide(request, true);
      return r instanceof Promise ? r.catch((err: unknown) => this.failed(err)) : r;
    } catch (err) {
      return this.failed(err);
    }
  }

  private failed(err: unknown): RlsResult {
    if (isRateMeshError(err, ErrorCodes.NOT_STARTED)) {
      return { ok: false, code: 'UNAVAILABLE', message: 'the rate limiter is not running' };
    }
    if (isRateMeshError(err)) return { ok: false, code: 'INVALID_ARGUMENT', message: err.message };
    return { ok: false, code: 'INTERNAL', message: 'internal error' };
  }

  /** Decides one `RateLimitRequest`. */
  shouldRateLimit(request: unknown): RlsResult {
    try {
      return this.decide(request, false) as RlsResult;
    } catch (err) {
      if (isRateMeshError(err, ErrorCodes.NOT_STARTED)) {
        return { ok: false, code: 'UNAVAILABLE', message: 'the rate limiter is not running' };
      }
      if (isRateMeshError(err)) return { ok: false, code: 'INVALID_ARGUMENT', message: err.message };
      return { ok: false, code: 'INTERNAL', message: 'internal error' };
    }
  }

  /** `ask`: a key owned elsewhere may be asked of its owner (a promise); `given`: the decision, already made. */
  private decide(
    request: unknown,
    ask: boolean,
    given?: Decision & { outcomes: KeyOutcome[] },
  ): RlsResult | Promise<RlsResult> {
    if (typeof request !== 'object' || request === null)
      return invalid('request', 'must be a RateLimitRequest');
    const req = request as Record<string, unknown>;
    const domain = req.domain;
    if (typeof domain !== 'string' || domain === '')
      return invalid('domain', 'rate limit domain must not be empty');
    const descriptors = req.descriptors;
    if (!Array.isArray(descriptors) || descriptors.length === 0) {
      return invalid('descriptors', 'rate limit descriptor list must not be empty');
    }
    if (descriptors.length > MAX_DESCRIPTORS) {
      return { ok: false, code: 'INVALID_ARGUMENT', message: tooManyDescriptors(descriptors.length) };
    }
    const requestHits = req.hits_addend ?? 0;
    if (!isHits(requestHits))
      return invalid('hits_addend', `must be an integer 0..${MAX_HITS} (got ${shown(requestHits)})`);
    const defaultHits = Math.max(1, requestHits);

    const root = this.domains.get(domain);
    if (root === undefined && this.unknownDomain === 'error') {
      return {
        ok: false,
        code: 'NOT_FOUND',
        message: `domain: unknown rate limit domain ${shown(domain)}; configured: ${[...this.domains.keys()].slice(0, 20).join(', ')}`,
      };
    }

    const n = descriptors.length;
    const { limits, keys, hits, kinds, slot } = this;
    let replaced: Set<string> | undefined;
    // a field's path is built only for an error: nothing is allocated for it on the way
    const at = (i: number): string => `descriptors[${i}]`;
    for (let i = 0; i < n; i++) {
      const d = descriptors[i] as Record<string, unknown> | null;
      if (typeof d !== 'object' || d === null) return invalid(at(i), 'must be a RateLimitDescriptor');
      const entries = d.entries;
      if (!Array.isArray(entries) || entries.length === 0)
        return invalid(`${at(i)}.entries`, 'must hold at least one entry');
      if (entries.length > MAX_ENTRIES) {
        return { ok: false, code: 'INVALID_ARGUMENT', message: tooManyEntries(i, entries.length) };
      }
      for (let j = 0; j < entries.length; j++) {
        const e = entries[j] as Record<string, unknown> | null;
        if (typeof e !== 'object' || e === null || typeof e.key !== 'string' || e.key === '') {
          return invalid(`${at(i)}.entries[${j}].key`, 'must be a non-empty string');
        }
        if (typeof e.value !== 'string') {
          return invalid(`${at(i)}.entries[${j}].value`, 'must be a string');
        }
      }
      if (d.limit !== undefined && d.limit !== null) {
        return invalid(
          `${at(i)}.limit`,
          'limit overrides in the request are not supported by ratemesh; set the limit in the config',
        );
      }
      const h = d.hits_addend as { value?: unknown } | null | undefined;
      if (h !== undefined && h !== null) {
        const v = h.value ?? 0;
        if (!isHits(v))
          return invalid(`${at(i)}.hits_addend`, `must be an integer 0..${MAX_HITS} (got ${shown(v)})`);
        hits[i] = v;
      } else hits[i] = defaultHits;

      limits[i] = undefined;
      if (root === undefined) continue;
      const list = entries as DescriptorEntry[];
      const rl = matchDescriptor(root, list, this.shared);
      limits[i] = rl;
      if (rl !== undefined) {
        keys[i] = rl.policy === undefined ? '' : counterKey(list, this.shared);
        if (rl.replaces.length > 0) {
          replaced ??= new Set();
          for (let r = 0; r < rl.replaces.length; r++) replaced.add(rl.replaces[r]!);
        }
      }
    }

    // What each descriptor does: replaced limits drop out (unlimited ones stay unlimited, as theirs).
    const pairs: PolicyKey[] = [];
    const costs: number[] = [];
    let zeroBlocks = false;
    for (let i = 0; i < n; i++) {
      const rl = limits[i];
      if (rl === undefined) kinds[i] = NONE;
      else if (rl.unlimited) kinds[i] = UNLIMITED;
      else if (rl.name !== '' && replaced?.has(rl.name)) kinds[i] = NONE;
      else if (rl.policy === undefined) {
        kinds[i] = ZERO;
        if (!rl.shadow) zeroBlocks = true;
      } else {
        kinds[i] = COUNTED;
        // The same limit and key twice in one request is one count of the summed hits.
        let at = -1;
        for (let j = 0; j < pairs.length; j++) {
          if (pairs[j]![0] === rl.policy && pairs[j]![1] === keys[i]) {
            at = j;
            break;
          }
        }
        if (at < 0) {
          at = pairs.length;
          pairs.push([rl.policy, keys[i]!]);
          costs.push(hits[i]!);
        } else costs[at] = Math.min(MAX_HITS, costs[at]! + hits[i]!);
        slot[i] = at;
      }
    }

    let outcomes: KeyOutcome[] | undefined;
    let spent = false;
    if (pairs.length > 0) {
      // A descriptor with requests_per_unit 0 refuses the request: look at the others without spending.
      if (zeroBlocks) costs.fill(0);
      const started = performance.now();
      // ---- owner placement (issue 27): asked of the owner, the answer comes back here as `given`
      let decision = given;
      if (decision === undefined) {
        const asked = ask ? this.limiter.checkOrAsk?.(pairs, costs) : undefined;
        if (asked instanceof Promise) return asked.then((d) => this.decide(request, false, d));
        decision =
          (asked as (Decision & { outcomes: KeyOutcome[] }) | undefined) ??
          this.limiter.checkAll(pairs, costs);
      }
      // ---- end of owner placement
      const seconds = (performance.now() - started) / 1000;
      outcomes = decision.outcomes;
      spent = !zeroBlocks && decision.allowed;
      this.onDecision?.(decision, seconds, pairs, costs);
    }

    const statuses: RlsDescriptorStatus[] = new Array(n);
    let over = false;
    let closest: RlsDescriptorStatus | undefined;
    let closestRemaining = UNLIMITED_REMAINING;
    for (let i = 0; i < n; i++) {
      let s: RlsDescriptorStatus;
      const rl = limits[i];
      switch (kinds[i]!) {
        case NONE:
          s = { code: 'OK', limit_remaining: 0 };
          break;
        case UNLIMITED:
          s = { code: 'OK', limit_remaining: UNLIMITED_REMAINING };
          break;
        case ZERO:
          s = {
            code: rl!.shadow ? 'OK' : 'OVER_LIMIT',
            current_limit: currentLimit(rl!),
            limit_remaining: 0,
            duration_until_reset: duration(rl!.windowMs),
          };
          break;
        default: {
          const o = outcomes![slot[i]!]!;
          const limited = o.limited && !rl!.shadow;
          let resetMs = o.limited && o.retryAfterMs >= 0 ? o.retryAfterMs : o.resetMs;
          if (resetMs <= 0 && spent && hits[i]! > 0) resetMs = rl!.windowMs;
          s = {
            code: limited ? 'OVER_LIMIT' : 'OK',
            current_limit: currentLimit(rl!),
            limit_remaining: Math.min(UNLIMITED_REMAINING, Math.max(0, Math.floor(o.remaining))),
            duration_until_reset: duration(resetMs),
          };
        }
      }
      statuses[i] = s;
      // The header source, as theirs: the least remaining, and any descriptor over the limit wins.
      if (s.current_limit !== undefined && s.limit_remaining < closestRemaining) {
        closest = s;
        closestRemaining = s.limit_remaining;
      }
      if (s.code === 'OVER_LIMIT') {
        over = true;
        closest = s;
        closestRemaining = 0;
      }
    }

    const response: RlsResponse = {
      overall_code: over ? 'OVER_LIMIT' : 'OK',
      statuses,
      response_headers_to_add: [],
    };
    const names = this.headers;
    if (names !== undefined && closest?.current_limit !== undefined) {
      const reset = closest.duration_until_reset;
      response.response_headers_to_add.push(
        { key: names.limit, value: String(closest.current_limit.requests_per_unit) },
        { key: names.remaining, value: String(closest.limit_remaining) },
        {
          key: names.reset,
          value: String(reset === undefined ? 0 : reset.seconds + (reset.nanos > 0 ? 1 : 0)),
        },
      );
    }
    return { ok: true, response };
  }
}

function currentLimit(rl: EnvoyRateLimit): { name: string; requests_per_unit: number; unit: string } {
  return { name: rl.name, requests_per_unit: rl.requestsPerUnit, unit: UNIT_ENUM[rl.unit!] };
}

function duration(ms: number): { seconds: number; nanos: number } {
  const m = Math.max(0, Math.ceil(ms));
  return { seconds: Math.floor(m / 1000), nanos: (m % 1000) * 1_000_000 };
}

function isHits(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_HITS;
}

/** The INVALID_ARGUMENT message of a request with `count` descriptors, over {@link MAX_DESCRIPTORS}. */
export function tooManyDescriptors(count: number): string {
  return `descriptors: at most ${MAX_DESCRIPTORS} descriptors per request (got ${count})`;
}

/** The INVALID_ARGUMENT message of descriptor `index` with `count` entries, over {@link MAX_ENTRIES}. */
export function tooManyEntries(index: number, count: number): string {
  return `descriptors[${index}].entries: at most ${MAX_ENTRIES} entries per descriptor (got ${count})`;
}

function invalid(field: string, reason: string): RlsResult {
  return { ok: false, code: 'INVALID_ARGUMENT', message: `${field}: ${reason}` };
}

function shown(v: unknown): string {
  const s = typeof v === 'string' ? JSON.stringify(v) : String(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}
