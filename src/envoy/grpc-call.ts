/**
 * What the two gRPC transports share, whatever HTTP/2 is under them
 * (grpc-transport.ts on h2.ts, grpc-transport-node.ts on node:http2): the
 * content type of a call, a unary request read from its DATA and checked as
 * it comes, the calls waiting for their request and the sweep that times
 * them out, the server streams open, and listening and closing.
 */
import type net from 'node:net';
import { GrpcStatus } from './grpc-status.js';

/** Bytes before each message: the compressed flag and the length. */
export const MESSAGE_PREFIX = 5;

/** How often waiting requests are checked against their deadlines (and h2.ts connections ticked). */
export const SWEEP_MS = 250;

/** The open reply of a server-streaming call. */
export interface ServerStream {
  /** Sends a message (with {@link MESSAGE_PREFIX} bytes reserved before it). */
  write(frame: Buffer): void;
  /** Ends the call with this status. */
  end(code: number, message?: string): void;
  /** Called once when the stream closes, whoever closed it. */
  onClose(fn: () => void): void;
}

/** A gRPC content type: `application/grpc`, or it with a `+format` or `;parameters`. */
export function isGrpcContentType(ct: unknown): boolean {
  return (
    typeof ct === 'string' &&
    (ct === 'application/grpc' || ct.startsWith('application/grpc+') || ct.startsWith('application/grpc;'))
  );
}

/** Fills in the prefix of a message built with {@link MESSAGE_PREFIX} bytes reserved: not compressed, its length. */
export function prefixed(frame: Buffer): Buffer {
  frame[0] = 0;
  frame.writeUInt32BE(frame.length - MESSAGE_PREFIX, 1);
  return frame;
}

/** What a server's {@link RequestReader}s share. */
export interface ReaderConfig<H> {
  /** Largest request message, bytes; a larger one is refused RESOURCE_EXHAUSTED as soon as its length is in. */
  maxMessageBytes: number;
  /** The request's `grpc-encoding`, for the refusal of a compressed message. */
  encodingOf(head: H): string | undefined;
  /** Copy what is kept past a chunk (the chunks are views of a larger read buffer that must not be kept alive). */
  copy: boolean;
}

/**
 * A unary call waiting for its request: the one message of its DATA,
 * gathered as it comes and checked as soon as its prefix is in (not
 * compressed, at most `maxMessageBytes`, no more after it). Refusals go to
 * `refuse`, as the sweep's timeouts do.
 */
export class RequestReader<S, H> {
  private chunks: Buffer[] | undefined;
  private first: Buffer | undefined;
  private size = 0;
  private length = -1;

  constructor(
    private readonly config: ReaderConfig<H>,
    readonly stream: S,
    private readonly head: H,
    /** The sweep count when it started. */
    readonly epoch: number,
    /** performance.now() past which the client no longer waits; Infinity without grpc-timeout. */
    readonly deadline: number,
    /** Answers the call with a status. */
    readonly refuse: (code: number, message: string) => void,
  ) {}

  /**
   * Takes a chunk of the request's DATA: the message (the bytes after the
   * prefix) once it is whole; undefined while more is to come, or when the
   * request was refused (`refuse` called).
   */
  push(chunk: Buffer): Buffer | undefined {
    if (chunk.length === 0) return undefined;
    this.size += chunk.length;
    const size = this.size;
    if (this.first === undefined) this.first = chunk;
    else if (this.chunks === undefined) this.chunks = [this.first, chunk];
    else this.chunks.push(chunk);
    if (this.length < 0) {
      if (size < MESSAGE_PREFIX) return this.keep(chunk);
      const start = this.chunks === undefined ? this.first : Buffer.concat(this.chunks, size);
      if (this.chunks !== undefined) {
        this.chunks = undefined;
        this.first = start;
      }
      const flag = start[0]!;
      if (flag !== 0) {
        this.refuse(
          flag === 1 ? GrpcStatus.UNIMPLEMENTED : GrpcStatus.INTERNAL,
          flag === 1
            ? `compressed messages are not supported (grpc-encoding ${this.config.encodingOf(this.head) ?? 'unset'}): send them uncompressed`
            : `invalid compressed flag ${flag}`,
        );
        return undefined;
      }
      this.length = start.readUInt32BE(1);
      if (this.length > this.config.maxMessageBytes) {
        this.refuse(
          GrpcStatus.RESOURCE_EXHAUSTED,
          `the request message is larger than the maximum (${this.length} vs ${this.config.maxMessageBytes} bytes)`,
        );
        return undefined;
      }
    }
    const need = MESSAGE_PREFIX + this.length;
    if (size > need) {
      this.refuse(GrpcStatus.INTERNAL, 'more than one request message in a unary call');
      return undefined;
    }
    if (size < need) return this.keep(chunk);
    const whole = this.chunks === undefined ? this.first : Buffer.concat(this.chunks, size);
    this.chunks = undefined;
    this.first = undefined;
    return whole.subarray(MESSAGE_PREFIX, need);
  }

  /** The request ended before its message was whole: refused. */
  ended(): void {
    this.refuse(
      GrpcStatus.INTERNAL,
      this.size === 0 ? 'the request carried no message' : 'the request ended inside its message',
    );
  }

  /** Keeps what was read past this chunk: a copy when the config says so, not a view of the read buffer. */
  private keep(chunk: Buffer): undefined {
    if (this.config.copy) {
      if (this.chunks === undefined) this.first = Buffer.from(this.first!);
      else this.chunks[this.chunks.length - 1] = Buffer.from(chunk);
    }
    return undefined;
  }
}

/**
 * A server's calls: those waiting for their request (timed out by the sweep,
 * every {@link SWEEP_MS}), the server streams open, and whether it is
 * stopping.
 */
export class Calls<S> {
  readonly waiting = new Set<RequestReader<S, unknown>>();
  readonly open = new Set<ServerStream>();
  stopping = false;
  /** Sweeps so far. */
  epoch = 0;
  private readonly sweepEpochs: number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly requestTimeoutMs: number,
    /** Whether a stream is gone (its waiting call is then dropped). */
    private readonly isClosed: (stream: S) => boolean,
    /** Run at every sweep, before the waiting calls are looked at. */
    onSweep?: () => void,
  ) {
    this.sweepEpochs = Math.max(1, Math.ceil(requestTimeoutMs / SWEEP_MS));
    this.timer = setInterval(() => {
      this.epoch++;
      onSweep?.();
      this.sweep();
    }, SWEEP_MS);
    this.timer.unref();
  }

  private sweep(): void {
    if (this.waiting.size === 0) return;
    const now = performance.now();
    for (const w of this.waiting) {
      if (this.isClosed(w.stream)) this.waiting.delete(w);
      else if (now >= w.deadline)
        w.refuse(GrpcStatus.DEADLINE_EXCEEDED, 'the deadline passed before the request arrived');
      else if (this.epoch - w.epoch > this.sweepEpochs)
        w.refuse(GrpcStatus.DEADLINE_EXCEEDED, `no complete request within ${this.requestTimeoutMs} ms`);
    }
  }

  /** Stops the sweep and takes no more calls; the server streams open are ended UNAVAILABLE. */
  stop(): void {
    this.stopping = true;
    clearInterval(this.timer);
    for (const s of [...this.open]) s.end(GrpcStatus.UNAVAILABLE, 'the server is stopping');
  }
}

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

/**
 * Listens on `host:port` (a failure: an error naming the address, the
 * sweep stopped) and returns the server with its graceful close: the
 * `connections` open are asked to finish (`shutdown`: GOAWAY, running calls
 * may end), and destroyed after `graceMs`.
 */
export async function listenGrpc<S, C extends { destroy(): void }>(
  server: net.Server,
  opts: { host: string; port: number; onSessionError?(err: Error): void },
  calls: Calls<S>,
  connections: Iterable<C>,
  shutdown: (connection: C) => void,
): Promise<GrpcServer> {
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve((server.address() as net.AddressInfo).port);
    });
  }).catch((err: NodeJS.ErrnoException) => {
    calls.stop();
    const hostPort = opts.host.includes(':') ? `[${opts.host}]:${opts.port}` : `${opts.host}:${opts.port}`;
    throw new Error(`cannot listen on ${hostPort} (gRPC): ${err.code ?? err.message}`);
  });
  server.on('error', (err) => opts.onSessionError?.(err));

  let closing: Promise<void> | undefined;
  const close = (graceMs: number): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      calls.stop();
      const timer = setTimeout(() => {
        for (const c of connections) c.destroy();
      }, graceMs);
      server.close(() => {
        clearTimeout(timer);
        resolve();
      });
      for (const c of connections) shutdown(c);
    });
    return closing;
  };

  return { port, close };
}
