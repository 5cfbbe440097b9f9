import { type Clock, systemClock } from '../clock.js';
import { ErrorCodes, isRateMeshError } from '../errors.js';
import { MAX_CELLS } from '../policy/constants.js';
import type { Decision, KeyOutcome, PolicyKey, RateLimiter } from '../types.js';
import type { EnvoyConfig } from './config.js';
import { canCount } from './counting.js';
import { counterKey } from './key.js';
import { type DescriptorEntry, matchDescriptor } from './matcher.js';
import type { LimitOverrides } from './overrides.js';
import type { DescriptorLevel, EnvoyRateLimit } from './tree.js';
import { type EnvoyUnit, parseUnit, UNIT_ENUM, UNIT_SECONDS } from './units.js';
import type { JsonValue } from './yaml-reader.js';

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

/**
 * Which hits count (see {@link RlsServiceOptions.countHits}): `every` (default),
 * `stop-when-over`, or `when-allowed`.
 */
export type CountHits = 'every' | 'stop-when-over' | 'when-allowed';

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
   * A domain no config names: `ok` (default) answers OK with no limit for
   * every descriptor, as envoyproxy/ratelimit does; `error` refuses the call
   * with NOT_FOUND (a typo in Envoy's `domain` then shows).
   */
  unknownDomain?: 'error' | 'ok';
  /**
   * Which hits count. `every` (default, as envoyproxy/ratelimit): every
   * matched descriptor's hits, whatever the answer, so a client that keeps
   * calling while limited stays limited. `stop-when-over` (their
   * `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`): when a descriptor goes over,
   * only the descriptors over the limit count, the others of that request do
   * not. `when-allowed` (ratemesh's own check): all or nothing, a refused
   * request counts on no descriptor.
   */
  countHits?: CountHits;
  /**
   * Applies `limit` overrides sent in requests (Envoy's `limit` action); when
   * absent an override is INVALID_ARGUMENT.
   */
  overrides?: LimitOverrides | undefined;
  /**
   * Answer with `dynamic_metadata` (their `RESPONSE_DYNAMIC_METADATA`): the
   * domain, the descriptors, the hits, and the `metadata` of the descriptors
   * that passed (the first value of a field wins). Default false.
   */
  dynamicMetadata?: boolean;
  /** The time `duration_until_reset` is taken from; the limiter's clock. Default: the system clock. */
  clock?: Clock;
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

/** `RateLimitResponse`, in @grpc/proto-loader's shape (but `dynamic_metadata`: plain JSON). */
export interface RlsResponse {
  overall_code: 'OK' | 'OVER_LIMIT';
  statuses: RlsDescriptorStatus[];
  response_headers_to_add: { key: string; value: string }[];
  /** With {@link RlsServiceOptions.dynamicMetadata}: encoded as a google.protobuf.Struct. */
  dynamic_metadata?: { [key: string]: JsonValue };
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

/** A request's `limit` override, as the rate limit it stands for. */
interface OverrideLimit {
  readonly policy: string | undefined;
  readonly requestsPerUnit: number;
  readonly unit: EnvoyUnit;
  readonly windowMs: number;
  readonly name: '';
  readonly shadow: false;
  readonly quota: false;
  readonly unlimited: false;
  readonly replaces: readonly string[];
}
type Limit = EnvoyRateLimit | OverrideLimit;

/**
 * envoyproxy/ratelimit's `ShouldRateLimit` on a ratemesh limiter. Input is
 * the request as @grpc/proto-loader decodes it (keepCase, longs as numbers)
 * and is validated field by field: it comes from the network. A decision,
 * over the limit or not, is a response; a bad request is an error status
 * naming the field; nothing throws.
 *
 * The answers are theirs (their `test/redis`, `test/service` and
 * `test/limiter` expectations, ported in test/envoy/anchor-*.test.ts): every
 * hit counts by default ({@link CountHits}); a descriptor is over when its
 * count with this request's hits passes the limit, and then its
 * `limit_remaining` is 0; a descriptor repeated in one request sees the hits
 * of the copies before it; `duration_until_reset` is the time to the end of
 * the current unit (× multiplier) window, in whole seconds; shadow mode and
 * `quota_mode` change the codes only. Where ratemesh differs on purpose (a
 * sliding window), docs/envoy.md says so.
 */
export class RlsService {
  private domains: ReadonlyMap<string, DescriptorLevel>;
  private readonly limiter: RateLimiter;
  private headers: RlsServiceOptions['responseHeaders'];
  private unknownDomain: 'error' | 'ok';
  private countHits: CountHits;
  private dynamicMetadata: boolean;
  private readonly overrides: LimitOverrides | undefined;
  private readonly clock: Clock;
  private readonly onDecision: RlsServiceOptions['onDecision'];
  /** Reused by the matcher for share_threshold values (one call at a time: JavaScript is single-threaded). */
  private readonly shared: (string | undefined)[] = new Array(MAX_ENTRIES).fill(undefined);
  /** Per-descriptor scratch of one call, reused (decide is synchronous and never re-entered). */
  private readonly limits: (Limit | undefined)[] = new Array(MAX_DESCRIPTORS).fill(undefined);
  private readonly keys: string[] = new Array(MAX_DESCRIPTORS).fill('');
  private readonly hits: number[] = new Array(MAX_DESCRIPTORS).fill(0);
  /** The hits of this descriptor and of the copies of its (policy, key) before it in the request. */
  private readonly cumulative: number[] = new Array(MAX_DESCRIPTORS).fill(0);
  private readonly kinds: Kind[] = new Array(MAX_DESCRIPTORS).fill(NONE);
  private readonly slot: number[] = new Array(MAX_DESCRIPTORS).fill(0);

  constructor(opts: RlsServiceOptions) {
    this.domains = opts.config.domains;
    this.limiter = opts.limiter;
    this.headers = opts.responseHeaders;
    this.unknownDomain = opts.unknownDomain ?? 'ok';
    this.countHits = opts.countHits ?? 'every';
    this.dynamicMetadata = opts.dynamicMetadata ?? false;
    this.overrides = opts.overrides;
    this.clock = opts.clock ?? systemClock;
    this.onDecision = opts.onDecision;
  }

  /**
   * Serve another descriptor config from the next call on (a config reload).
   * The limiter must already hold the policies it names.
   */
  reconfigure(
    opts: Pick<
      RlsServiceOptions,
      'config' | 'responseHeaders' | 'unknownDomain' | 'countHits' | 'dynamicMetadata'
    >,
  ): void {
    this.dynamicMetadata = opts.dynamicMetadata ?? false;
    this.domains = opts.config.domains;
    this.headers = opts.responseHeaders;
    this.unknownDomain = opts.unknownDomain ?? 'ok';
    this.countHits = opts.countHits ?? 'every';
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
    const { limits, keys, hits, kinds, slot, cumulative } = this;
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
      if (d.limit !== undefined && d.limit !== null) {
        // theirs: the override applies whatever the config matches, counted under the descriptor's own key
        const o = this.override(d.limit, i, domain, list);
        if ('message' in o) return { ok: false, code: 'INVALID_ARGUMENT', message: o.message };
        limits[i] = o.limit;
        keys[i] = o.key;
        continue;
      }
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
    let zero = false;
    let zeroBlocks = false;
    for (let i = 0; i < n; i++) {
      const rl = limits[i];
      if (rl === undefined) kinds[i] = NONE;
      else if (rl.unlimited) kinds[i] = UNLIMITED;
      else if (rl.name !== '' && replaced?.has(rl.name)) kinds[i] = NONE;
      else if (rl.policy === undefined) {
        kinds[i] = ZERO;
        zero = true;
        if (!rl.shadow && !rl.quota) zeroBlocks = true;
      } else {
        kinds[i] = COUNTED;
        // The same limit and key twice in one request: one pair of the summed hits, each copy
        // seeing the hits of those before it (theirs increments the key once per copy).
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
        cumulative[i] = costs[at]!;
        slot[i] = at;
      }
    }

    let outcomes: KeyOutcome[] | undefined;
    /** Whether pair j's hits were counted. */
    let counted: (j: number) => boolean = () => false;
    if (pairs.length > 0) {
      const started = performance.now();
      let decision: Decision & { outcomes: KeyOutcome[] };
      const mode = this.countHits;
      if (given !== undefined) {
        // ---- owner placement (issue 27): the owner's answer, all or nothing
        decision = given;
        const spent = decision.allowed;
        counted = (j) => spent && costs[j]! > 0;
      } else if (mode !== 'when-allowed' && canCount(this.limiter)) {
        // Counting every hit as the anchor does (its default) is a local decision: owners answer
        // all or nothing, so keys placed on owners are asked only with countHits: when-allowed.
        decision = this.limiter.checkAllCounted(pairs, costs, mode === 'every' ? 'every' : 'refused', zero);
        const o = decision.outcomes;
        if (mode === 'every') counted = (j) => costs[j]! > 0;
        else {
          const anyOver = zero || o.some((x) => x.limited);
          counted = (j) => costs[j]! > 0 && (!anyOver || o[j]!.limited);
        }
      } else {
        const lookOnly = zeroBlocks ? costs.map(() => 0) : costs;
        // ---- owner placement (issue 27): asked of the owner, the answer comes back here as `given`
        const asked = ask && !zeroBlocks ? this.limiter.checkOrAsk?.(pairs, costs) : undefined;
        if (asked instanceof Promise) return asked.then((d) => this.decide(request, false, d));
        // all or nothing: a descriptor with requests_per_unit 0 refuses the request, so look without spending
        decision =
          (asked as (Decision & { outcomes: KeyOutcome[] }) | undefined) ??
          this.limiter.checkAll(pairs, lookOnly);
        const spent = !zeroBlocks && decision.allowed;
        counted = (j) => spent && costs[j]! > 0;
      }
      const seconds = (performance.now() - started) / 1000;
      outcomes = decision.outcomes;
      this.onDecision?.(decision, seconds, pairs, costs);
    }

    const now = this.clock.now();
    const statuses: RlsDescriptorStatus[] = new Array(n);
    let failedRate = 0;
    let failedQuota = 0;
    let totalQuota = 0;
    let closest: RlsDescriptorStatus | undefined;
    let closestRemaining = UNLIMITED_REMAINING;
    for (let i = 0; i < n; i++) {
      let s: RlsDescriptorStatus;
      const rl = limits[i];
      let overLimit = false;
      switch (kinds[i]!) {
        case NONE:
          s = { code: 'OK', limit_remaining: 0 };
          break;
        case UNLIMITED:
          s = { code: 'OK', limit_remaining: UNLIMITED_REMAINING };
          break;
        case ZERO:
          overLimit = true;
          s = {
            code: 'OVER_LIMIT',
            current_limit: currentLimit(rl!),
            limit_remaining: 0,
            duration_until_reset: untilReset(rl!.windowMs, now),
          };
          break;
        default: {
          const j = slot[i]!;
          const o = outcomes![j]!;
          const total = costs[j]!;
          // what was left before this request: an allowed outcome reports what is left after its cost
          const before = Math.max(0, Math.floor(o.limited ? o.remaining : o.remaining + total));
          const c = cumulative[i]!;
          // A look (no hits of its own) is over once nothing is left. Theirs stays OK at exactly
          // the limit and is over past it; a node here never counts past L (its peers would not
          // credit it), so "past the limit" cannot be told from "at it" on every node alike.
          overLimit = c > 0 ? c > before : before === 0 || (total === 0 && o.limited);
          const left = counted(j) ? before - c : before;
          s = {
            code: overLimit ? 'OVER_LIMIT' : 'OK',
            current_limit: currentLimit(rl!),
            limit_remaining: overLimit ? 0 : Math.min(UNLIMITED_REMAINING, Math.max(0, left)),
            duration_until_reset: untilReset(rl!.windowMs, now),
          };
        }
      }
      if (overLimit && rl!.shadow) s.code = 'OK';
      statuses[i] = s;
      // The header source, as theirs: the least remaining; a descriptor over the limit (not a quota) wins.
      if (s.current_limit !== undefined && s.limit_remaining < closestRemaining) {
        closest = s;
        closestRemaining = s.limit_remaining;
      }
      const quota = rl !== undefined && kinds[i] !== NONE && kinds[i] !== UNLIMITED && rl.quota;
      if (quota) totalQuota++;
      if (s.code === 'OVER_LIMIT') {
        if (quota) failedQuota++;
        else {
          failedRate++;
          closest = s;
          closestRemaining = 0;
        }
      }
    }

    // theirs: over when a rate limit descriptor is over, or every quota descriptor is
    const over = failedRate > 0 || (totalQuota > 0 && totalQuota === failedQuota);
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
        { key: names.reset, value: String(reset === undefined ? 0 : reset.seconds) },
      );
    }
    if (this.dynamicMetadata) response.dynamic_metadata = this.metadataOf(req, descriptors, statuses);
    return { ok: true, response };
  }

  /**
   * Their `ratelimitToMetadata`: the domain, each descriptor's entries (`key=value`) and its own
   * hits_addend, the request's hits_addend when set, and the `metadata` of every descriptor
   * that passed (not over, not unlimited, with a limit), merged: the first value of a field
   * wins, mappings merge field by field.
   */
  private metadataOf(
    req: Record<string, unknown>,
    descriptors: unknown[],
    statuses: readonly RlsDescriptorStatus[],
  ): { [key: string]: JsonValue } {
    const out: { [key: string]: JsonValue } = { domain: req.domain as string };
    const list: JsonValue[] = [];
    let merged: { [key: string]: JsonValue } | undefined;
    for (let i = 0; i < descriptors.length; i++) {
      const d = descriptors[i] as { entries: DescriptorEntry[]; hits_addend?: { value?: number } | null };
      const one: { [key: string]: JsonValue } = { entries: d.entries.map((e) => `${e.key}=${e.value}`) };
      if (d.hits_addend !== undefined && d.hits_addend !== null) one.hitsAddend = d.hits_addend.value ?? 0;
      list.push(one);
      const rl = this.limits[i];
      const kind = this.kinds[i];
      if (rl === undefined || kind === NONE || kind === UNLIMITED || statuses[i]!.code === 'OVER_LIMIT')
        continue;
      const meta = (rl as EnvoyRateLimit).metadata;
      if (meta === undefined) continue;
      merged ??= {};
      mergeInto(merged, meta);
    }
    out.descriptors = list;
    const hits = req.hits_addend;
    if (typeof hits === 'number' && hits !== 0) out.hitsAddend = hits;
    if (merged !== undefined && Object.keys(merged).length > 0) out.metadata = merged;
    return out;
  }

  /** A request's `limit` override as a rate limit and its counter key, or the INVALID_ARGUMENT message. */
  private override(
    raw: unknown,
    i: number,
    domain: string,
    entries: readonly DescriptorEntry[],
  ): { limit: OverrideLimit; key: string } | { message: string } {
    const field = `descriptors[${i}].limit`;
    if (this.overrides === undefined) {
      return {
        message: `${field}: limit overrides are not enabled on this node (set the limit in the config)`,
      };
    }
    const o = raw as { requests_per_unit?: unknown; unit?: unknown };
    const requests = o.requests_per_unit ?? 0;
    if (typeof requests !== 'number' || !Number.isInteger(requests) || requests < 0)
      return { message: `${field}.requests_per_unit: must be an unsigned integer (got ${shown(requests)})` };
    const unit = typeof o.unit === 'string' ? parseUnit(o.unit) : undefined;
    if (unit === undefined)
      return {
        message: `${field}.unit: must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR (got ${shown(o.unit)})`,
      };
    let policy: string | undefined;
    if (requests > 0) {
      const p = this.overrides.policyFor(requests, unit);
      if ('error' in p) return { message: `${field}: ${p.error}` };
      policy = p.name;
    }
    const parts: DescriptorEntry[] = [{ key: '', value: domain }];
    for (const e of entries) parts.push({ key: '', value: e.key }, { key: '', value: e.value });
    const limit: OverrideLimit = {
      policy,
      requestsPerUnit: requests,
      unit,
      windowMs: UNIT_SECONDS[unit] * 1000,
      name: '',
      shadow: false,
      quota: false,
      unlimited: false,
      replaces: NO_REPLACES,
    };
    return { limit, key: counterKey(parts, NO_SHARED) };
  }
}

const NO_REPLACES: readonly string[] = Object.freeze([]);

function isStruct(v: JsonValue | undefined): v is { [key: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Their `mergeMetadata`: fields `dest` lacks are copied; two mappings merge; otherwise `dest` keeps its value. */
function mergeInto(dest: { [key: string]: JsonValue }, src: { readonly [key: string]: JsonValue }): void {
  for (const [k, v] of Object.entries(src)) {
    const have = dest[k];
    if (have === undefined) dest[k] = structuredClone(v);
    else if (isStruct(have) && isStruct(v)) mergeInto(have, v);
  }
}
const NO_SHARED: readonly (string | undefined)[] = Object.freeze([]);

function currentLimit(rl: Limit): { name: string; requests_per_unit: number; unit: string } {
  return { name: rl.name, requests_per_unit: rl.requestsPerUnit, unit: UNIT_ENUM[rl.unit!] };
}

/**
 * Whole seconds to the end of the clock-aligned window of `windowMs` holding
 * `now` (envoyproxy/ratelimit's `CalculateReset`: unit − now mod unit), so
 * never more than the window.
 */
export function untilReset(windowMs: number, now: number): { seconds: number; nanos: number } {
  const w = Math.max(1, Math.round(windowMs / 1000));
  const t = Math.floor(now / 1000);
  return { seconds: w - (t % w), nanos: 0 };
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
