/**
 * The HTTP layer's user options and the one place they are validated: every
 * field is checked when a guard, middleware or plugin is created, never on a
 * request. Errors are RateMeshError CONFIG_INVALID with `field` naming the
 * offending option (`routes[1].policies[0]`, `trustProxy[2]`, ...).
 */
import { type Clock, systemClock } from '../clock.js';
import type { WarnLogger } from '../logger.js';
import type { Decision, FailureMode, KeyOutcome, RateLimiter } from '../types.js';
import { boolean, fail, func, integer, oneOf, optional } from '../validate.js';
import { type ProxyHeader, parseTrustedProxies, type TrustedProxies } from './client-ip.js';
import {
  formatRateLimitPolicy,
  HEADER_DRAFTS,
  type HeaderDraft,
  type HeaderMember,
  sfString,
} from './headers.js';
import { foldCase, normalizePath } from './path.js';

/**
 * Which key a policy is spent on:
 * - `ip`: `ip:<client address>` (IPv6 folded to `ipv6Subnet`);
 * - `key` (default): the `keyGenerator` result, or the ip key when there is none;
 * - `account`: `acct:<id>` from `account(req)`; skipped for anonymous requests;
 * - `endpoint`: `acct:<id>:<endpoint>` from `account(req)` and `endpoint(req)`.
 */
export type KeySource = 'ip' | 'key' | 'account' | 'endpoint';

/** A policy and the key it is spent on. A bare string means `{ policy, by: 'key' }`. */
export type PolicyRef = string | { readonly policy: string; readonly by?: KeySource };

/** May be sync or async; the sync path allocates no promise. */
export type MaybePromise<T> = T | Promise<T>;

/** Policies for the requests a rule matches; the first matching rule wins. */
export interface RouteRule<Req> {
  /** Methods matched (case-insensitive). Default: all. */
  readonly method?: string | readonly string[];
  /**
   * An exact path or a prefix ending in `/*`, matched without regard to case on the
   * normalised request path (escapes decoded, `//` collapsed, trailing `/` ignored,
   * query cut), so respelling a URL cannot dodge a rule; or a RegExp tested on that
   * normalised path (case kept: add the `i` flag to ignore it). `GET` rules match `HEAD` too.
   */
  readonly path: string | RegExp;
  /** Policies spent by the matched requests; an empty list exempts them. */
  readonly policies: readonly PolicyRef[];
  /** What to do when no decision can be made. Default: closed if a policy says so, else the top-level `failureMode`. */
  readonly failureMode?: FailureMode;
  /** Route-specific skip; runs instead of the top-level `skip`. */
  readonly skip?: (req: Req) => MaybePromise<boolean>;
}

/** What a denial handler and a `message` function are told. */
export interface LimitInfo {
  /** The status that would be sent (the `statusCode` option). */
  readonly statusCode: number;
  /** `Retry-After` seconds, or undefined when the request can never be admitted. */
  readonly retryAfter: number | undefined;
  /** The policy that refused. */
  readonly policy: string;
  /** Names of every policy that refused. */
  readonly violatedPolicies: readonly string[];
  readonly decision: Decision & { outcomes: KeyOutcome[] };
}

/** Options shared by the node:http guard, the Express middleware and the Fastify plugin. */
export interface RateMeshHttpOptions<Req, Res> {
  /** The limiter deciding: a local `Engine` or a mesh node. */
  readonly limiter: RateLimiter;
  /** Policies for every request no `routes` rule matches. Default: none (unmatched requests pass). */
  readonly policies?: readonly PolicyRef[];
  /** Per-route policies, tried in order before `policies`. */
  readonly routes?: readonly RouteRule<Req>[];
  /** Key for `by: 'key'` policies. Default: the client IP key. */
  readonly keyGenerator?: (req: Req) => MaybePromise<string>;
  /** Account id of the request, or undefined when anonymous. */
  readonly account?: (req: Req) => MaybePromise<string | undefined>;
  /** Endpoint name for `by: 'endpoint'` policies, or undefined when none applies. */
  readonly endpoint?: (req: Req) => MaybePromise<string | undefined>;
  /** Requests for which this returns true are not limited (the concurrency ceiling still applies). */
  readonly skip?: (req: Req) => MaybePromise<boolean>;
  /** Sends the denial instead of the default body; headers are already set. */
  readonly handler?: (req: Req, res: Res, info: LimitInfo) => MaybePromise<void>;
  /** The denial body: a string (becomes `message` in the JSON body), a JSON object, or a function of either. */
  readonly message?:
    | string
    | Readonly<Record<string, unknown>>
    | ((req: Req, info: LimitInfo) => string | Readonly<Record<string, unknown>>);
  /** Denial status. Default 429. */
  readonly statusCode?: number;
  /** Send denials as `application/problem+json` (RFC 9457, type `quota-exceeded`). Default false. */
  readonly problemJson?: boolean;
  /** `draft-11` (default; `true` means the same), `draft-8`, `draft-7`, `draft-6`, or false for none. */
  readonly standardHeaders?: HeaderDraft | boolean;
  /** `X-RateLimit-Limit` / `-Remaining` / `-Reset`. Default false. */
  readonly legacyHeaders?: boolean;
  /** draft-11: send `pk` (a hash of the key, never the key itself). Default false. */
  readonly partitionKey?: boolean;
  /** Prefix length IPv6 clients are folded to, or false for none. Default 64. */
  readonly ipv6Subnet?: number | false;
  /** CIDRs of proxies whose forwarding header is believed. Default false: the socket peer is the client. */
  readonly trustProxy?: readonly string[] | false;
  /** The header the trusted proxies write; only that one is read. Default `x-forwarded-for`. */
  readonly proxyHeader?: ProxyHeader;
  /**
   * When no decision can be made: `open` forwards, `closed` answers 503. A route's own
   * `failureMode` wins; else a route with any fail-closed policy fails closed; else this. Default `open`.
   */
  readonly failureMode?: FailureMode;
  /** `Retry-After` seconds of a fail-closed 503. Default 1. */
  readonly failureRetryAfter?: number;
  /** Hard cap on requests in flight through this instance; beyond it, 503. Default: none. */
  readonly maxInFlight?: number | false;
  /** `Retry-After` seconds of an over-capacity 503. Default 1. */
  readonly overloadRetryAfter?: number;
  /** Where failures and shadow denials are logged (pino works). Default: console, at most one line per event kind per second. false: silent. */
  readonly logger?: WarnLogger | false;
  /** Wall clock for `X-RateLimit-Reset`. Default: the system clock. */
  readonly clock?: Clock;
}

/** One policy of a route, resolved. */
export interface Binding {
  readonly policy: string;
  readonly by: KeySource;
}

/** A route, compiled. */
export interface CompiledRoute<Req> {
  readonly label: string;
  readonly methods: ReadonlySet<string> | undefined;
  readonly exact: string | undefined;
  readonly prefix: string | undefined;
  readonly regex: RegExp | undefined;
  readonly bindings: readonly Binding[];
  readonly failureMode: FailureMode;
  readonly skip: ((req: Req) => MaybePromise<boolean>) | undefined;
  /** The draft-11 `RateLimit-Policy` value when every non-shadow binding applies and no `pk` is sent. */
  readonly policyHeader: string;
  /** Each binding's policy window (ms), in binding order. */
  readonly windowMs: readonly number[];
  /** {@link sfString} of each binding's policy name, in binding order. */
  readonly quotedNames: readonly string[];
  /** One binding, keyed by the client address: the allocation-free path. */
  readonly ipOnly: boolean;
  /** True when the ip of the request is needed (an `ip` binding, or `key` with no keyGenerator). */
  readonly needsIp: boolean;
}

/** The validated configuration the core runs on. */
export interface HttpConfig<Req, Res> {
  readonly limiter: RateLimiter;
  readonly routes: readonly CompiledRoute<Req>[];
  /** Compiles a further rule (a Fastify route's own config) against these options; throws CONFIG_INVALID naming `field`. */
  readonly compileRoute: (rule: unknown, field: string) => CompiledRoute<Req>;
  readonly keyGenerator: ((req: Req) => MaybePromise<string>) | undefined;
  readonly account: ((req: Req) => MaybePromise<string | undefined>) | undefined;
  readonly endpoint: ((req: Req) => MaybePromise<string | undefined>) | undefined;
  readonly handler: ((req: Req, res: Res, info: LimitInfo) => MaybePromise<void>) | undefined;
  readonly message: RateMeshHttpOptions<Req, Res>['message'];
  readonly statusCode: number;
  readonly problemJson: boolean;
  readonly standardHeaders: HeaderDraft | false;
  readonly legacyHeaders: boolean;
  readonly partitionKey: boolean;
  readonly ipv6Subnet: number | false;
  readonly trustProxy: TrustedProxies | undefined;
  readonly proxyHeader: ProxyHeader;
  /** Failure mode where no route applies (internal errors): the `failureMode` option, else open. */
  readonly failureMode: FailureMode;
  readonly failureRetryAfter: number;
  readonly maxInFlight: number;
  readonly overloadRetryAfter: number;
  readonly logger: WarnLogger | undefined;
  readonly clock: Clock;
}

const OPTION_FIELDS: ReadonlySet<string> = new Set([
  'limiter',
  'policies',
  'routes',
  'keyGenerator',
  'account',
  'endpoint',
  'skip',
  'handler',
  'message',
  'statusCode',
  'problemJson',
  'standardHeaders',
  'legacyHeaders',
  'partitionKey',
  'ipv6Subnet',
  'trustProxy',
  'proxyHeader',
  'failureMode',
  'failureRetryAfter',
  'maxInFlight',
  'overloadRetryAfter',
  'logger',
  'clock',
]);
const ROUTE_FIELDS: ReadonlySet<string> = new Set(['method', 'path', 'policies', 'failureMode', 'skip']);
const KEY_SOURCES: readonly KeySource[] = ['ip', 'key', 'account', 'endpoint'];
const METHOD = /^[A-Za-z]{1,32}$/;
const FAILURE_MODES: readonly FailureMode[] = ['open', 'closed'];

/** An integer option in `min..max`, or `dflt` when left out. */
function int(value: unknown, field: string, dflt: number, min: number, max: number): number {
  return optional(value, dflt, (v) => integer(v, field, min, max));
}

/** Logs through `console.warn`, at most one line per message per second, counting what it drops. */
function consoleLogger(): WarnLogger {
  const last = new Map<string, { at: number; dropped: number }>();
  const log = (obj: Record<string, unknown>, msg: string): void => {
    const now = Date.now();
    const seen = last.get(msg);
    if (seen !== undefined && now - seen.at < 1000) {
      seen.dropped++;
      return;
    }
    const dropped = seen?.dropped ?? 0;
    if (last.size > 100) last.clear();
    last.set(msg, { at: now, dropped: 0 });
    console.warn(`ratemesh: ${msg}`, dropped > 0 ? { ...obj, suppressed: dropped } : obj);
  };
  return { warn: log, info: log };
}

function compileBindings(
  refs: unknown,
  field: string,
  limiter: RateLimiter,
  has: { keyGenerator: boolean; account: boolean; endpoint: boolean },
): Binding[] {
  if (!Array.isArray(refs)) fail(field, 'must be an array of policy names or { policy, by } objects');
  const seen = new Set<string>();
  return refs.map((ref: unknown, i) => {
    const f = `${field}[${i}]`;
    let policy: unknown;
    let by: unknown = 'key';
    if (typeof ref === 'string') policy = ref;
    else if (typeof ref === 'object' && ref !== null) {
      for (const k of Object.keys(ref)) if (k !== 'policy' && k !== 'by') fail(`${f}.${k}`, 'unknown field');
      policy = (ref as { policy?: unknown }).policy;
      by = (ref as { by?: unknown }).by ?? 'key';
    } else fail(f, 'must be a policy name or { policy, by }');
    if (typeof policy !== 'string' || limiter.policy(policy) === undefined) {
      fail(
        typeof ref === 'string' ? f : `${f}.policy`,
        `no such policy in the limiter: ${JSON.stringify(policy)}`,
      );
    }
    if (!KEY_SOURCES.includes(by as KeySource)) fail(`${f}.by`, `must be one of ${KEY_SOURCES.join(', ')}`);
    if ((by === 'account' || by === 'endpoint') && !has.account)
      fail(`${f}.by`, `'${by}' needs the account option`);
    if (by === 'endpoint' && !has.endpoint) fail(`${f}.by`, `'endpoint' needs the endpoint option`);
    if (seen.has(policy)) fail(f, `policy ${JSON.stringify(policy)} listed twice on one route`);
    seen.add(policy);
    return { policy, by: by as KeySource };
  });
}

function compileRoute<Req>(
  rule: unknown,
  field: string,
  limiter: RateLimiter,
  has: { keyGenerator: boolean; account: boolean; endpoint: boolean },
  dfltFailure: FailureMode | undefined,
): CompiledRoute<Req> {
  if (typeof rule !== 'object' || rule === null) fail(field, 'must be an object');
  const r = rule as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!ROUTE_FIELDS.has(k)) fail(`${field}.${k}`, 'unknown field');
  let methods: Set<string> | undefined;
  if (r.method !== undefined) {
    const list = typeof r.method === 'string' ? [r.method] : r.method;
    if (!Array.isArray(list) || list.length === 0)
      fail(`${field}.method`, 'must be a method or a non-empty array');
    methods = new Set(
      list.map((m: unknown, i: number) => {
        if (typeof m !== 'string' || !METHOD.test(m))
          fail(`${field}.method[${i}]`, `not an HTTP method: ${String(m)}`);
        return m.toUpperCase();
      }),
    );
    // HEAD is GET without the body: a GET limit a client could dodge with HEAD would be no limit.
    if (methods.has('GET')) methods.add('HEAD');
  }
  let exact: string | undefined;
  let prefix: string | undefined;
  let regex: RegExp | undefined;
  if (typeof r.path === 'string') {
    if (!r.path.startsWith('/')) fail(`${field}.path`, "must start with '/'");
    // Patterns are normalised as request paths are (see path.ts); exact and prefix rules ignore case.
    if (r.path.endsWith('/*')) prefix = `${foldCase(normalizePath(r.path.slice(0, -2)))}/`.replace('//', '/');
    else exact = foldCase(normalizePath(r.path));
  } else if (r.path instanceof RegExp) {
    if (r.path.global || r.path.sticky)
      fail(`${field}.path`, 'a RegExp with the g or y flag keeps state between tests');
    regex = r.path;
  } else if (r.path !== undefined) fail(`${field}.path`, 'must be a string or RegExp');
  const bindings = compileBindings(r.policies, field === '' ? 'policies' : `${field}.policies`, limiter, has);
  // The route's own word wins; then a fail-closed policy (login, payment) keeps its route
  // closed; then the top-level default.
  const failureMode =
    optional(r.failureMode, undefined, (v) => oneOf(v, `${field}.failureMode`, FAILURE_MODES)) ??
    (bindings.some((b) => limiter.policy(b.policy)?.failureMode === 'closed') ? 'closed' : undefined) ??
    dfltFailure ??
    'open';
  const members: HeaderMember[] = [];
  for (const b of bindings) {
    const p = limiter.policy(b.policy)!;
    if (!p.shadow)
      members.push({ policy: p.name, limit: p.limit, windowMs: p.windowMs, remaining: 0, resetSeconds: 0 });
  }
  const label = `${methods === undefined ? '*' : [...methods].join('|')} ${r.path === undefined ? '*' : String(r.path)}`;
  return {
    label,
    methods,
    exact,
    prefix,
    regex,
    bindings,
    failureMode,
    skip: optional(r.skip, undefined, (v) => func(v, `${field}.skip`)),
    policyHeader: formatRateLimitPolicy(members),
    quotedNames: bindings.map((b) => sfString(b.policy)),
    windowMs: bindings.map((b) => limiter.policy(b.policy)!.windowMs),
    needsIp: bindings.some((b) => b.by === 'ip' || (b.by === 'key' && !has.keyGenerator)),
    ipOnly:
      bindings.length === 1 && (bindings[0]!.by === 'ip' || (bindings[0]!.by === 'key' && !has.keyGenerator)),
  };
}

/**
 * Validates `options` once; throws CONFIG_INVALID naming the field. `allowNoRoutes`
 * is for adapters whose routes bring their own rules (Fastify route config).
 */
export function parseOptions<Req, Res>(
  options: RateMeshHttpOptions<Req, Res>,
  allowNoRoutes = false,
): HttpConfig<Req, Res> {
  if (typeof options !== 'object' || options === null) fail('options', 'must be an object');
  for (const k of Object.keys(options)) if (!OPTION_FIELDS.has(k)) fail(k, 'unknown option');
  const limiter = options.limiter as unknown;
  if (
    typeof limiter !== 'object' ||
    limiter === null ||
    typeof (limiter as RateLimiter).checkAll !== 'function' ||
    typeof (limiter as RateLimiter).policy !== 'function'
  ) {
    fail('limiter', 'must be a RateLimiter (an Engine or a mesh node)');
  }
  const keyGenerator = optional(options.keyGenerator, undefined, (v) =>
    func<HttpConfig<Req, Res>['keyGenerator']>(v, 'keyGenerator'),
  );
  const account = optional(options.account, undefined, (v) =>
    func<HttpConfig<Req, Res>['account']>(v, 'account'),
  );
  const endpoint = optional(options.endpoint, undefined, (v) =>
    func<HttpConfig<Req, Res>['endpoint']>(v, 'endpoint'),
  );
  const has = {
    keyGenerator: keyGenerator !== undefined,
    account: account !== undefined,
    endpoint: endpoint !== undefined,
  };
  const failureMode = optional(options.failureMode, undefined, (v) => oneOf(v, 'failureMode', FAILURE_MODES));
  const skip = optional(options.skip, undefined, (v) => func<(req: Req) => MaybePromise<boolean>>(v, 'skip'));

  const routes: CompiledRoute<Req>[] = [];
  if (options.routes !== undefined) {
    if (!Array.isArray(options.routes)) fail('routes', 'must be an array');
    options.routes.forEach((rule, i) => {
      const route = compileRoute<Req>(rule, `routes[${i}]`, options.limiter, has, failureMode);
      routes.push(route.skip === undefined && skip !== undefined ? { ...route, skip } : route);
    });
  }
  if (options.policies !== undefined) {
    const route = compileRoute<Req>({ policies: options.policies }, '', options.limiter, has, failureMode);
    routes.push({ ...route, label: '*', skip });
  }
  if (routes.length === 0 && !allowNoRoutes) fail('policies', 'give policies, routes, or both');

  let standardHeaders: HeaderDraft | false;
  const sh = options.standardHeaders;
  if (sh === undefined || sh === true) standardHeaders = 'draft-11';
  else if (sh === false) standardHeaders = false;
  else if (HEADER_DRAFTS.includes(sh)) standardHeaders = sh;
  else
    fail('standardHeaders', `must be one of ${HEADER_DRAFTS.join(', ')}, true or false (got ${String(sh)})`);

  let ipv6Subnet: number | false = 64;
  if (options.ipv6Subnet === false) ipv6Subnet = false;
  else if (options.ipv6Subnet !== undefined) ipv6Subnet = int(options.ipv6Subnet, 'ipv6Subnet', 64, 1, 128);

  let trustProxy: TrustedProxies | undefined;
  if (options.trustProxy !== undefined && options.trustProxy !== false) {
    trustProxy = parseTrustedProxies(options.trustProxy, 'trustProxy');
  }
  const proxyHeader = options.proxyHeader ?? 'x-forwarded-for';
  if (proxyHeader !== 'x-forwarded-for' && proxyHeader !== 'forwarded') {
    fail('proxyHeader', `must be 'x-forwarded-for' or 'forwarded' (got ${String(proxyHeader)})`);
  }

  const m = options.message;
  if (
    m !== undefined &&
    typeof m !== 'string' &&
    typeof m !== 'function' &&
    (typeof m !== 'object' || m === null)
  ) {
    fail('message', 'must be a string, an object or a function');
  }
  if (typeof m === 'object' && m !== null) {
    try {
      JSON.stringify(m);
    } catch {
      fail('message', 'must be JSON-serialisable');
    }
  }

  let maxInFlight = 0;
  if (options.maxInFlight !== undefined && options.maxInFlight !== false) {
    maxInFlight = int(options.maxInFlight, 'maxInFlight', 0, 1, 1_000_000_000);
  }

  let logger: WarnLogger | undefined;
  if (options.logger === undefined) logger = consoleLogger();
  else if (options.logger !== false) {
    if (
      typeof options.logger !== 'object' ||
      options.logger === null ||
      typeof options.logger.warn !== 'function'
    ) {
      fail('logger', 'must have a warn(obj, msg) method, or be false');
    }
    logger = options.logger;
  }
  const clock = options.clock ?? systemClock;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function') {
    fail('clock', 'must have a now() method');
  }

  return {
    limiter: options.limiter,
    routes,
    compileRoute: (rule, field) => {
      const route = compileRoute<Req>(rule, field, options.limiter, has, failureMode);
      return route.skip === undefined && skip !== undefined ? { ...route, skip } : route;
    },
    keyGenerator,
    account,
    endpoint,
    handler: optional(options.handler, undefined, (v) => func(v, 'handler')),
    message: m,
    statusCode: int(options.statusCode, 'statusCode', 429, 400, 599),
    problemJson: optional(options.problemJson, false, (v) => boolean(v, 'problemJson')),
    standardHeaders,
    legacyHeaders: optional(options.legacyHeaders, false, (v) => boolean(v, 'legacyHeaders')),
    partitionKey: optional(options.partitionKey, false, (v) => boolean(v, 'partitionKey')),
    ipv6Subnet,
    trustProxy,
    proxyHeader,
    failureMode: failureMode ?? 'open',
    failureRetryAfter: int(options.failureRetryAfter, 'failureRetryAfter', 1, 1, 86_400),
    maxInFlight,
    overloadRetryAfter: int(options.overloadRetryAfter, 'overloadRetryAfter', 1, 1, 86_400),
    logger,
    clock,
  };
}
