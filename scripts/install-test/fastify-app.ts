// The Fastify-only project of the install test: compiled with strict and skipLibCheck false
// without express installed, then run: one instance, L = 3, the 4th and 5th requests refused.
import Fastify from 'fastify';
import { createMeshLimiter } from 'ratemesh';
import { rateMeshFastify } from 'ratemesh/fastify';

const mesh = createMeshLimiter({ policies: [{ name: 'api', limit: 3, windowMs: 60_000 }] });
await mesh.start();
const app = Fastify();
await app.register(rateMeshFastify({ limiter: mesh, policies: [{ policy: 'api', by: 'ip' }] }));
app.get('/', async () => 'ok');
await app.listen({ port: 0, host: '127.0.0.1' });
const addr = app.server.address();
const url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/`;
const statuses: number[] = [];
for (let i = 0; i < 5; i++) statuses.push((await fetch(url)).status);
console.log('fastify statuses', statuses.join(' '));
await mesh.shutdown({ servers: [app.server] });
await app.close();
if (statuses.join() !== '200,200,200,429,429') process.exit(1);
