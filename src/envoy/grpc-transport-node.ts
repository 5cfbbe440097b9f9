/**
 * The fallback transport of the gRPC server: the same calls as
 * grpc-transport.ts on node:http2 (nghttp2 inside node) instead of
 * ratemesh's own HTTP/2 (h2.ts). About twice the CPU per call
 * (docs/envoy-transport.md), and nghttp2's own caps; chosen with
 * `transport: 'node:http2'` in {@link GrpcServerOptions} or
 * RATEMESH_GRPC_TRANSPORT=node:http2, for a client our HTTP/2 would not
 * serve. What the two answer is the same (test/envoy/grpc-transport.test.ts
 * runs against both).
 */
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { GrpcStatus } from './grpc-status.js';
import {
  type GrpcServer,
  type GrpcServerOptions,
  MAX_HEADER_LIST,
  MESSAGE_PREFIX,
  parseTimeout,
  percentEncode,
  type Reply,
  type ServerStream,
  type ServerStreamMethod,
} from './grpc-transport.js';
import { h2Limits } from './h2.js';

/** How often waiting requests are checked against their deadlines. */
const SWEEP_MS = 250;

const OK_HEADERS = { ':status': 200, 'content-type': 'application/grpc' } as const;
const OK_TRAILERS = { 'grpc-status': '0' } as const;
/** A reply with messages: trailers follow them. */
const RESPOND_MESSAGES = { waitForTrailers: true, sendDate: false } as const;
/** A reply of headers alone. */
const RESPOND_END = { endStream: true, sendDate: false } as const;

function ignore(): void {}

function sendOkTrailers(this: ServerHttp2Stream): void {
  try {
    this.sendTrailers(OK_TRAILERS);
  } catch {
    // reset by the client meanwhile
  }
}

/** Answers with a status and no message, in the headers (trailers-only). */
function trailersOnly(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.closed || stream.headersSent) return;
  const headers: Record<string, string | number> = {
    ':status': 200,
    'content-type': 'application/grpc',
    'grpc-status': String(code),
  };
  if (message !== '') headers['grpc-message'] = percentEncode(message);
  if (code === GrpcStatus.UNIMPLEMENTED) headers['grpc-accept-encoding'] = 'identity';
  try {
    stream.respond(headers, RESPOND_END);
  } catch {
    // reset by the client meanwhile
  }
}

/** Answers an HTTP request that is not a gRPC call (wrong method or content type). */
function notGrpc(stream: ServerHttp2Stream, status: number): void {
  try {
    stream.respond({ ':status': status }, RESPOND_END);
    stream.close(http2.constants.NGHTTP2_NO_ERROR);
  } catch {
    // reset by the client meanwhile
  }
}

/** A call waiting for its request message. */
interface Waiting {
  stream: ServerHttp2Stream;
  /** The sweep count when it started. */
  epoch: number;
  /** performance.now() past which the client no longer waits; Infinity without grpc-timeout. */
  deadline: number;
  refuse(code: number, message: string): void;
}

/** Starts a gRPC server on node:http2 serving `methods` (the fallback of startGrpcServer). */
export async function startNodeHttp2GrpcServer(opts: GrpcServerOptions): Promise<GrpcServer> {
  const { methods, maxMessageBytes } = opts;
  const limits = h2Limits(opts.limits);
  const server = http2.createServer({
    settings: { maxConcurrentStreams: opts.maxConcurrentStreams, maxHeaderListSize: MAX_HEADER_LIST },
    // streams past the limit are refused by HTTP/2 itself (REFUSED_STREAM); a client that
    // keeps opening them is disconnected after this many (node's default, stated)
    maxSessionRejectedStreams: 100,
    maxSettings: limits.maxSettingsEntries,
    unknownProtocolTimeout: limits.prefaceTimeoutMs,
  });
  server.maxConnections = opts.maxConnections ?? 4096;

  const sessions = new Set<ServerHttp2Session>();
  const waiting = new Set<Waiting>();
  const open = new Set<ServerStream>();
  let stopping = false;
  let epoch = 0;
  const sweepEpochs = Math.max(1, Math.ceil(opts.requestTimeoutMs / SWEEP_MS));

  const sweep = setInterval(() => {
    epoch++;
    if (waiting.size === 0) return;
    const now = performance.now();
    for (const w of waiting) {
      if (w.stream.destroyed || w.stream.closed) waiting.delete(w);
      else if (now >= w.deadline)
        w.refuse(GrpcStatus.DEADLINE_EXCEEDED, 'the deadline passed before the request arrived');
      else if (epoch - w.epoch > sweepEpochs)
        w.refuse(GrpcStatus.DEADLINE_EXCEEDED, `no complete request within ${opts.requestTimeoutMs} ms`);
    }
  }, SWEEP_MS);
  sweep.unref();

  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    // a session with no activity for this long is closed (node's timeout counts any frame, not open streams)
    session.setTimeout(limits.idleTimeoutMs, () => session.close());
    session.once('close', () => sessions.delete(session));
    if (stopping) session.close();
  });
  server.on('sessionError', (err: Error) => opts.onSessionError?.(err));

  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    stream.on('error', ignore);
    if (headers[':method'] !== 'POST') return notGrpc(stream, 405);
    const ct = headers['content-type'];
    if (
      typeof ct !== 'string' ||
      !(ct === 'application/grpc' || ct.startsWith('application/grpc+') || ct.startsWith('application/grpc;'))
    ) {
      return notGrpc(stream, 415);
    }
    const path = headers[':path'];
    const method = typeof path === 'string' ? methods.get(path) : undefined;
    if (method === undefined) {
      trailersOnly(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${String(path).slice(0, 200)}`);
      stream.close(http2.constants.NGHTTP2_NO_ERROR);
      return;
    }
    const done = method.done;
    if (stopping) {
      trailersOnly(stream, GrpcStatus.UNAVAILABLE, 'the server is stopping');
      done?.(GrpcStatus.UNAVAILABLE);
      stream.close(http2.constants.NGHTTP2_NO_ERROR);
      return;
    }
    let deadline = Number.POSITIVE_INFINITY;
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined) {
      const ms = typeof timeout === 'string' ? parseTimeout(timeout) : undefined;
      if (ms === undefined) {
        trailersOnly(stream, GrpcStatus.INTERNAL, `malformed grpc-timeout header ${JSON.stringify(timeout)}`);
        done?.(GrpcStatus.INTERNAL);
        stream.close(http2.constants.NGHTTP2_NO_ERROR);
        return;
      }
      deadline = performance.now() + ms;
    }

    let chunks: Buffer[] | undefined;
    let first: Buffer | undefined;
    let size = 0;
    let length = -1;
    let answered = false;

    const refuse = (code: number, message: string): void => {
      if (answered) return;
      answered = true;
      waiting.delete(call);
      trailersOnly(stream, code, message);
      done?.(code);
      // the rest of the request is not wanted: RST_STREAM(NO_ERROR) once the status is out
      if (!stream.readableEnded && !stream.destroyed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    };
    const call: Waiting = { stream, epoch, deadline, refuse };
    waiting.add(call);

    const complete = (message: Buffer): void => {
      answered = true;
      waiting.delete(call);
      if (stream.destroyed || stream.closed) return;
      if (deadline !== Number.POSITIVE_INFINITY && performance.now() >= deadline) {
        trailersOnly(stream, GrpcStatus.DEADLINE_EXCEEDED, 'the deadline passed before the request arrived');
        done?.(GrpcStatus.DEADLINE_EXCEEDED);
        return;
      }
      if (method.kind === 'unary') {
        const send = (reply: Reply): void => {
          if (stream.destroyed || stream.closed) return;
          if ('frame' in reply) {
            const frame = reply.frame;
            frame[0] = 0;
            frame.writeUInt32BE(frame.length - MESSAGE_PREFIX, 1);
            try {
              stream.respond(OK_HEADERS, RESPOND_MESSAGES);
              stream.on('wantTrailers', sendOkTrailers);
              stream.end(frame);
            } catch {
              return;
            }
            done?.(GrpcStatus.OK);
          } else {
            trailersOnly(stream, reply.code, reply.message);
            done?.(reply.code);
          }
        };
        const internal: Reply = { code: GrpcStatus.INTERNAL, message: 'internal error' };
        let reply: Reply | Promise<Reply>;
        try {
          reply = method.call(message);
        } catch {
          reply = internal;
        }
        // a key placed on its owner answers when the owner does (issue 27)
        if (reply instanceof Promise) reply.then(send, () => send(internal));
        else send(reply);
        return;
      }
      serverStream(stream, method, message);
    };

    stream.on('data', (chunk: Buffer) => {
      if (answered) return;
      size += chunk.length;
      if (first === undefined) first = chunk;
      else if (chunks === undefined) chunks = [first, chunk];
      else chunks.push(chunk);
      if (length < 0) {
        if (size < MESSAGE_PREFIX) return;
        const head = chunks === undefined ? first : Buffer.concat(chunks, size);
        if (chunks !== undefined) {
          chunks = undefined;
          first = head;
        }
        const flag = head[0]!;
        if (flag !== 0) {
          return refuse(
            flag === 1 ? GrpcStatus.UNIMPLEMENTED : GrpcStatus.INTERNAL,
            flag === 1
              ? `compressed messages are not supported (grpc-encoding ${String(headers['grpc-encoding'] ?? 'unset')}): send them uncompressed`
              : `invalid compressed flag ${flag}`,
          );
        }
        length = head.readUInt32BE(1);
        if (length > maxMessageBytes) {
          return refuse(
            GrpcStatus.RESOURCE_EXHAUSTED,
            `the request message is larger than the maximum (${length} vs ${maxMessageBytes} bytes)`,
          );
        }
      }
      const need = MESSAGE_PREFIX + length;
      if (size < need) return;
      if (size > need) return refuse(GrpcStatus.INTERNAL, 'more than one request message in a unary call');
      const whole = chunks === undefined ? first : Buffer.concat(chunks, size);
      chunks = undefined;
      first = undefined;
      complete(whole.subarray(MESSAGE_PREFIX, need));
    });
    stream.on('end', () => {
      if (!answered) {
        refuse(
          GrpcStatus.INTERNAL,
          size === 0 ? 'the request carried no message' : 'the request ended inside its message',
        );
      }
    });
  });

  /** Runs a server-streaming call: headers now, messages as the method writes them, trailers at its end. */
  const serverStream = (stream: ServerHttp2Stream, method: ServerStreamMethod, message: Buffer): void => {
    let ended = false;
    let closeFn: (() => void) | undefined;
    let trailers: Record<string, string> = { ...OK_TRAILERS };
    const s: ServerStream = {
      write(frame) {
        if (ended || stream.destroyed || stream.closed) return;
        frame[0] = 0;
        frame.writeUInt32BE(frame.length - MESSAGE_PREFIX, 1);
        stream.write(frame);
      },
      end(code, msg = '') {
        if (ended) return;
        ended = true;
        trailers = { 'grpc-status': String(code) };
        if (msg !== '') trailers['grpc-message'] = percentEncode(msg);
        method.done?.(code);
        if (!stream.destroyed && !stream.closed) stream.end();
      },
      onClose(fn) {
        closeFn = fn;
      },
    };
    open.add(s);
    stream.once('close', () => {
      open.delete(s);
      ended = true;
      closeFn?.();
    });
    try {
      stream.respond(OK_HEADERS, RESPOND_MESSAGES);
      stream.on('wantTrailers', () => {
        try {
          stream.sendTrailers(trailers);
        } catch {
          // reset by the client meanwhile
        }
      });
    } catch {
      return;
    }
    const refused = method.open(message, s);
    if (refused !== undefined) s.end(refused.code, refused.message);
  };

  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  }).catch((err: NodeJS.ErrnoException) => {
    clearInterval(sweep);
    const hostPort = opts.host.includes(':') ? `[${opts.host}]:${opts.port}` : `${opts.host}:${opts.port}`;
    throw new Error(`cannot listen on ${hostPort} (gRPC): ${err.code ?? err.message}`);
  });
  server.on('error', (err) => opts.onSessionError?.(err));

  let closing: Promise<void> | undefined;
  const close = (graceMs: number): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      stopping = true;
      clearInterval(sweep);
      for (const s of [...open]) s.end(GrpcStatus.UNAVAILABLE, 'the server is stopping');
      const timer = setTimeout(() => {
        for (const session of sessions) session.destroy();
      }, graceMs);
      server.close(() => {
        clearTimeout(timer);
        resolve();
      });
      for (const session of sessions) session.close();
    });
    return closing;
  };

  return { port, close };
}
