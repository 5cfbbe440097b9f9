/**
 * The server side of HTTP/2 (RFC 9113), cleartext with prior knowledge (h2c,
 * as Envoy and @grpc/grpc-js connect to a gRPC service), as much as a gRPC
 * server needs: streams opened by the client, their header blocks (HPACK,
 * hpack.ts) and data, flow control both ways, SETTINGS, PING, RST_STREAM,
 * WINDOW_UPDATE, GOAWAY. No server push, no priorities (PRIORITY frames are
 * read and ignored), no upgrade from HTTP/1.1, no TLS.
 *
 * Why not node:http2: per call it costs about 1.5 times node:http's CPU (an
 * Http2Stream is a full Duplex with its events, every header list goes
 * through an object and back, trailers wait for a setImmediate), and the RLS
 * server's whole point is a decision cheaper than the HTTP check API's. Here a
 * call is a few frames parsed in place, one header block decoded, and the
 * reply's frames written with the others of the same read in one write.
 *
 * Every byte comes from the network and is checked before use: frame sizes
 * (at most 16 KiB, so at most one frame is ever buffered), stream ids and
 * states, padding, windows (both directions, overflow included), settings
 * values, header blocks (their total size, the HPACK rules, the header list
 * size, pseudo-header rules). A connection error sends GOAWAY and closes; a
 * stream error resets that stream only. Frames that cost work without doing
 * any (PING, SETTINGS, PRIORITY, empty DATA, unknown types, resets) have a
 * budget per {@link H2Connection.tick}; a connection past it is closed with
 * ENHANCE_YOUR_CALM, and one whose peer stops reading our replies is dropped.
 */
import type { Socket } from 'node:net';
import { HpackDecoder, HpackError } from './hpack.js';

/** Frame types. */
const DATA = 0x0;
const HEADERS = 0x1;
const PRIORITY = 0x2;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const PUSH_PROMISE = 0x5;
const PING = 0x6;
const GOAWAY = 0x7;
const WINDOW_UPDATE = 0x8;
const CONTINUATION = 0x9;

/** Flags. */
const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY_FLAG = 0x20;

/** Error codes (RFC 9113 section 7). */
export const H2Error = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** Our SETTINGS_MAX_FRAME_SIZE (HTTP/2's default and least). */
const MAX_FRAME = 16_384;
/** HTTP/2's initial window, both directions, until SETTINGS say otherwise. */
const DEFAULT_WINDOW = 65_535;
/** What we open the connection's receive window to at once, so that many small calls flow without waiting. */
const CONNECTION_WINDOW = 1 << 20;
const MAX_WINDOW = 2 ** 31 - 1;
/** Largest header block, all its frames together (far above any header list we accept). */
const MAX_HEADER_BLOCK = 64 * 1024;
/** Streams we reset whose late frames are ignored, and streams the peer closed whose late frames are its error. */
const CLOSED_MEMORY = 128;

/**
 * The caps and timeouts of a connection, after nghttp2's (its
 * `nghttp2_option` defaults where it has one): every state a peer can leave
 * half-done has a timeout, every frame that costs work counts against a
 * budget. Timeouts are checked on {@link H2Connection.tick}, so they hold to
 * within one tick.
 */
export interface H2Limits {
  /** CONTINUATION frames after one HEADERS (nghttp2: 8); past it the connection goes (ENHANCE_YOUR_CALM). */
  maxContinuations: number;
  /** Entries in one SETTINGS frame (nghttp2: 32); past it ENHANCE_YOUR_CALM. */
  maxSettingsEntries: number;
  /** Frames that cost work without doing any, per tick (PING, SETTINGS, PRIORITY, resets, empty DATA and fragments, unknown types). */
  nuisancePerTick: number;
  /**
   * HEADERS and CONTINUATION frames per tick, whatever they carry (a ceiling on
   * calls per connection: 80,000/s at the gRPC server's 250 ms tick); besides,
   * every CONTINUATION and every header block that opens no stream is a nuisance.
   */
  headerFramesPerTick: number;
  /** The client's preface and first SETTINGS must be in within this. */
  prefaceTimeoutMs: number;
  /** A frame begun (its bytes partly in), or a header block begun (HEADERS without END_HEADERS), must be whole within this. */
  frameTimeoutMs: number;
  /** A connection with no stream open for this long is closed (GOAWAY NO_ERROR: a gRPC client reconnects when it needs to). */
  idleTimeoutMs: number;
  /** A stream whose reply waits for the peer's window this long is reset (CANCEL); a socket whose writes make no progress this long is closed. */
  stallTimeoutMs: number;
  /** Replies the peer has not read that we keep before dropping the connection, bytes. */
  maxUnreadBytes: number;
}

/** The defaults of {@link H2Limits}. */
export const H2_LIMITS: Readonly<H2Limits> = {
  maxContinuations: 8,
  maxSettingsEntries: 32,
  nuisancePerTick: 2500,
  headerFramesPerTick: 20_000,
  prefaceTimeoutMs: 10_000,
  frameTimeoutMs: 10_000,
  idleTimeoutMs: 300_000,
  stallTimeoutMs: 30_000,
  maxUnreadBytes: 1024 * 1024,
};

/** Checks limits given in part: every value a positive integer; the rest from {@link H2_LIMITS}. */
export function h2Limits(partial: Partial<H2Limits> = {}): H2Limits {
  const out = { ...H2_LIMITS, ...partial };
  for (const [k, v] of Object.entries(out)) {
    if (!Number.isSafeInteger(v) || v <= 0)
      throw new RangeError(`HTTP/2 limit ${k} must be a positive integer, not ${v}`);
  }
  return out;
}

/** The request's pseudo-header fields, and all its fields as `[name, value, ...]`. */
export interface RequestHead {
  method: string;
  path: string;
  fields: string[];
  /** The content-length field's value, -1 without one (the DATA must then add up to it). */
  contentLength: number;
}

/** Options of {@link H2Connection}. */
export interface H2Options {
  /** SETTINGS_MAX_CONCURRENT_STREAMS: a stream past it is refused (REFUSED_STREAM, safe to retry). */
  maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE; a request over it is reset. */
  maxHeaderListSize: number;
  /** A stream opened with a valid request head: set its `onData` / `onAbort` now. */
  onStream(stream: H2Stream, head: RequestHead): void;
  /** Told why a connection failed (for a debug log). */
  onError?(err: Error): void;
  /** Caps and timeouts (checked: {@link h2Limits}). */
  limits?: H2Limits;
  /** The clock of the timeouts, ms (default performance.now); tests pass their own. */
  clock?: () => number;
}

const EMPTY = Buffer.alloc(0);
/** An HPACK dynamic table size update to 0. */
const TABLE_SIZE_ZERO = Buffer.from([0x20]);

/** The value of the first field named `name` (lower case), or undefined. */
export function field(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

/** A frame's 9-byte header followed by its payload, as one buffer. */
function frame(type: number, flags: number, id: number, payload: Buffer): Buffer {
  const out = Buffer.allocUnsafe(9 + payload.length);
  out[0] = payload.length >>> 16;
  out[1] = (payload.length >>> 8) & 0xff;
  out[2] = payload.length & 0xff;
  out[3] = type;
  out[4] = flags;
  out.writeUInt32BE(id, 5);
  payload.copy(out, 9);
  return out;
}

function u32(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(v, 0);
  return b;
}

/** One request/response exchange. */
export class H2Stream {
  /** Each DATA payload as it arrives; `end` on the last (END_STREAM). */
  onData: ((chunk: Buffer, end: boolean) => void) | undefined;
  /** The stream ended without completing: the peer reset it, or the connection went. */
  onAbort: (() => void) | undefined;
  /** The peer sent END_STREAM. */
  remoteEnded = false;
  /** We sent END_STREAM (or it waits behind flow control). */
  localEnded = false;
  /** Gone from the connection: ended both ways, or reset. */
  closed = false;
  headersSent = false;
  /** How much DATA we may send (the peer's window for it). */
  sendWindow: number;
  /** How much DATA the peer may still send us. */
  recvWindow = DEFAULT_WINDOW;
  recvUnacked = 0;
  /** The request's content-length (-1: none), and the DATA bytes received so far. */
  contentLength = -1;
  received = 0;
  /** The connection's clock when the reply began to wait for window. */
  blockedSince = 0;
  /** DATA waiting for window, then the trailers' block. */
  private pending: Buffer[] | undefined;
  private pendingTrailers: Buffer | undefined;

  constructor(
    private readonly conn: H2Connection,
    readonly id: number,
    sendWindow: number,
  ) {
    this.sendWindow = sendWindow;
  }

  /** Sends the response headers (a block from {@link encodeHeaders}); `endStream` when there is nothing else. */
  respond(block: Buffer, endStream: boolean): void {
    if (this.closed || this.headersSent) return;
    this.headersSent = true;
    this.conn.sendHeaders(this.id, block, endStream);
    if (endStream) {
      this.localEnded = true;
      this.maybeClose();
    }
  }

  /** Sends DATA, as the windows allow (the rest waits for WINDOW_UPDATE). */
  write(data: Buffer): void {
    if (this.closed || this.localEnded || data.length === 0) return;
    if (this.pending !== undefined) this.pending.push(data);
    else {
      const rest = this.conn.sendData(this, data);
      if (rest !== undefined) this.block([rest]);
    }
  }

  /** Ends the response with trailers (a header block), after any DATA still waiting. */
  end(trailers: Buffer): void {
    if (this.closed || this.localEnded) return;
    this.localEnded = true;
    if (this.pending !== undefined) this.pendingTrailers = trailers;
    else {
      this.conn.sendHeaders(this.id, trailers, true);
      this.maybeClose();
    }
  }

  /** Resets the stream (RST_STREAM with `code`); nothing more is sent or delivered. */
  reset(code: number): void {
    if (this.closed) return;
    this.conn.sendFrame(frame(RST_STREAM, 0, this.id, u32(code)));
    this.close(true);
  }

  /** Sends what waited for window, as far as it now goes. */
  flushPending(): void {
    const queue = this.pending;
    if (queue === undefined || this.closed) return;
    while (queue.length > 0) {
      const rest = this.conn.sendData(this, queue[0]!);
      if (rest !== undefined) {
        queue[0] = rest;
        return;
      }
      queue.shift();
    }
    this.pending = undefined;
    this.conn.unblock(this);
    if (this.pendingTrailers !== undefined) {
      const t = this.pendingTrailers;
      this.pendingTrailers = undefined;
      this.conn.sendHeaders(this.id, t, true);
      this.maybeClose();
    }
  }

  /** Data arrived (the connection checked its window). */
  deliver(chunk: Buffer, end: boolean): void {
    if (end) this.remoteEnded = true;
    this.onData?.(chunk, end);
    if (end) this.maybeClose();
  }

  /** Closed by the peer (RST_STREAM) or with the connection. */
  abort(): void {
    if (this.closed) return;
    this.close(false);
    this.onAbort?.();
  }

  private block(queue: Buffer[]): void {
    this.pending = queue;
    this.conn.blockOn(this);
  }

  maybeClose(): void {
    if (this.localEnded && this.remoteEnded && this.pending === undefined && !this.closed) this.close(false);
  }

  /** `ours`: we reset it (the peer's frames still in flight are then ignored, not its error). */
  private close(ours: boolean): void {
    this.closed = true;
    this.pending = undefined;
    this.pendingTrailers = undefined;
    this.conn.forget(this, ours);
  }
}

/** One client connection. */
export class H2Connection {
  private readonly hpack = new HpackDecoder();
  private readonly streams = new Map<number, H2Stream>();
  private readonly blocked = new Set<H2Stream>();
  /** Bytes of a frame not yet complete, and how many are needed to go on. */
  private rest: Buffer[] = [];
  private restSize = 0;
  private restNeed = 0;
  private prefaceDone = false;
  private settingsSeen = false;
  private lastStreamId = 0;
  /** Recently closed streams: true for those we reset (their late frames are ignored), false for those the peer ended. */
  private readonly closedIds = new Int32Array(CLOSED_MEMORY);
  private readonly closedOurs = new Uint8Array(CLOSED_MEMORY);
  private closedNext = 0;
  /** The header block being read: its stream (0: none), END_STREAM, fragments, frames, the clock at its start. */
  private hdrStream = 0;
  private hdrEndStream = false;
  private hdrParts: Buffer[] = [];
  private hdrSize = 0;
  private hdrFrames = 0;
  private hdrSince = 0;
  /** The clock (ms); when the partial frame began; when the last stream closed. */
  private readonly clock: () => number;
  private readonly openedAt: number;
  private partialSince = 0;
  private idleSince: number;
  /** socket.bytesWritten at the last tick, and since when writes have made no progress (-1: they do). */
  private lastWritten = 0;
  private writeStallSince = -1;
  private headerFrames = 0;
  private readPaused = false;
  private readonly limits: H2Limits;
  /** The peer's settings that matter to us. */
  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrame = MAX_FRAME;
  /** The peer's SETTINGS_HEADER_TABLE_SIZE, and whether it changed since our last header block. */
  private peerTableSize = 4096;
  private tableSizeChanged = false;
  private sendWindow = DEFAULT_WINDOW;
  private recvWindow = CONNECTION_WINDOW;
  private recvUnacked = 0;
  private out: Buffer[] = [];
  private reading = false;
  private nuisance = 0;
  private goawaySent = false;
  private peerGoaway = false;
  /** Closed for good: no more reading or writing. */
  closed = false;

  constructor(
    private readonly socket: Socket,
    private readonly opts: H2Options,
  ) {
    this.limits = opts.limits ?? H2_LIMITS;
    this.clock = opts.clock ?? performance.now.bind(performance);
    this.openedAt = this.clock();
    this.idleSince = this.openedAt;
    // our preface: SETTINGS, then the connection window opened wide
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(0x3, 0); // MAX_CONCURRENT_STREAMS
    settings.writeUInt32BE(opts.maxConcurrentStreams, 2);
    settings.writeUInt16BE(0x6, 6); // MAX_HEADER_LIST_SIZE
    settings.writeUInt32BE(opts.maxHeaderListSize, 8);
    this.out.push(frame(SETTINGS, 0, 0, settings));
    this.out.push(frame(WINDOW_UPDATE, 0, 0, u32(CONNECTION_WINDOW - DEFAULT_WINDOW)));
    this.flush();
    socket.on('data', (chunk: Buffer) => {
      try {
        this.read(chunk);
      } catch (err) {
        // nothing a peer sends may throw out of the socket's handler
        this.opts.onError?.(err instanceof Error ? err : new Error(String(err)));
        this.destroy();
      }
    });
    socket.on('error', (err) => {
      this.opts.onError?.(err);
      this.destroy();
    });
    socket.on('close', () => this.destroy());
  }

  /** Streams open now. */
  get activeStreams(): number {
    return this.streams.size;
  }

  /**
   * Called every few hundred ms: renews the budgets and enforces the timeouts of
   * {@link H2Limits}. A connection whose preface and SETTINGS, partial frame
   * or header block are late is closed (GOAWAY ENHANCE_YOUR_CALM where a
   * preface was read); an idle one is shut down (GOAWAY NO_ERROR); a stream
   * stalled on the peer's window is reset; a socket the peer does not read is
   * destroyed.
   */
  tick() {
    if (this.closed) return;
    const now = this.clock();
    this.nuisance = 0;
    this.headerFrames = 0;
    const l = this.limits;
    if (!this.settingsSeen) {
      if (now - this.openedAt >= l.prefaceTimeoutMs) {
        this.opts.onError?.(new Error('no HTTP/2 preface and SETTINGS in time'));
        this.destroy();
      }
      return;
    }
    // (while we do not read, because our replies back up, a frame in progress is ours to wait for)
    if (!this.readPaused) {
      if (this.restSize > 0 && now - this.partialSince >= l.frameTimeoutMs)
        return this.fail(H2Error.ENHANCE_YOUR_CALM, 'a frame not completed in time');
      if (this.hdrStream !== 0 && now - this.hdrSince >= l.frameTimeoutMs)
        return this.fail(H2Error.ENHANCE_YOUR_CALM, 'a header block not completed in time');
    }
    const written = this.socket.bytesWritten;
    if (this.socket.writableLength > 0 && written === this.lastWritten) {
      if (this.writeStallSince < 0) this.writeStallSince = now;
      else if (now - this.writeStallSince >= l.stallTimeoutMs) {
        this.opts.onError?.(new Error('the client does not read its replies'));
        return this.destroy();
      }
    } else this.writeStallSince = -1;
    this.lastWritten = written;
    for (const s of this.blocked) {
      if (now - s.blockedSince >= l.stallTimeoutMs) {
        this.opts.onError?.(new Error(`stream ${s.id} stalled on flow control`));
        s.reset(H2Error.CANCEL);
        s.onAbort?.();
      }
    }
    if (this.streams.size === 0 && !this.goawaySent) {
      // idle since the last stream closed, as first seen here (-1: a stream closed since the last tick)
      if (this.idleSince < 0) this.idleSince = now;
      else if (now - this.idleSince >= l.idleTimeoutMs) this.shutdown();
    }
  }

  /** Stops taking streams (GOAWAY with NO_ERROR) and closes once the open ones are done. */
  shutdown(): void {
    this.goaway(H2Error.NO_ERROR);
    if (this.streams.size === 0) this.end();
  }

  /** Closes the socket now; open streams are aborted. */
  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    for (const s of [...this.streams.values()]) s.abort();
    this.streams.clear();
    this.blocked.clear();
  }

  // ---- reading -------------------------------------------------------------------------

  private read(chunk: Buffer) {
    if (this.closed) return;
    let data = chunk;
    if (this.restSize > 0) {
      // bytes of a frame not yet complete: joined only once the frame (or its header) is all in,
      // so a peer sending a frame a byte at a time costs one copy of it, not one per byte
      this.rest.push(chunk);
      this.restSize += chunk.length;
      if (this.restSize < this.restNeed) return;
      data = Buffer.concat(this.rest, this.restSize);
      this.rest = [];
      this.restSize = 0;
    }
    this.reading = true;
    let pos = 0;
    try {
      if (!this.prefaceDone) {
        const n = Math.min(data.length, PREFACE.length);
        if (data.compare(PREFACE, 0, n, 0, n) !== 0)
          return this.fail(H2Error.PROTOCOL_ERROR, 'not an HTTP/2 connection preface');
        if (data.length < PREFACE.length) return this.keep(data, PREFACE.length);
        this.prefaceDone = true;
        pos = PREFACE.length;
      }
      while (data.length - pos >= 9) {
        const len = (data[pos]! << 16) | (data[pos + 1]! << 8) | data[pos + 2]!;
        if (len > MAX_FRAME) return this.fail(H2Error.FRAME_SIZE_ERROR, `frame of ${len} bytes`);
        if (data.length - pos < 9 + len) break;
        const type = data[pos + 3]!;
        const flags = data[pos + 4]!;
        const id = data.readUInt32BE(pos + 5) & 0x7fffffff;
        const payload = data.subarray(pos + 9, pos + 9 + len);
        pos += 9 + len;
        try {
          this.frame(type, flags, id, payload);
        } catch (err) {
          // a bug of ours or of a stream handler: this connection goes, the process stays
          this.opts.onError?.(err instanceof Error ? err : new Error(String(err)));
          return this.fail(H2Error.INTERNAL_ERROR, 'internal error');
        }
        if (this.closed) return;
      }
      if (pos < data.length) {
        const left = data.subarray(pos);
        this.keep(left, left.length < 9 ? 9 : 9 + ((left[0]! << 16) | (left[1]! << 8) | left[2]!));
      }
      if (this.nuisance > this.limits.nuisancePerTick)
        this.fail(H2Error.ENHANCE_YOUR_CALM, 'too many frames that do nothing');
      else if (this.headerFrames > this.limits.headerFramesPerTick)
        this.fail(H2Error.ENHANCE_YOUR_CALM, 'too many header frames');
    } finally {
      this.reading = false;
      this.flush();
    }
  }

  /** Keeps the start of a frame (or of the preface) until `need` bytes are in; a copy: a view would pin the read buffer. */
  private keep(part: Buffer, need: number): void {
    this.partialSince = this.clock();
    this.rest = [Buffer.from(part)];
    this.restSize = part.length;
    this.restNeed = need;
  }

  private frame(type: number, flags: number, id: number, p: Buffer) {
    if (this.hdrStream !== 0 && type !== CONTINUATION)
      return this.fail(H2Error.PROTOCOL_ERROR, 'a header block interrupted');
    if (!this.settingsSeen && (type !== SETTINGS || (flags & ACK) !== 0))
      return this.fail(H2Error.PROTOCOL_ERROR, 'the first frame must be SETTINGS');
    switch (type) {
      case DATA:
        return this.onDataFrame(flags, id, p);
      case HEADERS:
        return this.onHeaders(flags, id, p);
      case CONTINUATION:
        if (this.hdrStream === 0 || id !== this.hdrStream)
          return this.fail(H2Error.PROTOCOL_ERROR, 'CONTINUATION without its HEADERS');
        this.headerFrames++;
        this.nuisance++;
        if (++this.hdrFrames > this.limits.maxContinuations + 1)
          return this.fail(H2Error.ENHANCE_YOUR_CALM, 'too many CONTINUATION frames in a header block');
        return this.addFragment(p, flags);
      case PRIORITY:
        if (id === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        this.nuisance++;
        if (p.length !== 5) return this.streamError(id, H2Error.FRAME_SIZE_ERROR);
        // as nghttp2: a stream depending on itself is the peer's bug, the connection's error
        if ((p.readUInt32BE(0) & 0x7fffffff) === id)
          return this.fail(H2Error.PROTOCOL_ERROR, 'PRIORITY: a stream depending on itself');
        return;
      case RST_STREAM: {
        if (id === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (p.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM size');
        if (id > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
        // every reset counts, of an open stream too (the rapid reset attack: open, reset, repeat)
        this.nuisance++;
        this.streams.get(id)?.abort();
        return;
      }
      case SETTINGS:
        return this.onSettings(flags, id, p);
      case PUSH_PROMISE:
        return this.fail(H2Error.PROTOCOL_ERROR, 'PUSH_PROMISE from a client');
      case PING:
        if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PING on a stream');
        if (p.length !== 8) return this.fail(H2Error.FRAME_SIZE_ERROR, 'PING size');
        this.nuisance++;
        if ((flags & ACK) === 0) this.out.push(frame(PING, ACK, 0, p));
        return;
      case GOAWAY:
        if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
        if (p.length < 8) return this.fail(H2Error.FRAME_SIZE_ERROR, 'GOAWAY size');
        this.peerGoaway = true;
        if (this.streams.size === 0) this.end();
        return;
      case WINDOW_UPDATE:
        return this.onWindowUpdate(id, p);
      default:
        // unknown frame types are ignored (RFC 9113 section 4.1)
        this.nuisance++;
    }
  }

  private onDataFrame(flags: number, id: number, p: Buffer) {
    if (id === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA on stream 0');
    // the whole frame counts against the windows, padding included
    const len = p.length;
    if (len > this.recvWindow)
      return this.fail(H2Error.FLOW_CONTROL_ERROR, 'DATA past the connection window');
    this.recvWindow -= len;
    this.recvUnacked += len;
    let body = p;
    if ((flags & PADDED) !== 0) {
      if (len < 1 || p[0]! >= len) return this.fail(H2Error.PROTOCOL_ERROR, 'padding past the frame');
      body = p.subarray(1, len - p[0]!);
    }
    const end = (flags & END_STREAM) !== 0;
    if (body.length === 0 && !end) this.nuisance++;
    const s = this.streams.get(id);
    if (s === undefined) {
      if (id > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'DATA on an idle stream');
      // one the peer ended or reset: its error (RFC 9113 section 5.1); a stream we reset: its data in
      // flight is dropped (the connection window was counted), and so is that of one closed too long
      // ago to be remembered (it may be ours: a client's late DATA must not cost it the connection)
      if (this.closedBy(id) === false) return this.fail(H2Error.STREAM_CLOSED, 'DATA on a closed stream');
      this.nuisance++;
    } else if (s.remoteEnded) this.streamError(id, H2Error.STREAM_CLOSED);
    else if (len > s.recvWindow) this.streamError(id, H2Error.FLOW_CONTROL_ERROR);
    else {
      s.recvWindow -= len;
      s.recvUnacked += len;
      s.received += body.length;
      if (s.contentLength >= 0 && (s.received > s.contentLength || (end && s.received !== s.contentLength)))
        return this.streamError(id, H2Error.PROTOCOL_ERROR);
      s.deliver(body, end);
      // a stream still reading gets its window back as it goes (a message may exceed the first 64 KiB)
      if (!s.closed && !s.remoteEnded && !s.localEnded && s.recvUnacked >= DEFAULT_WINDOW / 2) {
        this.out.push(frame(WINDOW_UPDATE, 0, id, u32(s.recvUnacked)));
        s.recvWindow += s.recvUnacked;
        s.recvUnacked = 0;
      }
    }
    if (this.recvUnacked >= CONNECTION_WINDOW / 2) {
      this.out.push(frame(WINDOW_UPDATE, 0, 0, u32(this.recvUnacked)));
      this.recvWindow += this.recvUnacked;
      this.recvUnacked = 0;
    }
  }

  private onHeaders(flags: number, id: number, p: Buffer) {
    if (id === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'HEADERS on stream 0');
    let start = 0;
    let end = p.length;
    if ((flags & PADDED) !== 0) {
      if (p.length < 1) return this.fail(H2Error.PROTOCOL_ERROR, 'padding past the frame');
      start = 1;
      end -= p[0]!;
    }
    if ((flags & PRIORITY_FLAG) !== 0) {
      if (end - start < 5) return this.fail(H2Error.PROTOCOL_ERROR, 'priority past the frame');
      if ((p.readUInt32BE(start) & 0x7fffffff) === id)
        return this.fail(H2Error.PROTOCOL_ERROR, 'a stream depending on itself');
      start += 5;
    }
    if (end < start) return this.fail(H2Error.PROTOCOL_ERROR, 'padding past the frame');
    this.headerFrames++;
    this.hdrStream = id;
    this.hdrEndStream = (flags & END_STREAM) !== 0;
    this.hdrParts = [];
    this.hdrSize = 0;
    this.hdrFrames = 1;
    if ((flags & END_HEADERS) === 0) this.hdrSince = this.clock();
    this.addFragment(p.subarray(start, end), flags);
  }

  private addFragment(fragment: Buffer, flags: number) {
    this.hdrSize += fragment.length;
    if (this.hdrSize > MAX_HEADER_BLOCK)
      return this.fail(H2Error.ENHANCE_YOUR_CALM, 'header block too large');
    const last = (flags & END_HEADERS) !== 0;
    // an empty fragment is not kept (a drip of them would cost an array slot each); it costs its budget
    if (fragment.length === 0) {
      if (!last) this.nuisance++;
    } else if (last) this.hdrParts.push(fragment);
    else this.hdrParts.push(Buffer.from(fragment)); // kept past this read: a copy, not a view
    if (last) this.headerBlock();
  }

  private headerBlock() {
    const id = this.hdrStream;
    const endStream = this.hdrEndStream;
    const parts = this.hdrParts;
    const block = parts.length === 1 ? parts[0]! : parts.length === 0 ? EMPTY : Buffer.concat(parts);
    this.hdrStream = 0;
    this.hdrParts = [];
    // every block is decoded, whatever becomes of its stream: the dynamic table must stay in step
    let decoded: ReturnType<HpackDecoder['decode']>;
    try {
      decoded = this.hpack.decode(block, this.opts.maxHeaderListSize);
    } catch (err) {
      if (err instanceof HpackError) return this.fail(H2Error.COMPRESSION_ERROR, `HPACK: ${err.message}`);
      throw err;
    }
    const open = this.streams.get(id);
    if (open !== undefined) {
      // trailers: they must end the stream, and carry no pseudo-field; their fields are not used
      if (open.remoteEnded) return this.streamError(id, H2Error.STREAM_CLOSED);
      if (!endStream || decoded.tooLarge || !validTrailers(decoded.fields))
        return this.streamError(id, H2Error.PROTOCOL_ERROR);
      if (open.contentLength >= 0 && open.received !== open.contentLength)
        return this.streamError(id, H2Error.PROTOCOL_ERROR);
      open.deliver(EMPTY, true);
      return;
    }
    // from here, a block that opens no stream (late, refused, malformed) cost work for nothing
    if (id <= this.lastStreamId) {
      this.nuisance++;
      // a stream we reset: its late headers are ignored (decoded above, the table kept in step);
      // one the peer ended: STREAM_CLOSED; an id below one already used but never opened: PROTOCOL_ERROR
      const ours = this.closedBy(id);
      if (ours === true) return;
      if (ours === false) return this.fail(H2Error.STREAM_CLOSED, 'HEADERS on a closed stream');
      return this.fail(H2Error.PROTOCOL_ERROR, 'a stream id lower than one already used');
    }
    if (id % 2 === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'an even stream id from a client');
    this.lastStreamId = id;
    // streams opened after our GOAWAY are not processed (the client knows from its last stream id)
    if (this.goawaySent) {
      this.nuisance++;
      return this.remember(id, true);
    }
    const head = decoded.tooLarge ? undefined : requestHead(decoded.fields);
    if (head === undefined || this.streams.size >= this.opts.maxConcurrentStreams) {
      this.nuisance++;
      const code = decoded.tooLarge
        ? H2Error.ENHANCE_YOUR_CALM
        : head === undefined
          ? H2Error.PROTOCOL_ERROR
          : H2Error.REFUSED_STREAM;
      return this.streamError(id, code);
    }
    const s = new H2Stream(this, id, this.peerInitialWindow);
    if (head.contentLength >= 0) {
      if (endStream && head.contentLength !== 0) return this.streamError(id, H2Error.PROTOCOL_ERROR);
      s.contentLength = head.contentLength;
    }
    this.streams.set(id, s);
    this.opts.onStream(s, head);
    if (endStream && !s.closed) s.deliver(EMPTY, true);
  }

  /** A stream closed: `ours` when we reset it. A ring: the oldest is forgotten past {@link CLOSED_MEMORY}. */
  private remember(id: number, ours: boolean): void {
    const at = this.closedNext;
    this.closedIds[at] = id;
    this.closedOurs[at] = ours ? 1 : 0;
    this.closedNext = at + 1 === CLOSED_MEMORY ? 0 : at + 1;
  }

  /** Whether we reset stream `id` (true), the peer closed it (false), or it is not remembered (undefined). */
  private closedBy(id: number): boolean | undefined {
    for (let i = 0; i < CLOSED_MEMORY; i++) if (this.closedIds[i] === id) return this.closedOurs[i] === 1;
    return undefined;
  }

  private onSettings(flags: number, id: number, p: Buffer) {
    if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if ((flags & ACK) !== 0) {
      if (p.length !== 0) this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return;
    }
    if (p.length % 6 !== 0) return this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS size');
    if (p.length / 6 > this.limits.maxSettingsEntries)
      return this.fail(
        H2Error.ENHANCE_YOUR_CALM,
        `SETTINGS with more than ${this.limits.maxSettingsEntries} entries`,
      );
    this.settingsSeen = true;
    this.nuisance++;
    for (let i = 0; i < p.length; i += 6) {
      const key = p.readUInt16BE(i);
      const value = p.readUInt32BE(i + 2);
      if (key === 0x1 && value !== this.peerTableSize) {
        this.peerTableSize = value;
        this.tableSizeChanged = true;
      }
      if (key === 0x2 && value > 1) return this.fail(H2Error.PROTOCOL_ERROR, 'ENABLE_PUSH not 0 or 1');
      if (key === 0x4) {
        if (value > MAX_WINDOW) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'INITIAL_WINDOW_SIZE too large');
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const s of this.streams.values()) {
          s.sendWindow += delta;
          if (s.sendWindow > MAX_WINDOW)
            return this.fail(H2Error.FLOW_CONTROL_ERROR, 'a stream window past 2^31 - 1');
        }
      }
      if (key === 0x5) {
        if (value < MAX_FRAME || value > 0xffffff)
          return this.fail(H2Error.PROTOCOL_ERROR, 'MAX_FRAME_SIZE out of range');
        this.peerMaxFrame = value;
      }
      // MAX_CONCURRENT_STREAMS (no push), MAX_HEADER_LIST_SIZE (our headers are a few fields)
      // and unknown settings: nothing to do
    }
    this.out.push(frame(SETTINGS, ACK, 0, EMPTY));
    this.flushBlocked();
  }

  private onWindowUpdate(id: number, p: Buffer) {
    if (p.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'WINDOW_UPDATE size');
    const inc = p.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      if (inc === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.sendWindow += inc;
      if (this.sendWindow > MAX_WINDOW)
        return this.fail(H2Error.FLOW_CONTROL_ERROR, 'connection window past 2^31 - 1');
      this.flushBlocked();
      return;
    }
    const s = this.streams.get(id);
    if (s === undefined) {
      if (id > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
      this.nuisance++;
      return;
    }
    if (inc === 0) return this.streamError(id, H2Error.PROTOCOL_ERROR);
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) return this.streamError(id, H2Error.FLOW_CONTROL_ERROR);
    s.flushPending();
  }

  // ---- writing -------------------------------------------------------------------------

  /** Queues a frame; written at the end of the read that caused it, or at once outside one. */
  sendFrame(f: Buffer): void {
    if (this.closed) return;
    this.out.push(f);
    if (!this.reading) this.flush();
  }

  /** Queues a header block on a stream (split into CONTINUATION frames past the peer's frame size). */
  sendHeaders(id: number, block: Buffer, endStream: boolean) {
    if (this.tableSizeChanged) {
      // the peer's decoder may now expect a table size update first (RFC 7541 section 4.2);
      // 0 is within any setting, and we never index what we send
      this.tableSizeChanged = false;
      block = Buffer.concat([TABLE_SIZE_ZERO, block]);
    }
    const max = this.peerMaxFrame;
    const flags0 = endStream ? END_STREAM : 0;
    if (block.length <= max) return this.sendFrame(frame(HEADERS, flags0 | END_HEADERS, id, block));
    for (let at = 0; at < block.length; at += max) {
      const part = block.subarray(at, Math.min(block.length, at + max));
      const last = at + max >= block.length;
      const type = at === 0 ? HEADERS : CONTINUATION;
      this.out.push(frame(type, (at === 0 ? flags0 : 0) | (last ? END_HEADERS : 0), id, part));
    }
    if (!this.reading) this.flush();
  }

  /** Sends as much of `data` as the windows allow; returns what is left, or undefined when all went. */
  sendData(s: H2Stream, data: Buffer): Buffer | undefined {
    let at = 0;
    while (at < data.length) {
      const n = Math.min(data.length - at, this.sendWindow, s.sendWindow, this.peerMaxFrame);
      if (n <= 0) break;
      this.out.push(frame(DATA, 0, s.id, data.subarray(at, at + n)));
      this.sendWindow -= n;
      s.sendWindow -= n;
      at += n;
    }
    if (!this.reading) this.flush();
    return at === data.length ? undefined : data.subarray(at);
  }

  /** A stream waits for window. */
  blockOn(s: H2Stream): void {
    s.blockedSince = this.clock();
    this.blocked.add(s);
  }

  unblock(s: H2Stream): void {
    this.blocked.delete(s);
  }

  private flushBlocked(): void {
    for (const s of [...this.blocked]) {
      if (this.sendWindow <= 0) return;
      s.flushPending();
    }
  }

  /** A stream closed: it leaves the connection, which ends if it was going away and this was its last. */
  forget(s: H2Stream, ours: boolean): void {
    this.streams.delete(s.id);
    this.blocked.delete(s);
    this.remember(s.id, ours);
    if (this.streams.size === 0) {
      this.idleSince = -1;
      if (this.goawaySent || this.peerGoaway) this.end();
    }
  }

  private flush(): void {
    if (this.out.length === 0 || this.closed) return;
    const data = this.out.length === 1 ? this.out[0]! : Buffer.concat(this.out);
    this.out = [];
    this.socket.write(data);
    const unread = this.socket.writableLength;
    if (unread > this.limits.maxUnreadBytes) {
      this.opts.onError?.(new Error('the client does not read its replies'));
      this.destroy();
    } else if (unread > this.limits.maxUnreadBytes / 4 && !this.readPaused) {
      // replies back up: read no more requests until they drain (a peer that never reads is
      // then closed by the stall timeout, its requests left in the kernel, not in our memory)
      this.readPaused = true;
      this.socket.pause();
      this.socket.once('drain', () => {
        this.readPaused = false;
        if (!this.closed) this.socket.resume();
      });
    }
  }

  private streamError(id: number, code: number): void {
    const s = this.streams.get(id);
    if (s !== undefined) {
      s.reset(code);
      s.onAbort?.();
    } else {
      this.remember(id, true);
      this.sendFrame(frame(RST_STREAM, 0, id, u32(code)));
    }
  }

  private goaway(code: number): void {
    if (this.goawaySent || this.closed) return;
    this.goawaySent = true;
    const p = Buffer.alloc(8);
    p.writeUInt32BE(this.lastStreamId, 0);
    p.writeUInt32BE(code, 4);
    this.sendFrame(frame(GOAWAY, 0, 0, p));
  }

  /** A connection error: GOAWAY with `code`, then the connection closes. */
  private fail(code: number, why: string): void {
    this.opts.onError?.(new Error(`HTTP/2 connection error ${code}: ${why}`));
    this.goaway(code);
    this.flush();
    this.end();
  }

  /** Ends the connection once what is queued is written; open streams are aborted. */
  private end(): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    for (const s of [...this.streams.values()]) s.abort();
    this.streams.clear();
    this.blocked.clear();
    this.socket.end();
    // a peer that never closes its side is not waited for
    this.socket.setTimeout(5000, () => this.socket.destroy());
  }
}

/** Connection-specific fields, not allowed in HTTP/2 (RFC 9113 section 8.2.2). */
const CONNECTION_FIELDS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
]);

/** A field value as RFC 9113 section 8.2.1 allows: no NUL, CR or LF; no space or tab first or last. */
function validValue(value: string): boolean {
  const n = value.length;
  if (n === 0) return true;
  const a = value.charCodeAt(0);
  const z = value.charCodeAt(n - 1);
  if (a === 0x20 || a === 0x09 || z === 0x20 || z === 0x09) return false;
  for (let j = 0; j < n; j++) {
    const c = value.charCodeAt(j);
    if (c === 0 || c === 10 || c === 13) return false;
  }
  return true;
}

/** A regular field name: not empty, no upper case, controls, space, colon or non-ASCII (section 8.2.1). */
function validName(name: string): boolean {
  if (name.length === 0) return false;
  for (let j = 0; j < name.length; j++) {
    const c = name.charCodeAt(j);
    if ((c >= 0x41 && c <= 0x5a) || c <= 0x20 || c === 0x3a || c >= 0x7f) return false;
  }
  return true;
}

/** Trailers from the client: regular fields only, well-formed, nothing connection-specific (section 8.1). */
function validTrailers(fields: string[]): boolean {
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (!validName(name) || !validValue(fields[i + 1]!) || CONNECTION_FIELDS.has(name)) return false;
  }
  return true;
}

/**
 * The request's head, or undefined when the fields are not a well-formed
 * HTTP/2 request (RFC 9113 section 8.3): pseudo-fields first, known, once
 * each, :method :scheme :path present; names lower case; no connection-specific
 * fields; `te` only `trailers`; no NUL, CR or LF in a value, nor a space or
 * tab at either end; at most one content-length, all digits.
 */
function requestHead(fields: string[]): RequestHead | undefined {
  let method: string | undefined;
  let path: string | undefined;
  let scheme: string | undefined;
  let authority: string | undefined;
  let contentLength = -1;
  let regular = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    if (name.length === 0) return undefined;
    if (!validValue(value)) return undefined;
    if (name.charCodeAt(0) === 0x3a) {
      if (regular) return undefined;
      switch (name) {
        case ':method':
          if (method !== undefined) return undefined;
          method = value;
          break;
        case ':path':
          if (path !== undefined) return undefined;
          path = value;
          break;
        case ':scheme':
          if (scheme !== undefined) return undefined;
          scheme = value;
          break;
        case ':authority':
          if (authority !== undefined) return undefined;
          authority = value;
          break;
        default:
          return undefined;
      }
      continue;
    }
    regular = true;
    if (!validName(name)) return undefined;
    if (CONNECTION_FIELDS.has(name)) return undefined;
    if (name === 'te' && value !== 'trailers') return undefined;
    if (name === 'content-length') {
      if (contentLength >= 0 || !/^\d{1,15}$/.test(value)) return undefined;
      contentLength = Number(value);
    }
  }
  if (method === undefined || path === undefined || path === '' || scheme === undefined) return undefined;
  return { method, path, fields, contentLength };
}
