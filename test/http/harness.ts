/** Test harness: real servers on 127.0.0.1:0 for node:http, Express 5 and Fastify 5 over one set of options. */

import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { afterEach } from 'vitest';
import { type Clock, ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import type { HttpStats, RateMeshHttpOptions } from '../../src/http/index.js';
import { rateMeshExpress, rateMeshFastify, rateMeshGuard } from '../../src/http/index.js';
import type { WarnLogger } from '../../src/logger.js';
import type { Decision, KeyOutcome, Policy, PolicyKey, PolicySpec, RateLimiter } from '../../src/types.js';

export type Framework = 'node' | 'express' | 'fastify';
export const FRAMEWORKS: readonly Framework[] = ['node', 'express', 'fastify'];

/** A limiter over the real Engine whose readiness and failures a test can switch. */
export class Switchable implements RateLimiter {
  ready = true;
  throwOnCheck = false;
  calls = 0;
  constructor(readonly inner: RateLimiter) {}
  check(policy: string, keys: string | readonly string[], cost?: number): Decision {
    this.calls++;
    if (this.throwOnCheck) throw new Error('limiter exploded');
    return this.inner.check(policy, keys, cost);
  }
  checkAll(pairs: readonly PolicyKey[], cost?: number): Decision & { outcomes: KeyOutcome[] } {
    this.calls++;
    if (this.throwOnCheck) throw new Error('limiter exploded');
    return this.inner.checkAll(pairs, cost);
  }
  policy(name: string): Policy | undefined {
    return this.inner.policy(name);
  }
}

export function makeLimiter(policies: PolicySpec[], clock: Clock = new ManualClock(1_000_000)): Switchable {
  return new Switchable(new Engine({ policies, nodeId: 'test', clock }));
}

/** Collects log lines instead of printing them. */
export function memoryLogger(): WarnLogger & {
  lines: { level: string; obj: Record<string, unknown>; msg: string }[];
} {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  return {
    lines,
    warn: (obj, msg) => lines.push({ level: 'warn', obj: obj as Record<string, unknown>, msg: msg ?? '' }),
    info: (obj, msg) => lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg: msg ?? '' }),
  };
}

export interface Running {
  url: string;
  port: number;
  stats(): HttpStats;
  close(): Promise<void>;
  /** Resolve to let held requests (path /slow) finish. */
  release(): void;
  /** How many app handlers ran. */
  served(): number;
}

/**
 * Starts `fw` with the ratemesh layer and an app that answers 200 "ok" (or,
 * on /slow, waits for `release()`). Options are given as for node:http; the
 * framework-specific request objects only matter to user functions, which
 * here read `rawOf(req)`.
 */
export async function start(
  fw: Framework,
  // biome-ignore lint/suspicious/noExplicitAny: the same options serve three request types
  options: RateMeshHttpOptions<any, any>,
): Promise<Running> {
  let served = 0;
  let gate!: () => void;
  let gateP = new Promise<void>((r) => {
    gate = r;
  });
  const release = () => {
    gate();
    gateP = new Promise<void>((r) => {
      gate = r;
    });
  };
  const app = async (url: string | undefined): Promise<string> => {
    served++;
    if (url?.startsWith('/slow')) await gateP;
    return 'ok';
  };
  if (fw === 'node') {
    const guard = rateMeshGuard(options);
    const server: Server = http.createServer(async (req: IncomingMessage, res: ServerResponse) => {
      if (!(await guard(req, res))) return;
      res.end(await app(req.url));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    return {
      url: `http://127.0.0.1:${port}`,
      port,
      stats: guard.stats,
      release,
      served: () => served,
      close: async () => {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
      },
    };
  }
  if (fw === 'express') {
    const mw = rateMeshExpress(options);
    const a = express();
    a.use(mw);
    a.use(async (req, res) => {
      res.send(await app(req.url));
    });
    const server = await new Promise<Server>((r) => {
      const s = a.listen(0, '127.0.0.1', () => r(s));
    });
    const port = (server.address() as AddressInfo).port;
    return {
      url: `http://127.0.0.1:${port}`,
      port,
      stats: mw.stats,
      release,
      served: () => served,
      close: async () => {
        server.closeAllConnections();
        await new Promise<void>((r) => server.close(() => r()));
      },
    };
  }
  const plugin = rateMeshFastify(options);
  const f = Fastify();
  await f.register(plugin);
  f.all('/*', async () => app(undefined));
  f.all('/slow', async () => app('/slow'));
  await f.listen({ port: 0, host: '127.0.0.1' });
  const port = (f.server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    stats: plugin.stats,
    release,
    served: () => served,
    close: async () => {
      await f.close();
    },
  };
}

/** The raw node request behind any framework's request object. */
export function rawOf(req: unknown): IncomingMessage {
  const r = req as { raw?: IncomingMessage };
  return r.raw !== undefined && typeof r.raw === 'object' && 'socket' in r.raw
    ? r.raw
    : (req as IncomingMessage);
}

/**
 * `up(...)` starts a server (as {@link start}) that is closed after each test: the scaffold the
 * HTTP test files share. Call it once at a file's top level.
 */
export function upEach(): (...args: Parameters<typeof start>) => Promise<Running> {
  let running: Running[] = [];
  afterEach(async () => {
    await Promise.all(running.map((r) => r.close()));
    running = [];
  });
  return async (...args) => {
    const r = await start(...args);
    running.push(r);
    return r;
  };
}
