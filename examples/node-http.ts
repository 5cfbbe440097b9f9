/**
 * ratemesh on plain node:http: 5 requests per 10 s per client IP on GET /.
 *   PORT=3000 npm run example:node-http
 *   for i in $(seq 7); do curl -si localhost:3000/ | head -1; done
 */
import http from 'node:http';
import { Engine } from '../src/decision/engine.js';
import { rateMeshGuard } from '../src/http/index.js';

const port = Number(process.env.PORT ?? 3000);
const limiter = new Engine({ policies: [{ name: 'per-ip', limit: 5, windowMs: 10_000 }], nodeId: 'example' });
const guard = rateMeshGuard({ limiter, routes: [{ method: 'GET', path: '/', policies: ['per-ip'] }] });

const server = http.createServer(async (req, res) => {
  if (!(await guard(req, res))) return; // 429 (or 503) already sent
  res.setHeader('Content-Type', 'text/plain; charset=utf-8');
  res.end('hello from node:http\n');
});
server.listen(port, () =>
  console.log(`node:http example on http://localhost:${port}/ (5 requests / 10 s per IP)`),
);
