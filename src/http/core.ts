import type { Socket } from 'node:net';
import { errorInfo } from '../errors.js';
import { accountKey, endpointKey, ipKey, validateKey } from '../keys/index.js';
import type { Decision, FailureMode, KeyOutcome, PolicyKey } from '../types.js';
import { clientIp } from './client-ip.js';
import { retryAfterSeconds } from './headers.js';
import {
  type CompiledRoute,
  type HttpConfig,
  type LimitInfo,
  type MaybePromise,
  parseOptions,
  type RateMeshHttpOptions,
} from './options.js';
import { foldCase, normalizePath } from './path.js';
import { type AdapterHooks, Responder, withOutcomes } from './respond.js';

export type { AdapterHooks } from './respond.js';

/** Headers a proxy sets; seen while trustProxy is off, they are warned about once. */
const FORWARDED_HEADERS = ['x-forwarded-for', 'forwarded', 'x-real-ip'] as const;

/** Why a request could not be decided; each is counted and logged. */
export type FailureReason =
  | 'not-ready'
  | 'stopped'
  | 'limiter-error'
  | 'key-error'
  | 'skip-error'
  | 'no-client-address'
  | 'forwarded-too-long'
  | 'forwarded-malformed'
  | 'forwarded-unknown'
  | 'ip-invalid'
  | 'internal-error';

/** Outcome stats of one guard, middleware or plugin instance. */
export interface HttpStats {
  /** Requests seen. */
  requests: number;
  /** Forwarded after the limiter allowed them (shadow would-be denials included). */
  allowed: number;
  /** Answered with the denial status (429). */
  limited: number;
  /** Would have been denied by a shadow policy; forwarded. */
  shadowLimited: number;
  /** Not limited: `skip` said so, no rule matched, or no key applied (anonymous on account-only policies). */
  skipped: number;
  /** Undecidable and forwarded (fail-open). */
  failOpen: number;
  /** Undecidable and answered 503 (fail-closed). */
  failClosed: number;
  /** Answered 503 by the concurrency ceiling. */
  overloaded: number;
  /** Denial handlers that threw (the default body was sent instead). */
  handlerErrors: number;
  /** Requests in flight now (only tracked with `maxInFlight`). */
  inFlight: number;
  /** Undecidable requests by reason. */
  failures: Partial<Record<FailureReason, number>>;
}

function isThenable<T>(v: MaybePromise<T>): v is Promise<T> {
  return typeof v === 'object' && v !== null && typeof (v as Promise<T>).then === 'function';
}

class Failure {
  constructor(
    readonly reason: FailureReason,
    readonly error?: unknown,
  ) {}
}

/**
 * The shared core. Adapters construct one per middleware instance and call
 * {@link RateMeshCore.handle} per request.
 */
export class RateMeshCore<Req, Res> {
  readonly config: HttpConfig<Req, Res>;
  private readonly hooks: AdapterHooks<Req, Res>;
  private readonly c: HttpStats = {
    requests: 0,
    allowed: 0,
    limited: 0,
    shadowLimited: 0,
    skipped: 0,
    failOpen: 0,
    failClosed: 0,
    overloaded: 0,
    handlerErrors: 0,
    inFlight: 0,
    failures: {},
  };
  private readonly release = (): void => {
    this.c.inFlight--;
  };
  /** Per-instance socket slot caching the ip key (instances may fold IPv6 differently). */
  private readonly ipKeySlot = Symbol('ratemesh.ipKey');
  private readonly respond: Responder<Req, Res>;
  private warnedStopped = false;
  private warnedProxy = false;

  constructor(options: RateMeshHttpOptions<Req, Res>, hooks: AdapterHooks<Req, Res>, allowNoRoutes = false) {
    this.config = parseOptions(options, allowNoRoutes);
    this.hooks = hooks;
    this.respond = new Responder(this.config, hooks, (err) => {
      this.c.handlerErrors++;
      this.log('warn', { err: errorInfo(err) }, 'message function threw; sent the default message');
    });
  }

  /** A snapshot of the outcome stats. */
  stats(): HttpStats {
    return { ...this.c, failures: { ...this.c.failures } };
  }

  /**
   * Runs the guard: returns true when the request should proceed, false when it
   * must not (a 429, or a 503 for overload or fail-closed, has been sent; or the
   * client left during a shaping delay). Never throws; a returned promise never rejects.
   * `route`, when given, is the rule to apply (null: none) instead of matching the URL.
   */
  handle(req: Req, res: Res, route?: CompiledRoute<Req> | null): boolean | Promise<boolean> {
    try {
      const r = this.run(req, res, route);
      return r === true || r === false
        ? r
        : r.then(undefined, (err: unknown) => this.internalError(req, res, err));
    } catch (err) {
      return this.internalError(req, res, err);
    }
  }

  /** A bug or a throwing hook (the paths below catch every user function): the default failure policy applies. */
  private internalError(req: Req, res: Res, err: unknown): boolean {
    try {
      return this.fail(req, res, undefined, new Failure('internal-error', err));
    } catch {
      return false;
    }
  }

  private run(req: Req, res: Res, pre: CompiledRoute<Req> | null | undefined): boolean | Promise<boolean> {
    const c = this.c;
    c.requests++;
    const cfg = this.config;
    if (cfg.maxInFlight > 0) {
      // First, before any user code or the limiter: the ceiling holds whatever else fails.
      if (c.inFlight >= cfg.maxInFlight) return this.overloaded(res);
      c.inFlight++;
      this.hooks.rawRes(res).once('close', this.release);
    }
    let route: CompiledRoute<Req> | null | undefined = pre;
    if (route === undefined) {
      try {
        route = this.match(req);
      } catch (err) {
        return this.fail(req, res, undefined, new Failure('key-error', err));
      }
    }
    if (route === undefined || route === null) {
      c.skipped++;
      return true;
    }
    if (route.skip !== undefined) {
      let skipped: MaybePromise<boolean>;
      try {
        skipped = route.skip(req);
      } catch (err) {
        return this.fail(req, res, route, new Failure('skip-error', err));
      }
      if (isThenable(skipped)) {
        const r = route;
        return skipped.then(
          (s) => (s ? this.skipped() : this.keysThenDecide(req, res, r)),
          (err: unknown) => this.fail(req, res, r, new Failure('skip-error', err)),
        );
      }
      if (skipped) return this.skipped();
    }
    return this.keysThenDecide(req, res, route);
  }

  private skipped(): true {
    this.c.skipped++;
    return true;
  }

  private match(req: Req): CompiledRoute<Req> | undefined {
    const routes = this.config.routes;
    if (routes.length === 1 && routes[0]!.label === '*') return routes[0];
    const raw = this.hooks.raw(req);
    const method = raw.method ?? 'GET';
    const path = normalizePath(this.hooks.url(req));
    let folded: string | undefined;
    for (const r of routes) {
      if (r.methods !== undefined && !r.methods.has(method)) continue;
      if (r.exact !== undefined || r.prefix !== undefined) {
        folded ??= foldCase(path);
        if (r.exact !== undefined && r.exact !== folded) continue;
        if (r.prefix !== undefined && !folded.startsWith(r.prefix) && folded !== r.prefix.slice(0, -1))
          continue;
      }
      if (r.regex !== undefined && !r.regex.test(path)) continue;
      return r;
    }
    return undefined;
  }

  /** The ip key of the request, or a Failure. */
  private ipKeyOf(req: Req): string | Failure {
    const cfg = this.config;
    const raw = this.hooks.raw(req);
    // Without trusted proxies the key is a function of the connection alone: computed
    // once per socket, so keep-alive requests skip parsing and folding the address.
    const socket = raw.socket as (Socket & Record<symbol, string | undefined>) | null;
    if (cfg.trustProxy === undefined && !this.warnedProxy) this.noticeForwarded(raw.headers, socket);
    if (cfg.trustProxy === undefined && socket !== null) {
      const cached = socket[this.ipKeySlot];
      if (cached !== undefined) return cached;
      const key = this.ipKeyFromAddress(socket.remoteAddress, undefined);
      if (typeof key === 'string') socket[this.ipKeySlot] = key;
      return key;
    }
    return this.ipKeyFromAddress(
      socket?.remoteAddress,
      cfg.trustProxy === undefined ? undefined : raw.headers[cfg.proxyHeader],
    );
  }

  /**
   * Forwarded headers on a request while no proxy is trusted: the server is most likely behind
   * an ingress or load balancer, and every client then shares the proxy's per-IP key. Said
   * once per instance (the headers are not believed, rightly: they are set by anyone).
   */
  private noticeForwarded(
    headers: Record<string, string | string[] | undefined>,
    socket: Socket | null,
  ): void {
    const name = FORWARDED_HEADERS.find((h) => headers[h] !== undefined);
    if (name === undefined) return;
    this.warnedProxy = true;
    this.log(
      'warn',
      { header: name, from: socket?.remoteAddress },
      `requests carry ${name} but trustProxy is off: every client behind that proxy shares one per-IP key (the proxy's address); set trustProxy to the proxy's CIDRs (and proxyHeader) if it is yours`,
    );
  }

  private ipKeyFromAddress(
    remoteAddress: string | undefined,
    header: string | string[] | undefined,
  ): string | Failure {
    const cfg = this.config;
    const ip = clientIp(remoteAddress, header, cfg.trustProxy, cfg.proxyHeader);
    if (
      ip === 'no-client-address' ||
      ip === 'forwarded-malformed' ||
      ip === 'forwarded-too-long' ||
      ip === 'forwarded-unknown'
    ) {
      return new Failure(ip);
    }
    try {
      return ipKey(ip, { ipv6Subnet: cfg.ipv6Subnet });
    } catch (err) {
      return new Failure('ip-invalid', err);
    }
  }

  private keysThenDecide(req: Req, res: Res, route: CompiledRoute<Req>): boolean | Promise<boolean> {
    if (route.ipOnly) {
      // One policy on the client address: no user function, no pair list to build.
      const ip = this.ipKeyOf(req);
      return ip instanceof Failure ? this.fail(req, res, route, ip) : this.decide(req, res, route, ip);
    }
    const keys = this.keysOf(req, route);
    if (keys instanceof Failure) return this.fail(req, res, route, keys);
    if (isThenable(keys)) {
      return keys.then(
        (k) => (k instanceof Failure ? this.fail(req, res, route, k) : this.decide(req, res, route, k)),
        (err: unknown) => this.fail(req, res, route, new Failure('key-error', err)),
      );
    }
    return this.decide(req, res, route, keys);
  }

  /**
   * (policy, key) pairs for the route. Sync unless a user function is async.
   * A binding whose key does not apply (anonymous request on an account policy) is left out.
   */
  private keysOf(
    req: Req,
    route: CompiledRoute<Req>,
  ): PolicyKey[] | Failure | Promise<PolicyKey[] | Failure> {
    const cfg = this.config;
    let ip: string | Failure | undefined;
    if (route.needsIp) {
      ip = this.ipKeyOf(req);
      if (ip instanceof Failure) return ip;
    }
    let custom: MaybePromise<string> | undefined;
    let acct: MaybePromise<string | undefined> | undefined;
    let endpoint: MaybePromise<string | undefined> | undefined;
    try {
      for (const b of route.bindings) {
        if (b.by === 'key' && cfg.keyGenerator !== undefined && custom === undefined)
          custom = cfg.keyGenerator(req);
        else if (b.by === 'account' || b.by === 'endpoint') {
          if (acct === undefined) acct = cfg.account!(req);
          if (b.by === 'endpoint' && endpoint === undefined) endpoint = cfg.endpoint!(req);
        }
      }
    } catch (err) {
      return new Failure('key-error', err);
    }
    if (isThenable(custom) || isThenable(acct) || isThenable(endpoint)) {
      return Promise.all([custom, acct, endpoint]).then(([k, a, e]) =>
        this.pairsOf(route, ip as string, k, a, e),
      );
    }
    return this.pairsOf(route, ip as string, custom, acct, endpoint);
  }

  /** The pairs, once every user-supplied part is known; validates them. */
  private pairsOf(
    route: CompiledRoute<Req>,
    ip: string | undefined,
    k: string | undefined,
    a: string | undefined,
    e: string | undefined,
  ): PolicyKey[] | Failure {
    try {
      const pairs: PolicyKey[] = [];
      const customKey = k === undefined ? undefined : validateKey(k);
      const acctKey = a === undefined ? undefined : accountKey(a);
      for (const b of route.bindings) {
        switch (b.by) {
          case 'ip':
            pairs.push([b.policy, ip!]);
            break;
          case 'key':
            if (this.config.keyGenerator === undefined) pairs.push([b.policy, ip!]);
            else if (customKey === undefined) throw new TypeError('keyGenerator returned no key');
            else pairs.push([b.policy, customKey]);
            break;
          case 'account':
            if (acctKey !== undefined) pairs.push([b.policy, acctKey]);
            break;
          case 'endpoint':
            if (a !== undefined && e !== undefined) pairs.push([b.policy, endpointKey(a, e)]);
            break;
        }
      }
      return pairs;
    } catch (err) {
      return new Failure('key-error', err);
    }
  }

  /** `pairs` is the (policy, key) list, or, for an `ipOnly` route, the one key of its one policy. */
  private decide(
    req: Req,
    res: Res,
    route: CompiledRoute<Req>,
    pairs: PolicyKey[] | string,
    given?: Decision & { outcomes?: KeyOutcome[] },
  ): boolean | Promise<boolean> {
    const c = this.c;
    if (pairs.length === 0) return this.skipped();
    const cfg = this.config;
    const limiter = cfg.limiter;
    let decision: Decision & { outcomes?: KeyOutcome[] };
    try {
      if (given !== undefined) decision = given;
      else {
        if (!limiter.ready) {
          // A mesh node that is stopping or stopped answers 503 whatever the failure mode: it
          // is not a fault to ride out but the end of this instance, which should be drained
          // (`shutdown()`), and forwarding would let every request through unlimited.
          const life = (limiter as { readonly lifecycle?: unknown }).lifecycle;
          if (life === 'stopping' || life === 'stopped') return this.stopped(res);
          return this.fail(req, res, route, new Failure('not-ready'));
        }
        // ---- owner placement (issue 27): keys owned on another node are asked of their owner;
        // the answer comes back into this method as `given` (dense keys stay synchronous)
        const asked =
          limiter.checkOrAsk === undefined
            ? undefined
            : limiter.checkOrAsk(typeof pairs === 'string' ? [[route.bindings[0]!.policy, pairs]] : pairs);
        if (asked instanceof Promise)
          return asked.then(
            (d) => this.decide(req, res, route, pairs, d),
            (err: unknown) => this.fail(req, res, route, new Failure('limiter-error', err)),
          );
        // ---- end of owner placement
        // One pair: the single-policy check, which skips building the multi-key outcome list.
        decision =
          asked ??
          (typeof pairs === 'string'
            ? limiter.check(route.bindings[0]!.policy, pairs)
            : pairs.length === 1
              ? limiter.check(pairs[0]![0], pairs[0]![1])
              : limiter.checkAll(pairs));
      }
    } catch (err) {
      return this.fail(req, res, route, new Failure('limiter-error', err));
    }
    const denied = !decision.allowed;
    // Retry-After for a denial; undefined when no wait helps (cost above the limit).
    const retryAfter =
      denied && decision.retryAfterMs >= 0 ? retryAfterSeconds(decision.retryAfterMs) : undefined;
    if (cfg.standardHeaders !== false || cfg.legacyHeaders)
      this.respond.headers(res, route, decision, retryAfter);
    if (denied) {
      c.limited++;
      return this.deny(req, res, withOutcomes(decision, route), retryAfter);
    }
    if (decision.limited || decision.outcomes?.some((o) => o.limited)) {
      c.shadowLimited++;
      this.log(
        'info',
        { route: route.label, policy: decision.policy, rule: decision.rule },
        'shadow policy would have denied this request',
      );
    }
    c.allowed++;
    if (decision.delayMs > 0) {
      // leaky-bucket shaping: hold the request (and its concurrency slot) for the scheduled delay.
      const raw = this.hooks.rawRes(res);
      return new Promise<boolean>((resolve) => {
        // A client gone while it waited is not served.
        setTimeout(() => resolve(!raw.destroyed && !raw.writableEnded), decision.delayMs);
      });
    }
    return true;
  }

  private deny(
    req: Req,
    res: Res,
    d: Decision & { outcomes: KeyOutcome[] },
    retryAfter: number | undefined,
  ): false | Promise<false> {
    const cfg = this.config;
    const violated: string[] = [];
    for (const o of d.outcomes)
      if (o.limited && !o.shadow && !violated.includes(o.policy)) violated.push(o.policy);
    if (violated.length === 0) violated.push(d.policy);
    const info: LimitInfo = {
      statusCode: cfg.statusCode,
      retryAfter,
      policy: d.policy,
      violatedPolicies: violated,
      decision: d,
    };
    if (cfg.handler === undefined) {
      this.respond.denial(req, res, info);
      return false;
    }
    let out: MaybePromise<void>;
    try {
      out = cfg.handler(req, res, info);
    } catch (err) {
      this.handlerFailed(req, res, info, err);
      return false;
    }
    if (isThenable(out)) {
      return out.then(
        () => false as const,
        (err: unknown) => {
          this.handlerFailed(req, res, info, err);
          return false as const;
        },
      );
    }
    return false;
  }

  private handlerFailed(req: Req, res: Res, info: LimitInfo, err: unknown): void {
    this.c.handlerErrors++;
    this.log('warn', { err: errorInfo(err) }, 'denial handler threw; sent the default denial');
    this.respond.denial(req, res, info);
  }

  /** Logs through the configured logger; a logger that throws is ignored. */
  private log(level: 'warn' | 'info', obj: Record<string, unknown>, msg: string): void {
    const logger = this.config.logger;
    if (logger === undefined) return;
    try {
      if (level === 'warn') logger.warn(obj, msg);
      else logger.info?.(obj, msg);
    } catch {
      // Logging must not change the outcome.
    }
  }

  private overloaded(res: Res): false {
    this.c.overloaded++;
    this.respond.unavailable(
      res,
      this.config.overloadRetryAfter,
      'over_capacity',
      'Too many requests in flight; retry shortly.',
    );
    return false;
  }

  /** A request after the limiter was stopped: 503, counted, logged once per instance. */
  private stopped(res: Res): boolean {
    const c = this.c;
    c.failures.stopped = (c.failures.stopped ?? 0) + 1;
    c.failClosed++;
    if (!this.warnedStopped) {
      this.warnedStopped = true;
      this.log(
        'warn',
        { reason: 'stopped' },
        'a request arrived after the mesh node stopped: answering 503 (stop the server first: mesh.shutdown({ servers }))',
      );
    }
    try {
      this.respond.unavailable(
        res,
        this.config.failureRetryAfter,
        'rate_limiter_stopped',
        'This instance is shutting down; retry.',
      );
    } catch {
      // The response is already broken; nothing more can be sent.
    }
    return false;
  }

  /** The route's failure policy for an undecidable request; logs why. */
  private fail(_req: Req, res: Res, route: CompiledRoute<Req> | undefined, f: Failure): boolean {
    const c = this.c;
    c.failures[f.reason] = (c.failures[f.reason] ?? 0) + 1;
    const mode: FailureMode = route?.failureMode ?? this.config.failureMode;
    this.log(
      'warn',
      {
        reason: f.reason,
        route: route?.label,
        failureMode: mode,
        ...(f.error === undefined ? {} : { err: errorInfo(f.error) }),
      },
      mode === 'open' ? 'could not decide; failing open' : 'could not decide; failing closed',
    );
    if (mode === 'open') {
      c.failOpen++;
      return true;
    }
    c.failClosed++;
    try {
      this.respond.unavailable(
        res,
        this.config.failureRetryAfter,
        'rate_limiter_unavailable',
        'The rate limiter could not decide.',
      );
    } catch {
      // The response is already broken; nothing more can be sent.
    }
    return false;
  }
}
