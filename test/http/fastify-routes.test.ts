/** Fastify routes carrying their own rule in config.rateMesh. */
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { isRateMeshError } from '../../src/errors.js';
import { rateMeshFastify } from '../../src/http/index.js';
import { makeLimiter } from './harness.js';

let apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.map((a) => a.close()));
  apps = [];
});

function limiter() {
  return makeLimiter([
    { name: 'per-ip', limit: 3, windowMs: 10_000 },
    { name: 'login', limit: 1, windowMs: 60_000, failureMode: 'closed' },
  ]);
}

describe('fastify route config', () => {
  it('applies the route rule by the matched route, exempts rateMesh:false, defaults elsewhere', async () => {
    const l = limiter();
    const app = Fastify();
    apps.push(app);
    const plugin = rateMeshFastify({ limiter: l, policies: ['per-ip'], logger: false });
    await app.register(plugin);
    app.post('/login', { config: { rateMesh: { policies: ['login'] } } }, async () => 'in');
    app.get('/health', { config: { rateMesh: false } }, async () => 'up');
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    expect((await fetch(`${url}/login`, { method: 'POST' })).status).toBe(200);
    expect((await fetch(`${url}/login`, { method: 'POST' })).status).toBe(429);
    for (let i = 0; i < 5; i++) expect((await fetch(`${url}/health`)).status).toBe(200);
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await fetch(url)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(plugin.stats()).toMatchObject({ limited: 2, skipped: 5 });
  });

  it('with no top-level policies, only routes with a rule are limited', async () => {
    const l = limiter();
    l.ready = false;
    const app = Fastify();
    apps.push(app);
    await app.register(rateMeshFastify({ limiter: l, logger: false }));
    app.post('/login', { config: { rateMesh: { policies: ['login'] } } }, async () => 'in');
    app.get('/', async () => 'ok');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    expect((await fetch(url)).status).toBe(200);
    // The login policy fails closed.
    expect((await fetch(`${url}/login`, { method: 'POST' })).status).toBe(503);
  });

  it('an invalid route rule fails when the route is added, naming the route and field', async () => {
    const app = Fastify();
    apps.push(app);
    await app.register(rateMeshFastify({ limiter: limiter(), logger: false }));
    let caught: unknown;
    try {
      app.post('/login', { config: { rateMesh: { policies: ['nope'] } } }, async () => 'in');
    } catch (err) {
      caught = err;
    }
    expect(isRateMeshError(caught, 'ERR_CONFIG_INVALID')).toBe(true);
    expect((caught as { field: string }).field).toBe('route POST /login: config.rateMesh.policies[0]');
  });
});
