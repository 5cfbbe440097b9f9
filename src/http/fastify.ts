/**
 * Fastify 5 adapter: `await app.register(rateMeshFastify({ limiter, policies: ['per-ip'] }))`.
 * The plugin skips encapsulation (as fastify-plugin would, via
 * `Symbol.for('skip-override')`), so its `onRequest` hook covers every route of
 * the instance it is registered on.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type AdapterHooks, type HttpCounters, RateMeshCore } from './core.js';
import type { RateMeshHttpOptions } from './options.js';

/** A Fastify plugin with the outcome counters attached. */
export interface RateMeshFastifyPlugin {
  (fastify: FastifyInstance, opts: Record<string, unknown>, done: (err?: Error) => void): void;
  counters(): HttpCounters;
}

const hooks: AdapterHooks<FastifyRequest, FastifyReply> = {
  raw: (req) => req.raw,
  rawRes: (reply) => reply.raw,
  url: (req) => req.raw.url,
  setHeader: (reply, name, value) => {
    reply.header(name, value);
  },
  send: (reply, status, contentType, body) => {
    void reply.code(status).type(contentType).send(body);
  },
};

/** Builds the plugin; options are validated here (RateMeshError CONFIG_INVALID naming the field). */
export function rateMeshFastify(
  options: RateMeshHttpOptions<FastifyRequest, FastifyReply>,
): RateMeshFastifyPlugin {
  const core = new RateMeshCore(options, hooks);
  const plugin = ((
    fastify: FastifyInstance,
    _opts: Record<string, unknown>,
    done: (err?: Error) => void,
  ): void => {
    fastify.addHook('onRequest', (request, reply, next) => {
      const r = core.handle(request, reply);
      if (r === true) next();
      // The core's promise never rejects; the catch covers a hook chain that throws through next().
      else if (r !== false) r.then((ok) => ok && next()).catch((err: unknown) => next(err as Error));
    });
    done();
  }) as RateMeshFastifyPlugin;
  plugin.counters = () => core.counters();
  Object.defineProperty(plugin, Symbol.for('skip-override'), { value: true });
  Object.defineProperty(plugin, Symbol.for('fastify.display-name'), { value: 'ratemesh' });
  return plugin;
}
