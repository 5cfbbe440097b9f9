/**
 * gRPC over HTTP/2 (h2.ts), the little the RLS server needs: unary and
 * server-streaming methods, uncompressed, plaintext (h2c with prior
 * knowledge, as Envoy and @grpc/grpc-js connect). A call is an HTTP/2 POST
 * to `/<service>/<method>` with `content-type: application/grpc`; its body
 * is messages framed as 1 byte compressed flag, 4 bytes big-endian length,
 * the message; the reply is `:status 200`, the framed messages, then the
 * trailers `grpc-status` and `grpc-message` (percent-encoded), or those in
 * the headers alone when there is no message ("trailers-only").
 *
 * Everything from the client is checked before use: the method, the
 * content type, the frame (one message for a unary call, not compressed, at
 * most `maxMessageBytes`, refused as soon as its length is read), the
 * `grpc-timeout` header. A call whose request has not fully arrived by its
 * deadline, or within `requestTimeoutMs`, is answered DEADLINE_EXCEEDED and
 * reset; one past its deadline when it arrives is not run. Streams the
 * client resets or cancels are dropped; no stream or connection error
 * reaches the process. The request reading, the sweep of waiting calls and
 * the listening and closing are grpc-call.ts's, shared with the node:http2
 * fallback (grpc-transport-node.ts).
 */
import net from 'node:net';
import {
  Calls,
  type GrpcServer,
  isGrpcContentType,
  listenGrpc,
  MESSAGE_PREFIX,
  prefixed,
  type ReaderConfig,
  RequestReader,
  type ServerStream,
} from './grpc-call.js';
import { GrpcStatus } from './grpc-status.js';
import {
  field,
  H2Connection,
  H2Error,
  type H2Limits,
  type H2Stream,
  h2Limits,
  type RequestHead,
} from './h2.js';
import { encodeHeaders } from './hpack.js';

export { type GrpcServer, MESSAGE_PREFIX, type ServerStream } from './grpc-call.js';

/** A method's answer: a reply message (with {@link MESSAGE_PREFIX} bytes reserved before it), or a status. */
export type Reply = { frame: Buffer } | { code: number; message: string };

/** A unary method: one request message, one reply. */
export interface UnaryMethod {
  kind: 'unary';
  /**
   * Answers the request message (the bytes after the prefix); should not throw. Synchronous, or
   * (owner placement, issue 27: a key asked of its owner on another node) a promise of the reply.
   */
  call(message: Buffer): Reply | Promise<Reply>;
  /** Told of the status each of this method's calls was answered with (the transport's own refusals too). */
  done?(code: number): void;
}

/** A server-streaming method: one request message, then messages until either side ends it. */
export interface ServerStreamMethod {
  kind: 'server-stream';
  /** Starts the call on `stream` (its headers sent), or ends it at once with the status returned. */
  open(message: Buffer, stream: ServerStream): { code: number; message: string } | undefined;
  done?(code: number): void;
}

export type Method = UnaryMethod | ServerStreamMethod;

/** Options of {@link startGrpcServer}. */
export interface GrpcServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Methods by path, `/<package.Service>/<Method>`. */
  methods: ReadonlyMap<string, Method>;
  /** Largest request message, bytes; a larger one gets RESOURCE_EXHAUSTED. */
  maxMessageBytes: number;
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: calls in flight on one connection. */
  maxConcurrentStreams: number;
  /** A request not fully arrived after this long (no deadline, or a longer one) is answered DEADLINE_EXCEEDED. */
  requestTimeoutMs: number;
  /** Told of connection-level errors (a client's bad HTTP/2, a reset socket): nothing to do but log them. */
  onSessionError?(err: Error): void;
  /** Connections open at once; one more is answered GOAWAY (ENHANCE_YOUR_CALM) and closed. Default {@link MAX_CONNECTIONS}. */
  maxConnections?: number;
  /** HTTP/2 caps and timeouts, each defaulting to H2_LIMITS (docs/envoy-transport.md). */
  limits?: Partial<H2Limits>;
  /**
   * `ratemesh` (default): ratemesh's own HTTP/2 (h2.ts); `node:http2`: the
   * fallback on node's nghttp2 (grpc-transport-node.ts). Default from
   * RATEMESH_GRPC_TRANSPORT when set.
   */
  transport?: GrpcTransport;
}

/** The HTTP/2 transports of the gRPC server: ratemesh's own (h2.ts), and the node:http2 fallback. */
export const GRPC_TRANSPORTS = ['ratemesh', 'node:http2'] as const;
/** The HTTP/2 under the gRPC server. */
export type GrpcTransport = (typeof GRPC_TRANSPORTS)[number];

/** Connections open at once, by default. */
export const MAX_CONNECTIONS = 4096;

/** Longest grpc-message sent, characters after encoding. */
const MAX_STATUS_MESSAGE = 1024;
/** SETTINGS_MAX_HEADER_LIST_SIZE we advertise and enforce. */
export const MAX_HEADER_LIST = 16 * 1024;

const OK_HEADERS = encodeHeaders([
  [':status', '200'],
  ['content-type', 'application/grpc'],
]);
const OK_TRAILERS = encodeHeaders([['grpc-status', '0']]);
/** Our SETTINGS (empty) and GOAWAY(last stream 0, ENHANCE_YOUR_CALM, "too many connections"). */
const TOO_MANY_CONNECTIONS = (() => {
  const debug = Buffer.from('too many connections', 'latin1');
  const out = Buffer.alloc(9 + 9 + 8 + debug.length);
  out[3] = 0x4; // SETTINGS, empty
  out.writeUIntBE(8 + debug.length, 9, 3);
  out[12] = 0x7; // GOAWAY
  out.writeUInt32BE(H2Error.ENHANCE_YOUR_CALM, 9 + 9 + 4);
  debug.copy(out, 9 + 9 + 8);
  return out;
})();

/**
 * gRPC's percent-encoding of `grpc-message`: bytes outside printable ASCII,
 * and `%`, as %XX of UTF-8; at most {@link MAX_STATUS_MESSAGE} characters
 * encoded (cut with `...`), well within any client's metadata limit.
 */
export function percentEncode(text: string): string {
  let out = '';
  for (const b of Buffer.from(text.slice(0, MAX_STATUS_MESSAGE), 'utf8')) {
    const piece =
      b >= 0x20 && b <= 0x7e && b !== 0x25
        ? String.fromCharCode(b)
        : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
    if (out.length + piece.length > MAX_STATUS_MESSAGE - 3) return `${out}...`;
    out += piece;
  }
  return text.length > MAX_STATUS_MESSAGE ? `${out}...` : out;
}

/** `grpc-timeout` (1 to 8 digits and a unit H M S m u n) in ms; undefined when malformed. */
export function parseTimeout(value: string): number | undefined {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (m === null) return undefined;
  const n = Number(m[1]);
  switch (m[2]) {
    case 'H':
      return n * 3_600_000;
    case 'M':
      return n * 60_000;
    case 'S':
      return n * 1000;
    case 'm':
      return n;
    case 'u':
      return n / 1000;
    default:
      return n / 1_000_000;
  }
}

/** The trailers of a status: grpc-status and grpc-message, with the headers first when `headers` (trailers-only). */
function statusBlock(code: number, message: string, headers: boolean): Buffer {
  const fields: [string, string][] = headers
    ? [
        [':status', '200'],
        ['content-type', 'application/grpc'],
      ]
    : [];
  fields.push(['grpc-status', String(code)]);
  if (message !== '') fields.push(['grpc-message', percentEncode(message)]);
  if (code === GrpcStatus.UNIMPLEMENTED) fields.push(['grpc-accept-encoding', 'identity']);
  return encodeHeaders(fields);
}

/** Answers with a status and no message, in the headers (trailers-only); resets a request still coming. */
function trailersOnly(stream: H2Stream, code: number, message: string): void {
  if (stream.closed || stream.headersSent) return;
  stream.respond(statusBlock(code, message, true), true);
  // the rest of the request is not wanted: RST_STREAM(NO_ERROR) after the status (RFC 9113 section 8.1)
  if (!stream.remoteEnded) stream.reset(H2Error.NO_ERROR);
}

const HTTP_STATUS = new Map<number, Buffer>(
  [405, 415].map((s) => [s, encodeHeaders([[':status', String(s)]])]),
);

/** Answers an HTTP request that is not a gRPC call (wrong method or content type). */
function notGrpc(stream: H2Stream, status: 405 | 415): void {
  stream.respond(HTTP_STATUS.get(status)!, true);
  if (!stream.remoteEnded) stream.reset(H2Error.NO_ERROR);
}

const grpcEncoding = (head: RequestHead): string | undefined => field(head.fields, 'grpc-encoding');
const isClosed = (stream: H2Stream): boolean => stream.closed;

/** The transport asked for: the option, else RATEMESH_GRPC_TRANSPORT, else `ratemesh`. */
export function grpcTransport(opts: Pick<GrpcServerOptions, 'transport'>): GrpcTransport {
  const t = opts.transport ?? process.env.RATEMESH_GRPC_TRANSPORT ?? 'ratemesh';
  if (t !== 'ratemesh' && t !== 'node:http2')
    throw new Error(`unknown gRPC transport ${JSON.stringify(t)} (ratemesh or node:http2)`);
  return t;
}

/** Starts a gRPC server serving `methods`, on the transport {@link grpcTransport} picks. */
export async function startGrpcServer(opts: GrpcServerOptions): Promise<GrpcServer> {
  if (grpcTransport(opts) === 'node:http2') {
    const { startNodeHttp2GrpcServer } = await import('./grpc-transport-node.js');
    return startNodeHttp2GrpcServer(opts);
  }
  const { methods } = opts;
  const limits = h2Limits(opts.limits);
  const maxConnections = opts.maxConnections ?? MAX_CONNECTIONS;
  if (!Number.isSafeInteger(maxConnections) || maxConnections <= 0)
    throw new RangeError(`maxConnections must be a positive integer, not ${maxConnections}`);
  const connections = new Set<H2Connection>();
  const reading: ReaderConfig<RequestHead> = {
    maxMessageBytes: opts.maxMessageBytes,
    encodingOf: grpcEncoding,
    // a chunk is a view of the connection's read buffer: what is kept past it is copied
    copy: true,
  };
  const calls = new Calls<H2Stream>(opts.requestTimeoutMs, isClosed, () => {
    for (const c of connections) {
      try {
        c.tick();
      } catch (err) {
        // a stream's abort handler that threw: that connection goes, the sweep and the process stay
        opts.onSessionError?.(err instanceof Error ? err : new Error(String(err)));
        c.destroy();
      }
    }
  });
  const { waiting, open } = calls;

  const onStream = (stream: H2Stream, head: RequestHead) => {
    if (head.method !== 'POST') return notGrpc(stream, 405);
    if (!isGrpcContentType(field(head.fields, 'content-type'))) return notGrpc(stream, 415);
    const method = methods.get(head.path);
    if (method === undefined)
      return trailersOnly(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${head.path.slice(0, 200)}`);
    const done = method.done;
    if (calls.stopping) {
      trailersOnly(stream, GrpcStatus.UNAVAILABLE, 'the server is stopping');
      done?.(GrpcStatus.UNAVAILABLE);
      return;
    }
    let deadline = Number.POSITIVE_INFINITY;
    const timeout = field(head.fields, 'grpc-timeout');
    if (timeout !== undefined) {
      const ms = parseTimeout(timeout);
      if (ms === undefined) {
        trailersOnly(
          stream,
          GrpcStatus.INTERNAL,
          `malformed grpc-timeout header ${JSON.stringify(timeout.slice(0, 40))}`,
        );
        done?.(GrpcStatus.INTERNAL);
        return;
      }
      deadline = performance.now() + ms;
    }

    let answered = false;

    const refuse = (code: number, message: string) => {
      if (answered) return;
      answered = true;
      waiting.delete(call);
      trailersOnly(stream, code, message);
      done?.(code);
    };
    const call = new RequestReader(reading, stream, head, calls.epoch, deadline, refuse);
    waiting.add(call);
    stream.onAbort = () => {
      answered = true;
      waiting.delete(call);
    };

    const complete = (message: Buffer) => {
      answered = true;
      waiting.delete(call);
      if (stream.closed) return;
      if (deadline !== Number.POSITIVE_INFINITY && performance.now() >= deadline) {
        trailersOnly(stream, GrpcStatus.DEADLINE_EXCEEDED, 'the deadline passed before the request arrived');
        done?.(GrpcStatus.DEADLINE_EXCEEDED);
        return;
      }
      if (method.kind === 'server-stream') return serverStream(stream, method, message);
      let pending: Reply | Promise<Reply>;
      try {
        pending = method.call(message);
      } catch {
        pending = { code: GrpcStatus.INTERNAL, message: 'internal error' };
      }
      // owner placement (issue 27): a reply that comes later is sent when it comes
      if (pending instanceof Promise) {
        void pending.then(
          (r) => (stream.closed ? undefined : reply(r)),
          () => (stream.closed ? undefined : reply({ code: GrpcStatus.INTERNAL, message: 'internal error' })),
        );
        return;
      }
      reply(pending);
    };

    const reply = (reply: Reply): void => {
      if ('frame' in reply) {
        stream.respond(OK_HEADERS, false);
        stream.write(prefixed(reply.frame));
        stream.end(OK_TRAILERS);
        done?.(GrpcStatus.OK);
      } else {
        trailersOnly(stream, reply.code, reply.message);
        done?.(reply.code);
      }
    };

    stream.onData = (chunk: Buffer, end: boolean) => {
      if (answered) return;
      const message = call.push(chunk);
      if (message !== undefined) complete(message);
      else if (end) call.ended();
    };
  };

  /** Runs a server-streaming call: headers now, messages as the method writes them, trailers at its end. */
  const serverStream = (stream: H2Stream, method: ServerStreamMethod, message: Buffer) => {
    let ended = false;
    let closeFn: (() => void) | undefined;
    const s: ServerStream = {
      write(frame) {
        if (ended || stream.closed) return;
        stream.write(prefixed(frame));
      },
      end(code, msg = '') {
        if (ended) return;
        ended = true;
        open.delete(s);
        method.done?.(code);
        stream.end(statusBlock(code, msg, false));
      },
      onClose(fn) {
        closeFn = fn;
      },
    };
    open.add(s);
    stream.onAbort = () => {
      ended = true;
      open.delete(s);
      closeFn?.();
    };
    stream.respond(OK_HEADERS, false);
    const refused = method.open(message, s);
    if (refused !== undefined) s.end(refused.code, refused.message);
  };

  const server = net.createServer({ noDelay: true }, (socket) => {
    if (calls.stopping) {
      socket.destroy();
      return;
    }
    if (connections.size >= maxConnections) {
      // over the cap: told so in HTTP/2 (a client sees GOAWAY, not a bare reset), then closed
      socket.on('error', () => {});
      socket.end(TOO_MANY_CONNECTIONS);
      socket.setTimeout(1000, () => socket.destroy());
      opts.onSessionError?.(new Error(`connection refused: ${maxConnections} connections open`));
      return;
    }
    const conn = new H2Connection(socket, {
      maxConcurrentStreams: opts.maxConcurrentStreams,
      maxHeaderListSize: MAX_HEADER_LIST,
      onStream,
      limits,
      ...(opts.onSessionError === undefined ? {} : { onError: opts.onSessionError }),
    });
    connections.add(conn);
    socket.once('close', () => connections.delete(conn));
  });

  return listenGrpc(server, opts, calls, connections, (c) => c.shutdown());
}
