import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { systemClock } from '../clock.js';
import { ErrorCodes, errorInfo, isRateMeshError, RateMeshError } from '../errors.js';
import { retryAfterSeconds } from '../http/headers.js';
import { JOIN_TIMEOUT_MS, JoinWatch, STARTING_REASON } from '../mesh/join.js';
import type { Logger, MeshLimiter } from '../mesh/types.js';
import type { Decision, KeyOutcome } from '../types.js';
import { fieldPath, isPlainObject, jsonDepth, shown } from '../validate.js';
import type { HotKeys } from './hot-keys.js';
import { type DaemonMetrics, engineStatsOf, fallbackActive, type RouteLabel, viewAgeMs } from './metrics.js';
import {
  type CheckRequest,
  checkContentType,
  HttpError,
  HttpErrorCodes,
  inRequest,
  parseCheck,
  readBody,
} from './request.js';

export { HttpErrorCodes, MAX_KEYS_PER_CHECK, parseCheck } from './request.js';

/** Most checks one `POST /v1/check/batch` may carry (the body size cap also applies). */
export const MAX_BATCH = 1000;
/**
 * Body cap of `POST /v1/check/batch`: room for MAX_BATCH checks of ~600 bytes (a 512-byte key,
 * a 64-character policy name, the JSON around them), and never less than `http.maxBodyBytes`,
 * so the "1..1000" limit is what a client meets, not a 413 at a few hundred checks.
 */
export const BATCH_BODY_BYTES = 640 * 1024;
/** Deepest nesting a request body may have (a batch of `checks` lists is 5 levels). */
export const MAX_JSON_DEPTH = 16;
/** How often the server looks for connections past their header or request timeout (Node's default: 30 s). */
export const TIMEOUT_CHECK_MS = 500;
/** Most rows `GET /v1/stats?top=N` returns. */
export const MAX_TOP = 1000;

/** What the check server needs. */
export interface CheckServerDeps {
  limiter: MeshLimiter;
  metrics: DaemonMetrics;
  hotKeys: HotKeys;
  logger: Logger;
  maxBodyBytes: number;
  /** 408 and close when a client's headers take longer than this, ms. */
  headersTimeoutMs: number;
  /** 408 and close when a client's whole request takes longer than this, ms. */
  requestTimeoutMs: number;
  /** True when no bootstrap peers are configured: a lone node's own view is complete. */
  standalone: boolean;
  /**
   * How long `/readyz` waits at start for the mesh's first sync answer while discovery finds
   * other members, ms; then it answers 200 in the L/N fallback all the same (members found
   * but none answering). Default {@link JOIN_TIMEOUT_MS}.
   */
  joinTimeoutMs?: number;
  /** The body of `GET /v1/limits` (the limits in force); 404 when absent. */
  limits?: () => object;
}

/** Shared with the daemon: set while draining, so health turns 503 and connections close. */
export interface ServerState {
  draining: boolean;
  /**
   * Has the node joined the mesh it was pointed at (src/mesh/join.ts, the rule an embedded
   * node's `health().ready` follows too)? Its wait began when the server was made
   * (performance.now()).
   */
  join: JoinWatch;
}

export { JOIN_TIMEOUT_MS };

/** The JSON body of an error response. */
export interface ErrorBody {
  error: { code: string; message: string; field?: string };
}

const ROUTES: Record<string, { methods: readonly string[]; label: RouteLabel }> = {
  '/v1/check': { methods: ['POST'], label: '/v1/check' },
  '/v1/check/batch': { methods: ['POST'], label: '/v1/check/batch' },
  '/v1/peers': { methods: ['GET', 'HEAD'], label: '/v1/peers' },
  '/v1/stats': { methods: ['GET', 'HEAD'], label: '/v1/stats' },
  '/healthz': { methods: ['GET', 'HEAD'], label: '/healthz' },
  '/livez': { methods: ['GET', 'HEAD'], label: '/livez' },
  '/readyz': { methods: ['GET', 'HEAD'], label: '/readyz' },
  '/metrics': { methods: ['GET', 'HEAD'], label: '/metrics' },
  '/v1/limits': { methods: ['GET', 'HEAD'], label: '/v1/limits' },
  '/v1/explain': { methods: ['GET'], label: '/v1/explain' },
};

/**
 * The daemon's HTTP API on node:http. Every input is untrusted: bodies are
 * capped, content types checked, JSON validated field by field; a bad request
 * gets a 4xx with `{ error: { code, message, field } }` and changes nothing.
 * Nothing a client sends can crash the process.
 *
 * - `POST /v1/check` — `{ "policy": "api", "key": "ip:1.2.3.4" | "keys": [...], "cost": 1 }`
 *   or `{ "checks": [{ "policy": "api", "key": "..." }, ...], "cost": 1 }`.
 *   Answers the {@link Decision} as JSON (plus `outcomes` for `checks`):
 *   **200 when `allowed`, 429 when not** (with `Retry-After` in seconds when a
 *   retry can succeed), so a proxy can act on the status alone. Shadow-mode
 *   decisions are allowed, so 200 with `limited: true`.
 * - `POST /v1/check/batch` — `{ "requests": [<a /v1/check body>, ...] }` (1..1000):
 *   each decided in order, as if sent one by one, in one round trip. Answers
 *   200 with `{ "decisions": [...] }`, one per request in order: the decision
 *   plus its `status` (200 or 429) and `retryAfter`, or for a request that is
 *   invalid `{ "status": 400, "error": {...} }` naming the field
 *   (`body.requests[3].cost`); the others are decided all the same.
 * - `GET /v1/peers`, `GET /v1/stats[?top=N]`, `GET /healthz`, `GET /livez`, `GET /readyz`, `GET /metrics`.
 * - `GET /v1/limits`: the limits in force (policies with their versions, Envoy
 *   domains and descriptors when loaded, the last config reload).
 */
export function createCheckServer(deps: CheckServerDeps): { server: Server; state: ServerState } {
  const state: ServerState = {
    draining: false,
    join: new JoinWatch(deps.standalone, deps.joinTimeoutMs ?? JOIN_TIMEOUT_MS, performance.now()),
  };
  const server = createServer({ connectionsCheckingInterval: TIMEOUT_CHECK_MS }, (req, res) => {
    handle(deps, state, req, res).catch((err: unknown) => {
      deps.logger.error({ err: errorInfo(err, true) }, 'request handler failed');
      if (!res.headersSent) {
        send(res, 500, { error: { code: HttpErrorCodes.INTERNAL, message: 'internal error' } }, state);
      } else {
        res.destroy();
      }
    });
  });
  // Slow or stuck clients cannot hold sockets for long.
  // Node looks for connections past these every TIMEOUT_CHECK_MS (30 s by default, which let
  // idle and slow-header sockets live 30 s whatever the timeouts said).
  server.headersTimeout = deps.headersTimeoutMs;
  server.requestTimeout = deps.requestTimeoutMs;
  server.keepAliveTimeout = Math.min(5_000, deps.headersTimeoutMs);
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    // A client too slow with its headers or its request gets 408 (RFC 9110 15.5.9); headers too
    // large 431; anything else the parser refuses 400. The connection closes in every case.
    const [status, text, code, message] =
      err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'ERR_REQUEST_TIMEOUT', 'request not received in time']
        : err.code === 'HPE_HEADER_OVERFLOW'
          ? [431, 'Request Header Fields Too Large', 'ERR_HEADERS_TOO_LARGE', 'request headers too large']
          : [400, 'Bad Request', 'ERR_BAD_REQUEST', 'malformed HTTP request'];
    const body = JSON.stringify({ error: { code, message } });
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  return { server, state };
}

async function handle(
  deps: CheckServerDeps,
  state: ServerState,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const { path, query } = splitUrl(req.url ?? '/');
  const route = ROUTES[path];
  const method = req.method ?? 'GET';
  const label: RouteLabel = route?.label ?? 'other';
  let status = 500;
  try {
    if (route === undefined) {
      throw new HttpError(404, HttpErrorCodes.NOT_FOUND, `no such endpoint: ${shown(path)}`);
    }
    if (!route.methods.includes(method)) {
      throw new HttpError(
        405,
        HttpErrorCodes.METHOD_NOT_ALLOWED,
        `${method} is not allowed on ${path}; use ${route.methods.join(' or ')}`,
        undefined,
        { allow: route.methods.join(', ') },
      );
    }
    switch (path) {
      case '/v1/check':
        status = await check(deps, state, req, res);
        break;
      case '/v1/check/batch':
        status = await checkBatch(deps, state, req, res);
        break;
      case '/v1/peers':
        status = send(res, 200, peersBody(deps.limiter), state);
        break;
      case '/v1/stats':
        status = send(res, 200, statsBody(deps, query), state);
        break;
      case '/v1/limits':
        if (deps.limits === undefined)
          throw new HttpError(404, HttpErrorCodes.NOT_FOUND, 'no such endpoint: /v1/limits');
        status = send(res, 200, deps.limits(), state);
        break;
      case '/v1/explain':
        status = send(res, 200, explainBody(deps, query), state);
        break;
      case '/healthz': {
        const h = health(deps, state);
        status = send(res, h.ok ? 200 : 503, h.body, state);
        break;
      }
      case '/livez': {
        const h = liveness(deps, state);
        status = send(res, h.ok ? 200 : 503, h.body, state);
        break;
      }
      case '/readyz': {
        const h = readiness(deps, state);
        status = send(res, h.ok ? 200 : 503, h.body, state);
        break;
      }
      case '/metrics': {
        const { body, contentType } = await deps.metrics.expose();
        status = 200;
        res.writeHead(200, { 'content-type': contentType, ...closeHeader(state) });
        res.end(body);
        break;
      }
    }
  } catch (err) {
    // Discard any body not read (415, 404, 405...) so the reply is not cut off by a reset.
    if (!req.readableEnded) req.resume();
    status = sendError(deps, state, res, err);
  } finally {
    deps.metrics.request(label, status);
  }
}

/** Checks the content type, reads the body within the cap and parses it as JSON. */
async function readJson(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  checkContentType(req.headers['content-type']);
  const raw = await readBody(req, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new RateMeshError(
      ErrorCodes.REQUEST_INVALID,
      `malformed JSON: ${err instanceof Error ? err.message : String(err)}`,
      'body',
    );
  }
  if (jsonDepth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    throw new RateMeshError(
      ErrorCodes.REQUEST_INVALID,
      `nested deeper than ${MAX_JSON_DEPTH} levels`,
      'body',
    );
  return value;
}

/** Reads, validates and decides one `POST /v1/check`; returns the status sent. */
async function check(
  deps: CheckServerDeps,
  state: ServerState,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<number> {
  const d = await decide(deps, parseCheck(await readJson(req, deps.maxBodyBytes)));
  const headers: Record<string, string> = {};
  if (d.retryAfter !== undefined) headers['retry-after'] = String(d.retryAfter);
  return send(res, d.status, d.body, state, headers);
}

/** Reads, validates and decides a `POST /v1/check/batch`; always 200 with one entry per request. */
async function checkBatch(
  deps: CheckServerDeps,
  state: ServerState,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<number> {
  const body = await readJson(req, Math.max(deps.maxBodyBytes, BATCH_BODY_BYTES));
  if (!isPlainObject(body)) {
    throw new RateMeshError(ErrorCodes.REQUEST_INVALID, `must be a JSON object (got ${shown(body)})`, 'body');
  }
  for (const k of Object.keys(body)) {
    if (k !== 'requests')
      throw new RateMeshError(
        ErrorCodes.REQUEST_INVALID,
        'unknown field (expected requests)',
        fieldPath('body', k),
      );
  }
  const list = body.requests;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_BATCH) {
    throw new RateMeshError(
      ErrorCodes.REQUEST_INVALID,
      `must be a list of 1..${MAX_BATCH} check requests (got ${shown(list)})`,
      'body.requests',
    );
  }
  const decisions: object[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    try {
      const d = await decide(deps, parseCheck(list[i], `body.requests[${i}]`));
      decisions[i] = {
        status: d.status,
        ...(d.retryAfter === undefined ? {} : { retryAfter: d.retryAfter }),
        ...d.body,
      };
    } catch (err) {
      // A bad request in the batch is answered in place; the others are decided all the same.
      if (!isRateMeshError(err) || !(err.code === ErrorCodes.NOT_STARTED || STATUS_400.has(err.code)))
        throw err;
      deps.metrics.checkError(err.code);
      const message = err.reason;
      const prefix = `body.requests[${i}]`;
      const field =
        err.field === undefined || err.field.startsWith(prefix) ? err.field : `${prefix}.${err.field}`;
      decisions[i] = {
        status: err.code === ErrorCodes.NOT_STARTED ? 503 : 400,
        ...errorBody(err.code, message, field),
      };
    }
  }
  return send(res, 200, { decisions }, state);
}

/** One decision: the limiter's answer, counted in the metrics and hot keys, as a status and a JSON body. */
async function decide(
  deps: CheckServerDeps,
  request: CheckRequest,
): Promise<{ status: number; body: object; retryAfter: number | undefined }> {
  const started = performance.now();
  let decision: Decision & { outcomes?: KeyOutcome[] };
  try {
    // owner placement (issue 27): keys owned on another node are asked of their owner
    const limiter = deps.limiter;
    if (limiter.checkOrAsk !== undefined) {
      const pairs: readonly (readonly [string, string])[] =
        request.kind === 'one' ? request.keys.map((k) => [request.policy, k] as const) : request.pairs;
      const asked = limiter.checkOrAsk(pairs, request.cost);
      decision = asked instanceof Promise ? await asked : asked;
    } else if (request.kind === 'one') {
      decision = limiter.check(request.policy, request.keys, request.cost);
    } else {
      decision = limiter.checkAll(request.pairs, request.cost);
    }
  } catch (err) {
    throw inRequest(err, request);
  }
  const seconds = (performance.now() - started) / 1000;

  const result = !decision.limited ? 'allowed' : decision.allowed ? 'shadow' : 'limited';
  deps.metrics.decision(decision.policy, result, decision.mode, seconds, decision.rule);
  if (decision.allowed) {
    const cost = request.cost ?? 1;
    if (request.kind === 'one') for (const k of request.keys) deps.hotKeys.add(request.policy, k, cost);
    else for (const [p, k] of request.pairs) deps.hotKeys.add(p, k, cost);
  }

  const retryAfter =
    !decision.allowed && decision.retryAfterMs >= 0 ? retryAfterSeconds(decision.retryAfterMs) : undefined;
  // decidedAt: this node's time of the decision (epoch ms, to the µs, on the clock the engine
  // decides by: Date.now() could be a few ms apart, enough to put a burst of decisions on the
  // wrong side of a window edge), so load drivers can place admissions in time when replies lag.
  return {
    status: decision.allowed ? 200 : 429,
    body: { ...decision, decidedAt: Math.round(systemClock.now() * 1000) / 1000 },
    retryAfter,
  };
}

function peersBody(limiter: MeshLimiter) {
  const peers = limiter.peers();
  return {
    peerId: limiter.peerId,
    multiaddrs: limiter.multiaddrs(),
    live: peers.filter((p) => !p.stale).length,
    stale: peers.filter((p) => p.stale).length,
    fallback: fallbackActive(limiter),
    peers,
  };
}

function statsBody(deps: CheckServerDeps, query: URLSearchParams) {
  const topText = query.get('top');
  let top = 20;
  if (topText !== null) {
    top = Number(topText);
    if (!/^\d{1,4}$/.test(topText) || top < 1 || top > MAX_TOP) {
      throw new RateMeshError(
        ErrorCodes.REQUEST_INVALID,
        `must be an integer 1..${MAX_TOP} (got ${shown(topText)})`,
        'query.top',
      );
    }
  }
  return {
    peerId: deps.limiter.peerId,
    /** Admitted through this daemon, per (policy, key); rates are per second, decayed with a 10 s half-life. */
    hotKeys: deps.hotKeys.top(top),
    mesh: deps.limiter.stats(),
  };
}

/**
 * `GET /v1/explain?policy=&key=&cost=`: every term of the decision a check would make now on this
 * node, changing nothing (the engine's explain). Policy and key are required; cost defaults to 1.
 */
function explainBody(deps: CheckServerDeps, query: URLSearchParams) {
  const policy = query.get('policy');
  const key = query.get('key');
  if (policy === null || policy === '')
    throw new RateMeshError(ErrorCodes.REQUEST_INVALID, 'is required', 'query.policy');
  if (key === null || key === '')
    throw new RateMeshError(ErrorCodes.REQUEST_INVALID, 'is required', 'query.key');
  const costText = query.get('cost');
  let cost = 1;
  if (costText !== null) {
    cost = Number(costText);
    if (!/^\d{1,10}$/.test(costText))
      throw new RateMeshError(
        ErrorCodes.REQUEST_INVALID,
        `must be a positive integer (got ${shown(costText)})`,
        'query.cost',
      );
  }
  return deps.limiter.explain(policy, key, cost);
}

/**
 * `/livez`, the liveness probe: is the process able to decide at all? 200 while the limiter
 * runs, whatever its view of the mesh (a partition is no reason to restart), and while
 * draining (a terminating pod is not restarted); 503 only once the limiter has stopped
 * outside a drain (a restart is what helps then).
 */
function liveness(deps: CheckServerDeps, state: ServerState): { ok: boolean; body: object } {
  const ok = state.draining || deps.limiter.ready;
  return ok
    ? { ok, body: { status: 'ok', draining: state.draining } }
    : { ok, body: { status: 'unavailable', reason: 'limiter stopped', draining: false } };
}

/**
 * `/readyz`, the readiness probe: can this node decide now? 200 when the limiter runs and
 * the node has joined the mesh (see {@link JoinWatch}: at once alone and for the first pod of a
 * Service, after the first sync answer for the pods that join others), in the L/N fallback
 * too (every peer stale: a partition); 503 while draining (SIGTERM: readiness fails first),
 * before the limiter runs and while joining. The mesh view is in the body, for people.
 */
function readiness(deps: CheckServerDeps, state: ServerState): { ok: boolean; body: object } {
  const peers = deps.limiter.peers();
  const live = peers.filter((p) => !p.stale).length;
  const view = {
    draining: state.draining,
    peers: { live, stale: peers.length - live },
    fallback: fallbackActive(deps.limiter),
  };
  let reason: string | undefined;
  if (state.draining) reason = 'draining: shutting down';
  else if (!deps.limiter.ready) reason = 'limiter not started';
  else if (!state.join.joined(performance.now(), () => deps.limiter.stats()))
    reason = 'joining: other members found, waiting for the first sync answer from one of them';
  else if (engineStatsOf(deps.limiter)?.starting === true) reason = STARTING_REASON;
  return reason === undefined
    ? { ok: true, body: { status: 'ok', ...view } }
    : { ok: false, body: { status: 'unavailable', reason, ...view } };
}

/**
 * `/healthz`, the mesh view (for monitoring, not a probe: it fails during a partition and on
 * the first pod): 200 when the limiter is ready and has a view of the mesh (or runs alone);
 * 503 with the reason otherwise.
 */
function health(deps: CheckServerDeps, state: ServerState): { ok: boolean; body: object } {
  const peers = deps.limiter.peers();
  const live = peers.filter((p) => !p.stale).length;
  const view = {
    ready: deps.limiter.ready,
    draining: state.draining,
    standalone: deps.standalone,
    peers: { live, stale: peers.length - live },
    fallback: fallbackActive(deps.limiter),
    viewAgeMs: viewAgeMs(peers),
  };
  let reason: string | undefined;
  if (state.draining) reason = 'draining: shutting down';
  else if (!deps.limiter.ready) reason = 'limiter not started';
  else if (!deps.standalone && live === 0) {
    reason =
      peers.length === 0
        ? 'no peers yet: bootstrap peers configured but none heard from'
        : 'no live peers: every peer is stale (enforcing the L/N fallback)';
  }
  return reason === undefined
    ? { ok: true, body: { status: 'ok', ...view } }
    : { ok: false, body: { status: 'unavailable', reason, ...view } };
}

function sendError(deps: CheckServerDeps, state: ServerState, res: ServerResponse, err: unknown): number {
  let status: number;
  let body: ErrorBody;
  let headers: Record<string, string> = {};
  if (err instanceof HttpError) {
    status = err.status;
    body = errorBody(err.code, err.message, err.field);
    headers = err.headers;
    // After refusing a body we did not read, the connection cannot be reused.
    if (status === 413 || status === 415) headers.connection = 'close';
  } else if (isRateMeshError(err)) {
    status = err.code === ErrorCodes.NOT_STARTED ? 503 : STATUS_400.has(err.code) ? 400 : 500;
    body = errorBody(err.code, err.reason, err.field);
    deps.metrics.checkError(err.code);
  } else {
    status = 500;
    body = errorBody(HttpErrorCodes.INTERNAL, 'internal error');
  }
  if (status >= 500) deps.logger.error({ err: errorInfo(err, true), status }, 'request failed');
  else deps.logger.debug({ code: body.error.code, field: body.error.field, status }, 'request refused');
  if (res.headersSent) {
    res.destroy();
    return status;
  }
  return send(res, status, body, state, headers);
}

const STATUS_400 = new Set<string>([
  ErrorCodes.REQUEST_INVALID,
  ErrorCodes.POLICY_UNKNOWN,
  ErrorCodes.KEY_INVALID,
  ErrorCodes.COST_INVALID,
  ErrorCodes.IP_INVALID,
]);

function errorBody(code: string, message: string, field?: string): ErrorBody {
  const m = printable(message);
  return {
    error: field === undefined ? { code, message: m } : { code, message: m, field: printable(field) },
  };
}

/**
 * Control characters escaped (`\u001b`), never raw: an error message or field may quote what a
 * client sent, and is read on terminals and in logs. The limiter quotes values already; this
 * holds for any message whatever its source.
 */
function printable(s: string): string {
  return s.replace(
    /[\u0000-\u001f\u007f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

function closeHeader(state: ServerState): Record<string, string> {
  return state.draining ? { connection: 'close' } : {};
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  state: ServerState,
  headers: Record<string, string> = {},
): number {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...closeHeader(state),
    ...headers,
  });
  res.end(text);
  return status;
}

function splitUrl(url: string): { path: string; query: URLSearchParams } {
  try {
    const u = new URL(url, 'http://localhost');
    return { path: u.pathname, query: u.searchParams };
  } catch {
    return { path: url.slice(0, 100), query: new URLSearchParams() };
  }
}
