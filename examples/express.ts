/**
 * ratemesh as Express 5 middleware: 5 requests per 10 s per client IP on GET /.
 *   PORT=3000 npm run example:express
 */
import express from 'express';
import { Engine } from '../src/decision/engine.js';
import { rateMeshExpress } from '../src/http/index.js';

const port = Number(process.env.PORT ?? 3000);
const limiter = new Engine({ policies: [{ name: 'per-ip', limit: 5, windowMs: 10_000 }], nodeId: 'example' });

const app = express();
app.use(rateMeshExpress({ limiter, routes: [{ method: 'GET', path: '/', policies: ['per-ip'] }] }));
app.get('/', (_req, res) => {
  res.type('text/plain').send('hello from express\n');
});
app.listen(port, () =>
  console.log(`express example on http://localhost:${port}/ (5 requests / 10 s per IP)`),
);
