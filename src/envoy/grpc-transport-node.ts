/**
 * The fallback transport of the gRPC server: the same calls as
 * grpc-transport.ts on node:http2 (nghttp2 inside node) instead of
 * ratemesh's own HTTP/2 (h2.ts). About twice the CPU per call
 * (docs/envoy-transport.md), and nghttp2's own caps; chosen with
 * `transport: 'node:http2'` in {@link GrpcServerOptions} or
 * RATEMESH_GRPC_TRANSPORT=node:http2, for a client our HTTP/2 would not
 * serve. What the two answer is the same (test/envoy/grpc-transport.test.ts
 * runs against both); the request reading, the sweep of waiting calls and the
 * listening and closing are the same code (grpc-call.ts).
 */
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import {
  Calls,
  type GrpcServer,
  isGrpcContentType,
  listenGrpc,
  prefixed,
  type ReaderConfig,
  RequestReader,
  type ServerStream,
} from './grpc-call.js';
import { GrpcStatus } from './grpc-status.js';
import {
  type GrpcServerOptions,
  MAX_CONNECTIONS,
  MAX_HEADER_LIST,
  parseTimeout,
  percentEncode,
  type Reply,
  type ServerStreamMethod,
} from './grpc-transport.js';
import { h2Limits } from './h2.js';

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

const grpcEncoding = (headers: IncomingHttpHeaders): string | undefined => {
  const e = headers['grpc-encoding'];
  return e === undefined ? undefined : String(e);
};
const isClosed = (stream: ServerHttp2Stream): boolean => stream.destroyed || stream.closed;

/** Starts a gRPC server on node:http2 serving `methods` (the fallback of startGrpcServer). */
export async function startNodeHttp2GrpcServer(opts: GrpcServerOptions): Promise<GrpcServer> {
  const { methods } = opts;
  const limits = h2Limits(opts.limits);
  const server = http2.createServer({
    settings: { maxConcurrentStreams: opts.maxConcurrentStreams, maxHeaderListSize: MAX_HEADER_LIST },
    // streams past the limit are refused by HTTP/2 itself (REFUSED_STREAM); a client that
    // keeps opening them is disconnected after this many (node's default, stated)
    maxSessionRejectedStreams: 100,
    maxSettings: limits.maxSettingsEntries,
    unknownProtocolTimeout: limits.prefaceTimeoutMs,
  });
  server.maxConnections = opts.maxConnections ?? MAX_CONNECTIONS;

  const sessions = new Set<ServerHttp2Session>();
  // node's chunks are its own: nothing to copy
  const reading: ReaderConfig<IncomingHttpHeaders> = {
    maxMessageBytes: opts.maxMessageBytes,
    encodingOf: grpcEncoding,
    copy: false,
  };
  const calls = new Calls<ServerHttp2Stream>(opts.requestTimeoutMs, isClosed);
  const { waiting, open } = calls;

  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    // a session with no activity for this long is closed (node's timeout counts any frame, not open streams)
    session.setTimeout(limits.idleTimeoutMs, () => session.close());
    session.once('close', () => sessions.delete(session));
    if (calls.stopping) session.close();
  });
  server.on('sessionError', (err: Error) => opts.onSessionError?.(err));

  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    stream.on('error', ignore);
    if (headers[':method'] !== 'POST') return notGrpc(stream, 405);
    if (!isGrpcContentType(headers['content-type'])) return notGrpc(stream, 415);
    const path = headers[':path'];
    const method = typeof path === 'string' ? methods.get(path) : undefined;
    if (method === undefined) {
      trailersOnly(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${String(path).slice(0, 200)}`);
      stream.close(http2.constants.NGHTTP2_NO_ERROR);
      return;
    }
    const done = method.done;
    if (calls.stopping) {
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
    const call = new RequestReader(reading, stream, headers, calls.epoch, deadline, refuse);
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
            const frame = prefixed(reply.frame);
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
      const message = call.push(chunk);
      if (message !== undefined) complete(message);
    });
    stream.on('end', () => {
      if (!answered) call.ended();
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
        stream.write(prefixed(frame));
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

  return listenGrpc(server, opts, calls, sessions, (session) => session.close());
}
