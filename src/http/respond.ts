import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Decision, KeyOutcome } from '../types.js';
import {
  type HeaderMember,
  limitMemberQuoted,
  partitionKey,
  type SetHeader,
  seconds,
  setLegacyHeaders,
  setRetryAfter,
  setStandardHeaders,
} from './headers.js';
import type { CompiledRoute, HttpConfig, LimitInfo } from './options.js';

/** What an adapter tells the core about its framework. */
export interface AdapterHooks<Req, Res> {
  raw(req: Req): IncomingMessage;
  rawRes(res: Res): ServerResponse;
  /** The path rules match against (query included is fine: it is cut off). */
  url(req: Req): string | undefined;
  setHeader(res: Res, name: string, value: string): void;
  /** Sends a complete response (the adapter's own way, so the framework knows). */
  send(res: Res, status: number, contentType: string, body: string): void;
}

const PROBLEM_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
const DEFAULT_MESSAGE = 'Too many requests, please try again later.';

/**
 * What the HTTP layer answers: the RateLimit headers of every decision, the denial body, and
 * the 503s of overload and fail-closed. One per guard, middleware or plugin instance; the
 * common case (one policy, default headers, fixed message) allocates nothing per request.
 */
export class Responder<Req, Res> {
  /** The response headers are written to; set just before the (synchronous) header writers run. */
  private headerTarget: Res | undefined;
  private readonly set: SetHeader = (name, value) => this.hooks.setHeader(this.headerTarget!, name, value);
  /** `{"error":..,"message":..,` of the default body, serialised once. */
  private readonly messageJson: string;

  /** @param messageFailed told when a `message` function throws (the default message is sent). */
  constructor(
    private readonly config: HttpConfig<Req, Res>,
    private readonly hooks: AdapterHooks<Req, Res>,
    private readonly messageFailed: (err: unknown) => void,
  ) {
    const message = typeof config.message === 'string' ? config.message : DEFAULT_MESSAGE;
    this.messageJson = `{"error":"too_many_requests","message":${JSON.stringify(message)},`;
  }

  /** The RateLimit (and legacy, and Retry-After) headers of a decision. */
  headers(
    res: Res,
    route: CompiledRoute<Req>,
    decision: Decision & { outcomes?: KeyOutcome[] },
    retryAfter: number | undefined,
  ): void {
    const cfg = this.config;
    if (
      decision.outcomes === undefined &&
      cfg.standardHeaders === 'draft-11' &&
      !cfg.legacyHeaders &&
      !cfg.partitionKey &&
      !decision.shadow &&
      route.bindings.length === 1
    ) {
      // The common case (one policy, default headers), without the general path's allocations.
      const t = retryAfter ?? seconds(decision.resetMs);
      this.hooks.setHeader(res, 'RateLimit-Policy', route.policyHeader);
      this.hooks.setHeader(
        res,
        'RateLimit',
        limitMemberQuoted(route.quotedNames[0]!, decision.limited ? 0 : decision.remaining, t),
      );
      if (retryAfter !== undefined) this.hooks.setHeader(res, 'Retry-After', String(retryAfter));
      return;
    }
    const d = withOutcomes(decision, route);
    this.headerTarget = res;
    const set = this.set;
    const members: HeaderMember[] = [];
    let main: HeaderMember | undefined;
    let mainKey = d.key;
    for (const o of d.outcomes) {
      // Shadow policies are dark-launched: clients see nothing of them.
      if (o.shadow) continue;
      const deciding = o.policy === d.policy && o.key === d.key;
      const m: HeaderMember = {
        policy: o.policy,
        limit: o.limit,
        windowMs: o.windowMs,
        remaining: o.limited ? 0 : o.remaining,
        // On a denial the deciding policy's `t` is the Retry-After point (draft-8 §5; draft-11 §6).
        resetSeconds: deciding && retryAfter !== undefined ? retryAfter : seconds(o.resetMs),
        pk: cfg.partitionKey ? partitionKey(o.key) : undefined,
      };
      members.push(m);
      if (deciding || main === undefined) {
        main = m;
        mainKey = o.key;
      }
    }
    if (main !== undefined) {
      if (cfg.standardHeaders !== false) {
        const fixed =
          !cfg.partitionKey && members.length === route.bindings.length ? route.policyHeader : undefined;
        setStandardHeaders(set, cfg.standardHeaders, members, main, mainKey, fixed);
      }
      if (cfg.legacyHeaders) setLegacyHeaders(set, main, cfg.clock.now());
    }
    if (retryAfter !== undefined) setRetryAfter(set, retryAfter);
  }

  /** The default denial response (the configured message, JSON or problem+json). */
  denial(req: Req, res: Res, info: LimitInfo): void {
    const cfg = this.config;
    if (this.hooks.rawRes(res).headersSent) {
      this.hooks.rawRes(res).end();
      return;
    }
    const type = cfg.problemJson ? 'application/problem+json' : 'application/json; charset=utf-8';
    if (typeof cfg.message !== 'function' && typeof cfg.message !== 'object' && !cfg.problemJson) {
      // The default shape with a fixed message: no object to build and stringify per denial.
      const retry = info.retryAfter === undefined ? '' : `,"retryAfter":${info.retryAfter}`;
      const body = `${this.messageJson}"policy":${JSON.stringify(info.policy)}${retry}}`;
      this.hooks.send(res, info.statusCode, type, body);
      return;
    }
    let m: string | Readonly<Record<string, unknown>> = DEFAULT_MESSAGE;
    try {
      if (typeof cfg.message === 'function') m = cfg.message(req, info);
      else if (cfg.message !== undefined) m = cfg.message;
    } catch (err) {
      this.messageFailed(err);
    }
    let body: string;
    if (cfg.problemJson) {
      const detail = typeof m === 'string' ? { detail: m } : m;
      body = JSON.stringify({
        type: PROBLEM_TYPE,
        title: 'Request cannot be satisfied as assigned quota has been exceeded',
        status: info.statusCode,
        ...detail,
        'violated-policies': info.violatedPolicies,
        ...(info.retryAfter === undefined ? {} : { 'retry-after': info.retryAfter }),
      });
    } else {
      body =
        typeof m === 'string'
          ? JSON.stringify({
              error: 'too_many_requests',
              message: m,
              policy: info.policy,
              ...(info.retryAfter === undefined ? {} : { retryAfter: info.retryAfter }),
            })
          : JSON.stringify(m);
    }
    this.hooks.send(res, info.statusCode, type, body);
  }

  /** A 503 with Retry-After, unless a response is already under way. */
  unavailable(res: Res, retryAfter: number, error: string, message: string): void {
    if (this.hooks.rawRes(res).headersSent) return;
    this.hooks.setHeader(res, 'Retry-After', String(retryAfter));
    this.hooks.send(res, 503, 'application/json; charset=utf-8', JSON.stringify({ error, message }));
  }
}

/** The decision with its outcome list; a single-pair check gets its one outcome built here. */
export function withOutcomes<Req>(
  d: Decision & { outcomes?: KeyOutcome[] },
  route: CompiledRoute<Req>,
): Decision & { outcomes: KeyOutcome[] } {
  if (d.outcomes !== undefined) return d as Decision & { outcomes: KeyOutcome[] };
  let windowMs = 0;
  for (let i = 0; i < route.bindings.length; i++) {
    if (route.bindings[i]!.policy === d.policy) windowMs = route.windowMs[i]!;
  }
  // Field by field rather than a spread: this runs on every denial.
  return {
    allowed: d.allowed,
    limited: d.limited,
    policy: d.policy,
    key: d.key,
    rule: d.rule,
    mode: d.mode,
    limit: d.limit,
    remaining: d.remaining,
    retryAfterMs: d.retryAfterMs,
    resetMs: d.resetMs,
    delayMs: d.delayMs,
    shadow: d.shadow,
    outcomes: [
      {
        policy: d.policy,
        key: d.key,
        limit: d.limit,
        windowMs,
        remaining: d.remaining,
        resetMs: d.resetMs,
        retryAfterMs: d.limited ? d.retryAfterMs : 0,
        limited: d.limited,
        shadow: d.shadow,
      },
    ],
  };
}
