/**
 * The RLS gRPC server (grpc-server.ts on grpc-transport.ts and h2.ts) against what a client can
 * send: a raw HTTP/2 client for what @grpc/grpc-js never sends (wrong
 * frames, compression, malformed headers, resets), and the @grpc/grpc-js
 * client for the health service and grpc-message encoding.
 */
import http2 from 'node:http2';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  RLS_SERVICE,
  type RlsServer,
  rlsServiceDefinition,
  startRlsServer,
} from '../../src/envoy/grpc-server.js';
import { GrpcStatus } from '../../src/envoy/grpc-status.js';
import { parseTimeout, percentEncode } from '../../src/envoy/grpc-transport.js';
import { RlsService } from '../../src/envoy/service.js';
import { memoryLogger } from '../daemon/fake-limiter.js';
import { config, EngineLimiter } from './helpers.js';

const YAML = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;

const PATH = `/${RLS_SERVICE}/ShouldRateLimit`;
const def = (rlsServiceDefinition() as unknown as Record<string, { requestSerialize(v: unknown): Buffer }>)
  .ShouldRateLimit!;
const goodMessage = def.requestSerialize({
  domain: 'edge',
  descriptors: [{ entries: [{ key: 'remote_address', value: '192.0.2.1' }] }],
});

function frame(message: Buffer, flag = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

let server: RlsServer | undefined;
let sessions: http2.ClientHttp2Session[] = [];
let clients: grpc.Client[] = [];
const calls: number[] = [];

afterEach(async () => {
  for (const s of sessions) s.destroy();
  sessions = [];
  for (const c of clients) c.close();
  clients = [];
  await server?.stop(200);
  server = undefined;
  calls.length = 0;
});

async function start(
  opts: { maxMessageBytes?: number; requestTimeoutMs?: number; maxConcurrentStreams?: number } = {},
) {
  const cfg = config(YAML);
  const limiter = new EngineLimiter(cfg.policies);
  await limiter.start();
  server = await startRlsServer({
    service: new RlsService({ config: cfg, limiter, unknownDomain: 'error' }),
    host: '127.0.0.1',
    port: 0,
    logger: memoryLogger(),
    onCall: (code) => calls.push(code),
    ...opts,
  });
  server.setServing(true);
  return server;
}

function connect(port: number): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = http2.connect(`http://127.0.0.1:${port}`);
    sessions.push(s);
    s.once('remoteSettings', () => resolve(s));
    s.once('error', reject);
  });
}

interface Answer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  data: Buffer;
  rstCode: number;
}

/** One raw request: `body` written (and the stream ended unless `end` is false). */
function send(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body: Buffer | undefined,
  end = true,
): Promise<Answer> {
  return new Promise((resolve) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    let got: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on('response', (h) => {
      got = h;
    });
    stream.on('trailers', (t) => {
      trailers = t;
    });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => {});
    stream.on('close', () =>
      resolve({ headers: got, trailers, data: Buffer.concat(chunks), rstCode: stream.rstCode ?? 0 }),
    );
    if (body !== undefined) stream.write(body);
    if (end) stream.end();
  });
}

/** The call's gRPC status: from the trailers, or from the headers of a trailers-only reply. */
function statusOf(a: Answer): { code: number; message: string } {
  const h = a.trailers['grpc-status'] !== undefined ? a.trailers : a.headers;
  return {
    code: Number(h['grpc-status']),
    message: decodeURIComponent(String(h['grpc-message'] ?? '')),
  };
}

/** Every case runs on both transports: ratemesh's HTTP/2 and the node:http2 fallback (RATEMESH_GRPC_TRANSPORT). */
const TRANSPORTS = ['ratemesh', 'node:http2'] as const;
let envBefore: string | undefined;
function onTransport(t: (typeof TRANSPORTS)[number]): void {
  beforeAll(() => {
    envBefore = process.env.RATEMESH_GRPC_TRANSPORT;
    process.env.RATEMESH_GRPC_TRANSPORT = t;
  });
  afterAll(() => {
    if (envBefore === undefined) delete process.env.RATEMESH_GRPC_TRANSPORT;
    else process.env.RATEMESH_GRPC_TRANSPORT = envBefore;
  });
}

describe.each(TRANSPORTS)('the RLS gRPC server over HTTP/2 (%s)', (transport) => {
  onTransport(transport);
  it('answers a well-formed call: 200, application/grpc, one framed message, grpc-status 0 in the trailers', async () => {
    const { port } = await start();
    const s = await connect(port);
    const a = await send(s, {}, frame(goodMessage));
    expect(a.headers[':status']).toBe(200);
    expect(a.headers['content-type']).toBe('application/grpc');
    expect(a.trailers['grpc-status']).toBe('0');
    expect(a.data[0]).toBe(0);
    expect(a.data.readUInt32BE(1)).toBe(a.data.length - 5);
    const res = (
      rlsServiceDefinition() as unknown as Record<string, { responseDeserialize(b: Buffer): unknown }>
    ).ShouldRateLimit!.responseDeserialize(a.data.subarray(5));
    expect(res).toMatchObject({ overall_code: 'OK', statuses: [{ code: 'OK', limit_remaining: 99 }] });
    // the message split over several DATA frames, byte by byte
    const stream = s.request({ ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc+proto' });
    const trailers = new Promise<http2.IncomingHttpHeaders>((resolve) => stream.on('trailers', resolve));
    stream.resume();
    for (const b of frame(goodMessage)) stream.write(Buffer.from([b]));
    stream.end();
    expect((await trailers)['grpc-status']).toBe('0');
    expect(calls).toEqual([0, 0]);
  });

  it('refuses what is not a good call, with the gRPC status and a clear message, and keeps serving', async () => {
    const { port } = await start({ maxMessageBytes: 1024 });
    const s = await connect(port);
    const cases: [http2.OutgoingHttpHeaders, Buffer | undefined, number, RegExp][] = [
      [
        { ':path': '/envoy.service.ratelimit.v3.RateLimitService/Nope' },
        frame(goodMessage),
        GrpcStatus.UNIMPLEMENTED,
        /unknown method/,
      ],
      [{ ':path': '/x' }, undefined, GrpcStatus.UNIMPLEMENTED, /unknown method \/x/],
      [{}, frame(goodMessage, 1), GrpcStatus.UNIMPLEMENTED, /compressed messages are not supported/],
      [{ 'grpc-encoding': 'gzip' }, frame(goodMessage, 1), GrpcStatus.UNIMPLEMENTED, /grpc-encoding gzip/],
      [{}, frame(goodMessage, 7), GrpcStatus.INTERNAL, /invalid compressed flag 7/],
      [
        {},
        Buffer.concat([frame(goodMessage), frame(goodMessage)]),
        GrpcStatus.INTERNAL,
        /more than one request message/,
      ],
      [{}, undefined, GrpcStatus.INTERNAL, /no message/],
      [{}, frame(goodMessage).subarray(0, 9), GrpcStatus.INTERNAL, /ended inside its message/],
      [{}, Buffer.from([0, 0]), GrpcStatus.INTERNAL, /ended inside its message/],
      [
        {},
        frame(Buffer.from([0x0a, 0x10, 0x61])),
        GrpcStatus.INTERNAL,
        /cannot decode the RateLimitRequest: length past the end/,
      ],
      [
        {},
        frame(Buffer.alloc(0)),
        GrpcStatus.INVALID_ARGUMENT,
        /domain: rate limit domain must not be empty/,
      ],
      [{ 'grpc-timeout': '10 seconds' }, frame(goodMessage), GrpcStatus.INTERNAL, /malformed grpc-timeout/],
      [{ 'grpc-timeout': '123456789S' }, frame(goodMessage), GrpcStatus.INTERNAL, /malformed grpc-timeout/],
    ];
    for (const [headers, body, code, message] of cases) {
      const a = await send(s, headers, body);
      const st = statusOf(a);
      expect(st.code, `${JSON.stringify(headers)} ${message}`).toBe(code);
      expect(st.message).toMatch(message);
      expect(a.headers[':status']).toBe(200);
      expect(a.data.length).toBe(0);
    }
    // not gRPC at all: HTTP statuses
    expect(
      (await send(s, { 'content-type': 'application/json' }, Buffer.from('{}'))).headers[':status'],
    ).toBe(415);
    expect((await send(s, { 'content-type': undefined }, frame(goodMessage))).headers[':status']).toBe(415);
    expect((await send(s, { ':method': 'GET' }, undefined)).headers[':status']).toBe(405);
    // the same session still serves
    expect(statusOf(await send(s, {}, frame(goodMessage))).code).toBe(0);
  });

  it('a message over the size cap: RESOURCE_EXHAUSTED as soon as its length is read, the rest of the request reset', async () => {
    const { port } = await start({ maxMessageBytes: 1024 });
    const s = await connect(port);
    // announces 1 MiB, sends 5 bytes of it and never ends: answered without waiting for the rest
    const head = Buffer.alloc(10);
    head.writeUInt32BE(1 << 20, 1);
    const a = await send(s, {}, head, false);
    expect(statusOf(a)).toEqual({
      code: GrpcStatus.RESOURCE_EXHAUSTED,
      message: 'the request message is larger than the maximum (1048576 vs 1024 bytes)',
    });
    expect(a.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(calls).toEqual([GrpcStatus.RESOURCE_EXHAUSTED]);
    expect(statusOf(await send(s, {}, frame(goodMessage))).code).toBe(0);
  });

  it('deadlines: a request still incomplete at its grpc-timeout, or at requestTimeoutMs, gets DEADLINE_EXCEEDED', async () => {
    const { port } = await start({ requestTimeoutMs: 100 });
    const s = await connect(port);
    const late = await send(s, { 'grpc-timeout': '1m' }, frame(goodMessage).subarray(0, 8), false);
    expect(statusOf(late)).toEqual({
      code: GrpcStatus.DEADLINE_EXCEEDED,
      message: 'the deadline passed before the request arrived',
    });
    const stuck = await send(s, {}, frame(goodMessage).subarray(0, 8), false);
    expect(statusOf(stuck)).toEqual({
      code: GrpcStatus.DEADLINE_EXCEEDED,
      message: 'no complete request within 100 ms',
    });
    // the body after the deadline: not decided
    const stream = s.request({
      ':method': 'POST',
      ':path': PATH,
      'content-type': 'application/grpc',
      'grpc-timeout': '1u',
    });
    const answer = new Promise<http2.IncomingHttpHeaders>((resolve) => {
      stream.on('response', (h) => resolve(h));
      stream.on('error', () => {});
    });
    await new Promise((r) => setTimeout(r, 5));
    stream.end(frame(goodMessage));
    expect((await answer)['grpc-status']).toBe(String(GrpcStatus.DEADLINE_EXCEEDED));
    expect(calls).toEqual([4, 4, 4]);
    expect(statusOf(await send(s, { 'grpc-timeout': '5S' }, frame(goodMessage))).code).toBe(0);
  });

  it('client resets and cancels mid-call, garbage connections and HTTP/1 do not hurt it', async () => {
    const { port } = await start();
    const s = await connect(port);
    for (let i = 0; i < 20; i++) {
      const stream = s.request({ ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc' });
      stream.on('error', () => {});
      stream.write(frame(goodMessage).subarray(0, 3 + (i % 10)));
      stream.close(i % 2 === 0 ? http2.constants.NGHTTP2_CANCEL : http2.constants.NGHTTP2_INTERNAL_ERROR);
    }
    // a reset right after a complete request, before the answer is read
    for (let i = 0; i < 20; i++) {
      const stream = s.request({ ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc' });
      stream.on('error', () => {});
      stream.end(frame(goodMessage));
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }
    // a connection that sends the preface and then garbage, one that speaks HTTP/1.1, one that hangs up
    for (const bytes of [
      Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.alloc(64, 0xff)]),
      Buffer.from('POST / HTTP/1.1\r\nHost: x\r\n\r\n'),
      Buffer.alloc(0),
    ]) {
      await new Promise<void>((resolve) => {
        const sock = net.connect(port, '127.0.0.1', () => sock.end(bytes));
        sock.on('error', () => resolve());
        sock.on('close', () => resolve());
        sock.resume();
      });
    }
    const again = await connect(port);
    expect(statusOf(await send(again, {}, frame(goodMessage))).code).toBe(0);
    expect(statusOf(await send(s, {}, frame(goodMessage))).code).toBe(0);
  });

  it('advertises its max concurrent streams and header list size; larger headers are refused', async () => {
    const { port } = await start({ maxConcurrentStreams: 7 });
    const s = await connect(port);
    expect(s.remoteSettings.maxConcurrentStreams).toBe(7);
    expect(s.remoteSettings.maxHeaderListSize).toBe(16 * 1024);
    const big = await send(s, { 'x-big': 'a'.repeat(20_000) }, frame(goodMessage));
    expect(big.headers[':status']).toBeUndefined();
    expect(big.rstCode).not.toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(statusOf(await send(s, {}, frame(goodMessage))).code).toBe(0);
  });

  it('grpc-message is percent-encoded: a grpc-js client reads the message back as it was', async () => {
    const { port } = await start();
    const Rls = grpc.makeGenericClientConstructor(rlsServiceDefinition(), 'RateLimitService');
    const rls = new Rls(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as grpc.Client &
      Record<string, (...args: unknown[]) => unknown>;
    clients.push(rls);
    const err = await new Promise<grpc.ServiceError>((resolve) =>
      rls.ShouldRateLimit!(
        { domain: 'dömäin 100% 日本', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] },
        (e: grpc.ServiceError) => resolve(e),
      ),
    );
    expect(err.code).toBe(grpc.status.NOT_FOUND);
    expect(err.details).toContain('unknown rate limit domain "dömäin 100% 日本"');
    expect(percentEncode('a%b\n')).toBe('a%25b%0A');
    expect(percentEncode('x'.repeat(5000))).toHaveLength(1024);
  });

  it('parses grpc-timeout', () => {
    expect(parseTimeout('1H')).toBe(3_600_000);
    expect(parseTimeout('2M')).toBe(120_000);
    expect(parseTimeout('3S')).toBe(3000);
    expect(parseTimeout('20m')).toBe(20);
    expect(parseTimeout('500u')).toBe(0.5);
    expect(parseTimeout('99999999n')).toBeCloseTo(99.999999);
    for (const bad of ['', 'm', '1', '1s', '-1S', '123456789m', '1.5S', ' 1S'])
      expect(parseTimeout(bad)).toBeUndefined();
  });
});

describe.each(TRANSPORTS)('grpc.health.v1 on the same server (%s)', (transport) => {
  onTransport(transport);
  function healthClient(port: number) {
    const Health = grpc.makeGenericClientConstructor(
      healthService as unknown as grpc.ServiceDefinition,
      'Health',
    );
    const c = new Health(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as grpc.Client &
      Record<string, (...args: unknown[]) => unknown>;
    clients.push(c);
    return c;
  }

  it('Check and List', async () => {
    const { port } = await start();
    const health = healthClient(port);
    const check = (service: string) =>
      new Promise<{ err: grpc.ServiceError | null; res: unknown }>((resolve) =>
        health.check!({ service }, (err: grpc.ServiceError | null, res: unknown) => resolve({ err, res })),
      );
    expect((await check('')).res).toEqual({ status: 'SERVING' });
    server!.setServing(false);
    expect((await check(RLS_SERVICE)).res).toEqual({ status: 'NOT_SERVING' });
    const unknown = await check('nope');
    expect(unknown.err?.code).toBe(grpc.status.NOT_FOUND);
    expect(unknown.err?.details).toBe('Health status unknown for service nope');
    const list = await new Promise<unknown>((resolve) =>
      health.list!({}, (_e: unknown, res: unknown) => resolve(res)),
    );
    expect(list).toEqual({
      statuses: {
        '': { status: 'NOT_SERVING' },
        [RLS_SERVICE]: { status: 'NOT_SERVING' },
        ratelimit: { status: 'NOT_SERVING' },
      },
    });
  });

  it('Watch: the status now, each change, SERVICE_UNKNOWN for an unknown name; ended with UNAVAILABLE at stop', async () => {
    const { port } = await start();
    const health = healthClient(port);
    const seen: string[] = [];
    const call = health.watch!({ service: RLS_SERVICE }) as grpc.ClientReadableStream<{ status: string }>;
    const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.on('error', () => {});
    let wake: () => void = () => {};
    call.on('data', (m: { status: string }) => {
      seen.push(m.status);
      wake();
    });
    const until = (n: number) =>
      new Promise<void>((resolve) => {
        wake = () => seen.length >= n && resolve();
        wake();
      });
    await until(1);
    server!.setServing(false);
    await until(2);
    server!.setServing(true);
    await until(3);
    expect(seen).toEqual(['SERVING', 'NOT_SERVING', 'SERVING']);

    const other = health.watch!({ service: 'nope' }) as grpc.ClientReadableStream<{ status: string }>;
    other.on('error', () => {});
    expect(await new Promise((resolve) => other.once('data', resolve))).toEqual({
      status: 'SERVICE_UNKNOWN',
    });
    other.cancel();

    const stopped = server!.stop(1000);
    server = undefined;
    expect((await ended).code).toBe(grpc.status.UNAVAILABLE);
    expect(seen.at(-1)).toBe('NOT_SERVING');
    await stopped;
  });
});
