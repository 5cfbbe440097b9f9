/**
 * The fallback transport of the gRPC server: the same calls as
 * grpc-transport.ts on node:http2 (nghttp2 inside node) instead of
 * ratemesh's own HTTP/2 (h2.ts). About three times the CPU per call
 * (docs/envoy-transport.md), and nghttp2's own caps, with ours where node
 * lets them be kept (connections, SETTINGS entries, preface, idle and stall
 * timeouts: test/envoy/transport-timeouts.test.ts); chosen with
 * `transport: 'node:http2'` in {@link GrpcServerOptions} or
 * RATEMESH_GRPC_TRANSPORT=node:http2, for a client our HTTP/2 would not
 * serve. What the two answer is the same (test/envoy/grpc-transport.test.ts
 * runs against both); the request reading, the sweep of waiting calls and the
 * listening and closing are the same code (grpc-call.ts).
 */
import http2, {
  type Http2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import {
  Calls,
  type GrpcServer,
  isGrpcContentType,
  listenGrpc,
  prefixed,
  type ReaderConfig,
  RequestReader,
  type ServerStream,
  SWEEP_MS,
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
/**
 * How long a session told to close at its idle timeout (GOAWAY) has to end
 * before it is destroyed: node's close() waits for nghttp2's streams,
 * a header block left open or a reply stalled on a zero window included,
 * which would hold it for ever.
 */
export const CLOSE_GRACE_MS = 1000;

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
  // replies sent and not yet done (a zero window, a peer that does not read), by the sweep they began in
  const replying = new Map<ServerHttp2Stream, number>();
  const stallSweeps = Math.max(1, Math.ceil(limits.stallTimeoutMs / SWEEP_MS));
  function forgetReply(this: ServerHttp2Stream): void {
    replying.delete(this);
  }
  const sweepReplies = (): void => {
    if (replying.size === 0) return;
    for (const [stream, epoch] of replying) {
      if (isClosed(stream)) replying.delete(stream);
      else if (calls.epoch - epoch > stallSweeps) {
        replying.delete(stream);
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }
    }
  };
  const calls = new Calls<ServerHttp2Stream>(opts.requestTimeoutMs, isClosed, sweepReplies);
  const { waiting, open } = calls;
  // sessions with a server stream open (Health/Watch): how many, and the idle handler if the
  // idle timeout came meanwhile (node calls it once: it is set again when the last one ends)
  const watching = new Map<Http2Session, { streams: number; idle?: () => void }>();

  server.on('session', (session: ServerHttp2Session) => {
    sessions.add(session);
    // the client's preface and first SETTINGS within prefaceTimeoutMs, or the socket goes
    // (node's unknownProtocolTimeout does not apply to cleartext HTTP/2)
    const preface = setTimeout(() => session.destroy(), limits.prefaceTimeoutMs);
    preface.unref();
    session.once('remoteSettings', () => clearTimeout(preface));
    // idle: no frame for idleTimeoutMs (node's session timeout counts every frame, whichever
    // stream); a session with a server stream open is left be. Asked to close (GOAWAY NO_ERROR),
    // it is destroyed CLOSE_GRACE_MS later if still there.
    const onIdle = (): void => {
      const w = watching.get(session);
      if (w !== undefined) {
        w.idle = onIdle;
        return;
      }
      session.close();
      setTimeout(() => session.destroy(), CLOSE_GRACE_MS).unref();
    };
    session.setTimeout(limits.idleTimeoutMs, onIdle);
    session.once('close', () => {
      clearTimeout(preface);
      sessions.delete(session);
    });
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
            // reset (CANCEL) by the sweep if not done within stallTimeoutMs
            replying.set(stream, calls.epoch);
            stream.on('close', forgetReply);
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
        // buffered past the stream's high-water mark: reset unless drained within stallTimeoutMs
        if (!stream.write(prefixed(frame)) && !replying.has(stream)) replying.set(stream, calls.epoch);
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
    const session = stream.session;
    if (session !== undefined) {
      const w = watching.get(session);
      if (w === undefined) watching.set(session, { streams: 1 });
      else w.streams++;
    }
    stream.on('drain', forgetReply);
    stream.once('close', () => {
      open.delete(s);
      const w = session === undefined ? undefined : watching.get(session);
      if (w !== undefined && --w.streams === 0) {
        watching.delete(session!);
        if (w.idle !== undefined && !session!.closed && !session!.destroyed)
          session!.setTimeout(limits.idleTimeoutMs, w.idle);
      }
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
