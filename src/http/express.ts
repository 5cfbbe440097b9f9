/**
 * Express 5 adapter: `app.use(rateMeshExpress({ limiter, policies: ['per-ip'] }))`.
 * Routes are matched on `req.originalUrl`, so rules see the full path even
 * when the middleware is mounted under a prefix.
 */
import type { NextFunction, Request, Response } from 'express';
import { type AdapterHooks, type HttpStats, RateMeshCore } from './core.js';
import { sendRaw } from './node-http.js';
import type { RateMeshHttpOptions } from './options.js';

/** Express middleware with its outcome stats attached. */
export interface RateMeshExpressMiddleware {
  (req: Request, res: Response, next: NextFunction): void;
  stats(): HttpStats;
}

const hooks: AdapterHooks<Request, Response> = {
  raw: (req) => req,
  rawRes: (res) => res,
  url: (req) => req.originalUrl ?? req.url,
  setHeader: (res, name, value) => {
    res.setHeader(name, value);
  },
  send: sendRaw,
};

/** Builds the middleware; options are validated here (RateMeshError CONFIG_INVALID naming the field). */
export function rateMeshExpress(options: RateMeshHttpOptions<Request, Response>): RateMeshExpressMiddleware {
  const core = new RateMeshCore(options, hooks);
  const mw = ((req: Request, res: Response, next: NextFunction): void => {
    const r = core.handle(req, res);
    if (r === true) next();
    // The core's promise never rejects; the catch covers a downstream layer that throws through next().
    else if (r !== false) r.then((ok) => ok && next()).catch((err: unknown) => next(err));
  }) as RateMeshExpressMiddleware;
  mw.stats = () => core.stats();
  return mw;
}
