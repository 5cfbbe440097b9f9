/**
 * node:http adapter: a guard to call first in a request listener.
 *
 * ```ts
 * const guard = rateMeshGuard({ limiter, policies: ['per-ip'] });
 * http.createServer(async (req, res) => {
 *   if (!(await guard(req, res))) return; // 429 or 503 already sent
 *   res.end('hello');
 * });
 * ```
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type AdapterHooks, type HttpStats, RateMeshCore } from './core.js';
import type { RateMeshHttpOptions } from './options.js';

/**
 * Returns true when the request may proceed; false when it must not (a 429 or 503 was
 * sent, or the client left while a shaping delay held it). Never throws or rejects.
 */
export interface NodeGuard {
  (req: IncomingMessage, res: ServerResponse): boolean | Promise<boolean>;
  /** A snapshot of the outcome stats. */
  stats(): HttpStats;
}

/** Writes a whole response on a raw ServerResponse. */
export function sendRaw(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

export const nodeHooks: AdapterHooks<IncomingMessage, ServerResponse> = {
  raw: (req) => req,
  rawRes: (res) => res,
  url: (req) => req.url,
  setHeader: (res, name, value) => {
    res.setHeader(name, value);
  },
  send: sendRaw,
};

/** Builds a node:http guard; options are validated here (RateMeshError CONFIG_INVALID naming the field). */
export function rateMeshGuard(options: RateMeshHttpOptions<IncomingMessage, ServerResponse>): NodeGuard {
  const core = new RateMeshCore(options, nodeHooks);
  const guard = ((req: IncomingMessage, res: ServerResponse) => core.handle(req, res)) as NodeGuard;
  guard.stats = () => core.stats();
  return guard;
}
