/**
 * Fastify 5 adapter: `await app.register(rateMeshFastify({ limiter, policies: ['per-ip'] }))`.
 * The plugin skips encapsulation (as fastify-plugin would, via
 * `Symbol.for('skip-override')`), so its `onRequest` hook covers every route of
 * the instance it is registered on.
 *
 * A route may carry its own rule, as with @fastify/rate-limit:
 * `app.post('/login', { config: { rateMesh: { policies: ['login'], failureMode: 'closed' } } }, h)`,
 * or `config: { rateMesh: false }` to exempt it. Such rules are validated when
 * the route is added, and apply by the route Fastify matched, not by URL. They
 * are seen on routes added after the plugin is registered.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { FailureMode } from '../types.js';
import { type AdapterHooks, type HttpStats, RateMeshCore } from './core.js';
import type { CompiledRoute, MaybePromise, PolicyRef, RateMeshHttpOptions } from './options.js';

/** A route's own rule, in its `config.rateMesh`. */
export interface FastifyRouteRateMesh {
  readonly policies: readonly PolicyRef[];
  readonly failureMode?: FailureMode;
  readonly skip?: (req: FastifyRequest) => MaybePromise<boolean>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** ratemesh rule of this route; false: not limited. */
    rateMesh?: FastifyRouteRateMesh | false;
  }
}

/** A Fastify plugin with its outcome stats attached. */
export interface RateMeshFastifyPlugin {
  (fastify: FastifyInstance, opts: Record<string, unknown>, done: (err?: Error) => void): void;
  stats(): HttpStats;
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

/**
 * Builds the plugin; options are validated here (RateMeshError CONFIG_INVALID
 * naming the field). With no `policies` or `routes`, only routes with a
 * `config.rateMesh` rule are limited.
 */
export function rateMeshFastify(
  options: RateMeshHttpOptions<FastifyRequest, FastifyReply>,
): RateMeshFastifyPlugin {
  const core = new RateMeshCore(options, hooks, true);
  // The compiled rule rides on the route's config object under a private symbol:
  // Fastify copies own enumerable symbols into the config each request sees.
  const kRule = Symbol('ratemesh.rule');
  type Config = { rateMesh?: unknown; [kRule]?: CompiledRoute<FastifyRequest> | null };
  const plugin = ((
    fastify: FastifyInstance,
    _opts: Record<string, unknown>,
    done: (err?: Error) => void,
  ): void => {
    fastify.addHook('onRoute', (route: RouteOptions) => {
      const config = route.config as Config | undefined;
      if (config === undefined || config.rateMesh === undefined) return;
      const methods = Array.isArray(route.method) ? route.method.join('|') : route.method;
      const field = `route ${methods} ${route.url}: config.rateMesh`;
      config[kRule] = config.rateMesh === false ? null : core.config.compileRoute(config.rateMesh, field);
    });
    fastify.addHook('onRequest', (request, reply, next) => {
      const config = request.routeOptions.config as Config | undefined;
      const own = config?.[kRule];
      const r = core.handle(request, reply, own);
      if (r === true) next();
      // The core's promise never rejects; the catch covers a hook chain that throws through next().
      else if (r !== false) r.then((ok) => ok && next()).catch((err: unknown) => next(err as Error));
    });
    done();
  }) as RateMeshFastifyPlugin;
  plugin.stats = () => core.stats();
  Object.defineProperty(plugin, Symbol.for('skip-override'), { value: true });
  Object.defineProperty(plugin, Symbol.for('fastify.display-name'), { value: 'ratemesh' });
  return plugin;
}
