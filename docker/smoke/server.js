// TEST-ONLY stand-in for the ratemesh daemon, used by docker/smoke.sh to prove the
// image, compose scaling, DNS bootstrap and healthchecks before the daemon exists.
// Staged as bin/ratemesh.js of a throwaway app; never part of the real image.
//   GET /healthz   200 "ok"
//   GET /dns       {"self": [...my addrs], "name": "node", "addrs": [...]} (lookup of the service name)
//   POST /v1/check {"allowed": true}   (counts requests; GET /v1/stats shows the count)
import { lookup } from 'node:dns/promises';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { networkInterfaces } from 'node:os';

// compose.yml's entrypoint runs `ratemesh keygen --out <file>` on first start: write a placeholder.
if (process.argv[2] === 'keygen') {
  const out = process.argv[process.argv.indexOf('--out') + 1];
  if (out) writeFileSync(out, 'smoke stand-in key\n');
  process.exit(0);
}

const [host, port] = (process.env.RATEMESH_HTTP ?? '0.0.0.0:8080').split(':');
const boot = (process.env.RATEMESH_BOOTSTRAP ?? 'dns:node:4001').split(',')[0];
const name = boot.startsWith('dns:') ? boot.split(':')[1] : 'node';
let checks = 0;
const self = () =>
  Object.values(networkInterfaces())
    .flat()
    .filter((i) => i && i.family === 'IPv4' && !i.internal)
    .map((i) => i.address);

const server = createServer(async (req, res) => {
  const send = (code, body) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (req.method === 'GET' && req.url === '/healthz') return send(200, { ok: true });
  if (req.method === 'GET' && req.url === '/dns') {
    try {
      const addrs = (await lookup(name, { all: true, family: 4 })).map((a) => a.address).sort();
      return send(200, { self: self(), name, addrs, uid: process.getuid?.() });
    } catch (err) {
      return send(500, { error: String(err) });
    }
  }
  if (req.method === 'POST' && req.url === '/v1/check') {
    req.resume();
    req.on('end', () => {
      checks++;
      send(200, { allowed: true, limited: false });
    });
    return;
  }
  if (req.method === 'GET' && req.url === '/v1/stats') return send(200, { checks });
  send(404, { error: 'not found' });
});
server.listen(Number(port), host, () =>
  console.log(`smoke stand-in on ${host}:${port}, args ${process.argv.slice(2).join(' ')}`),
);
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
