/** Hostile or broken input: a clear, logged outcome under the route's failure policy; never a crash. */
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { rateMeshGuard } from '../../src/http/index.js';
import type { PolicySpec } from '../../src/types.js';
import { FRAMEWORKS, makeLimiter, memoryLogger, upEach } from './harness.js';

const PER_IP: PolicySpec = { name: 'per-ip', limit: 5, windowMs: 10_000 };

const up = upEach();

/** Sends raw bytes (headers fetch would refuse to send) and returns the status line's code. */
function rawRequest(port: number, head: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.end(head));
    let data = '';
    sock.on('data', (d) => {
      data += d.toString('latin1');
    });
    sock.on('error', reject);
    sock.on('close', () => resolve(Number(data.slice(9, 12))));
  });
}

describe.each(FRAMEWORKS)('%s behind a trusted proxy', (fw) => {
  async function server(failureMode: 'open' | 'closed') {
    const logger = memoryLogger();
    const srv = await up(fw, {
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      trustProxy: ['127.0.0.1'],
      failureMode,
      logger,
    });
    return { srv, logger };
  }

  it.each([
    ['malformed X-Forwarded-For', '10.0.0.1, not-an-ip', 'forwarded-malformed'],
    ['empty hop', '203.0.113.7,,', 'forwarded-malformed'],
    ['absurdly long X-Forwarded-For', `${'203.0.113.7, '.repeat(700)}203.0.113.7`, 'forwarded-too-long'],
  ])('%s: fail-open forwards, fail-closed answers 503, both logged', async (_, xff, reason) => {
    for (const mode of ['open', 'closed'] as const) {
      const { srv, logger } = await server(mode);
      const res = await fetch(srv.url, { headers: { 'x-forwarded-for': xff } });
      expect(res.status).toBe(mode === 'open' ? 200 : 503);
      expect(srv.stats().failures).toEqual({ [reason]: 1 });
      expect(logger.lines).toHaveLength(1);
      expect(logger.lines[0]!.obj).toMatchObject({ reason, failureMode: mode });
    }
  });

  it('non-ASCII bytes in X-Forwarded-For are bad input, not a crash', async () => {
    const { srv, logger } = await server('closed');
    const head = Buffer.concat([
      Buffer.from('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Forwarded-For: 203.0.113.7'),
      Buffer.from([0xc3, 0xa9]),
      Buffer.from('\r\n\r\n'),
    ]);
    const status = await rawRequest(srv.port, head);
    // Either node's parser refuses the bytes (400) or ratemesh does (503): never a crash or a pass.
    expect([400, 503]).toContain(status);
    if (status === 503) expect(logger.lines[0]!.obj.reason).toBe('forwarded-malformed');
    // The server is still up.
    expect((await fetch(srv.url, { headers: { 'x-forwarded-for': '203.0.113.7' } })).status).toBe(200);
  });

  it('an absurdly long non-forwarding header is ignored by the limiter', async () => {
    const { srv } = await server('closed');
    const res = await fetch(srv.url, { headers: { 'x-junk': 'a'.repeat(8000) } });
    expect(res.status).toBe(200);
  });
});

describe('a request with no socket address', () => {
  it.each(['open', 'closed'] as const)('follows the failure policy (%s)', async (failureMode) => {
    const logger = memoryLogger();
    const guard = rateMeshGuard({
      limiter: makeLimiter([PER_IP]),
      policies: ['per-ip'],
      failureMode,
      logger,
    });
    const req = new http.IncomingMessage(new net.Socket());
    req.method = 'GET';
    req.url = '/';
    const res = new http.ServerResponse(req);
    const ok = await guard(req, res);
    expect(ok).toBe(failureMode === 'open');
    if (failureMode === 'closed') expect(res.statusCode).toBe(503);
    expect(guard.stats().failures).toEqual({ 'no-client-address': 1 });
    expect(logger.lines[0]!.obj.reason).toBe('no-client-address');
  });
});

describe.each(FRAMEWORKS)('%s with a logger that throws', (fw) => {
  it('still answers by the failure policy and the limiter', async () => {
    const limiter = makeLimiter([{ ...PER_IP, limit: 1, shadow: false }]);
    const boom = () => {
      throw new Error('logger down');
    };
    const srv = await up(fw, {
      limiter,
      routes: [{ path: '/closed', policies: ['per-ip'], failureMode: 'closed' }],
      policies: ['per-ip'],
      keyGenerator: () => {
        throw new Error('no key');
      },
      logger: { warn: boom, info: boom },
    });
    expect((await fetch(`${srv.url}/`)).status).toBe(200);
    expect((await fetch(`${srv.url}/closed`)).status).toBe(503);
    expect(srv.stats()).toMatchObject({ failOpen: 1, failClosed: 1 });
  });
});
