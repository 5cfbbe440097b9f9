/**
 * ratemesh as a Fastify 5 plugin: 5 requests per 10 s per client IP on GET /.
 *   PORT=3000 npm run example:fastify
 */
import Fastify from 'fastify';
import { Engine } from '../src/decision/engine.js';
import { rateMeshFastify } from '../src/http/index.js';

const port = Number(process.env.PORT ?? 3000);
const limiter = new Engine({ policies: [{ name: 'per-ip', limit: 5, windowMs: 10_000 }], nodeId: 'example' });

const app = Fastify();
await app.register(
  rateMeshFastify({ limiter, routes: [{ method: 'GET', path: '/', policies: ['per-ip'] }] }),
);
app.get('/', async (_request, reply) => {
  reply.type('text/plain');
  return 'hello from fastify\n';
});
await app.listen({ port });
console.log(`fastify example on http://localhost:${port}/ (5 requests / 10 s per IP)`);
