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
 * reaches the process.
 */
import net from 'node:net';
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

/** Bytes before each message: the compressed flag and the length. */
export const MESSAGE_PREFIX = 5;

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

/** The open reply of a server-streaming call. */
export interface ServerStream {
  /** Sends a message (with {@link MESSAGE_PREFIX} bytes reserved before it). */
  write(frame: Buffer): void;
  /** Ends the call with this status. */
  end(code: number, message?: string): void;
  /** Called once when the stream closes, whoever closed it. */
  onClose(fn: () => void): void;
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

/** A running gRPC server. */
export interface GrpcServer {
  /** The bound port (the real one when 0 was asked). */
  readonly port: number;
  /**
   * Stops taking connections and calls (GOAWAY), ends server streams with
   * UNAVAILABLE, lets running calls finish for up to `graceMs`, then closes
   * the connections left.
   */
  close(graceMs: number): Promise<void>;
}

/** How often waiting requests are checked against their deadlines, and connection budgets renewed. */
const SWEEP_MS = 250;
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

/** A call waiting for its request message. */
interface Waiting {
  stream: H2Stream;
  /** The sweep count when it started. */
  epoch: number;
  /** performance.now() past which the client no longer waits; Infinity without grpc-timeout. */
  deadline: number;
  refuse(code: number, message: string): void;
}

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
  const { methods, maxMessageBytes } = opts;
  const limits = h2Limits(opts.limits);
  const maxConnections = opts.maxConnections ?? MAX_CONNECTIONS;
  if (!Number.isSafeInteger(maxConnections) || maxConnections <= 0)
    throw new RangeError(`maxConnections must be a positive integer, not ${maxConnections}`);
  const connections = new Set<H2Connection>();
  const waiting = new Set<Waiting>();
  const open = new Set<ServerStream>();
  let stopping = false;
  let epoch = 0;
  const sweepEpochs = Math.max(1, Math.ceil(opts.requestTimeoutMs / SWEEP_MS));

  const sweep = setInterval(() => {
    epoch++;
    for (const c of connections) {
      try {
        c.tick();
      } catch (err) {
        // a stream's abort handler that threw: that connection goes, the sweep and the process stay
        opts.onSessionError?.(err instanceof Error ? err : new Error(String(err)));
        c.destroy();
      }
    }
    if (waiting.size === 0) return;
    const now = performance.now();
    for (const w of waiting) {
      if (w.stream.closed) waiting.delete(w);
      else if (now >= w.deadline)
        w.refuse(GrpcStatus.DEADLINE_EXCEEDED, 'the deadline passed before the request arrived');
      else if (epoch - w.epoch > sweepEpochs)
        w.refuse(GrpcStatus.DEADLINE_EXCEEDED, `no complete request within ${opts.requestTimeoutMs} ms`);
    }
  }, SWEEP_MS);
  sweep.unref();

  const onStream = (stream: H2Stream, head: RequestHead) => {
    if (head.method !== 'POST') return notGrpc(stream, 405);
    const ct = field(head.fields, 'content-type');
    if (
      ct === undefined ||
      !(ct === 'application/grpc' || ct.startsWith('application/grpc+') || ct.startsWith('application/grpc;'))
    ) {
      return notGrpc(stream, 415);
    }
    const method = methods.get(head.path);
    if (method === undefined)
      return trailersOnly(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${head.path.slice(0, 200)}`);
    const done = method.done;
    if (stopping) {
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

    let chunks: Buffer[] | undefined;
    let first: Buffer | undefined;
    let size = 0;
    let length = -1;
    let answered = false;

    const refuse = (code: number, message: string) => {
      if (answered) return;
      answered = true;
      waiting.delete(call);
      trailersOnly(stream, code, message);
      done?.(code);
    };
    const call: Waiting = { stream, epoch, deadline, refuse };
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
        const frame = reply.frame;
        frame[0] = 0;
        frame.writeUInt32BE(frame.length - MESSAGE_PREFIX, 1);
        stream.respond(OK_HEADERS, false);
        stream.write(frame);
        stream.end(OK_TRAILERS);
        done?.(GrpcStatus.OK);
      } else {
        trailersOnly(stream, reply.code, reply.message);
        done?.(reply.code);
      }
    };

    stream.onData = (chunk: Buffer, end: boolean) => {
      if (answered) return;
      if (chunk.length > 0) {
        size += chunk.length;
        if (first === undefined) first = chunk;
        else if (chunks === undefined) chunks = [first, chunk];
        else chunks.push(chunk);
        if (length < 0 && size >= MESSAGE_PREFIX) {
          const start = chunks === undefined ? first : Buffer.concat(chunks, size);
          if (chunks !== undefined) {
            chunks = undefined;
            first = start;
          }
          const flag = start[0]!;
          if (flag !== 0) {
            return refuse(
              flag === 1 ? GrpcStatus.UNIMPLEMENTED : GrpcStatus.INTERNAL,
              flag === 1
                ? `compressed messages are not supported (grpc-encoding ${field(head.fields, 'grpc-encoding') ?? 'unset'}): send them uncompressed`
                : `invalid compressed flag ${flag}`,
            );
          }
          length = start.readUInt32BE(1);
          if (length > maxMessageBytes) {
            return refuse(
              GrpcStatus.RESOURCE_EXHAUSTED,
              `the request message is larger than the maximum (${length} vs ${maxMessageBytes} bytes)`,
            );
          }
        }
        if (length >= 0) {
          const need = MESSAGE_PREFIX + length;
          if (size > need)
            return refuse(GrpcStatus.INTERNAL, 'more than one request message in a unary call');
          if (size === need) {
            const whole = chunks === undefined ? first! : Buffer.concat(chunks, size);
            chunks = undefined;
            first = undefined;
            return complete(whole.subarray(MESSAGE_PREFIX, need));
          }
        }
      }
      if (end) {
        refuse(
          GrpcStatus.INTERNAL,
          size === 0 ? 'the request carried no message' : 'the request ended inside its message',
        );
      } else if (chunk.length > 0) {
        // kept past this read: a copy, not a view that would keep the connection's whole read buffer alive
        if (chunks === undefined) first = Buffer.from(first!);
        else chunks[chunks.length - 1] = Buffer.from(chunk);
      }
    };
  };

  /** Runs a server-streaming call: headers now, messages as the method writes them, trailers at its end. */
  const serverStream = (stream: H2Stream, method: ServerStreamMethod, message: Buffer) => {
    let ended = false;
    let closeFn: (() => void) | undefined;
    const s: ServerStream = {
      write(frame) {
        if (ended || stream.closed) return;
        frame[0] = 0;
        frame.writeUInt32BE(frame.length - MESSAGE_PREFIX, 1);
        stream.write(frame);
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
    if (stopping) {
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

  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve((server.address() as net.AddressInfo).port);
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
        for (const c of connections) c.destroy();
      }, graceMs);
      server.close(() => {
        clearTimeout(timer);
        resolve();
      });
      for (const c of connections) c.shutdown();
    });
    return closing;
  };

  return { port, close };
}
