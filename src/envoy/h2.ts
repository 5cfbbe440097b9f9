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
/** Frames that cost work without doing any, per tick (a tick is 250 ms in the gRPC server). */
const NUISANCE_BUDGET = 2500;
/** Replies the peer has not read that we keep before dropping the connection. */
const MAX_UNREAD = 4 * 1024 * 1024;

/** The request's pseudo-header fields, and all its fields as `[name, value, ...]`. */
export interface RequestHead {
  method: string;
  path: string;
  fields: string[];
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
    this.close();
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
    this.close();
    this.onAbort?.();
  }

  private block(queue: Buffer[]): void {
    this.pending = queue;
    this.conn.blockOn(this);
  }

  maybeClose(): void {
    if (this.localEnded && this.remoteEnded && this.pending === undefined && !this.closed) this.close();
  }

  private close(): void {
    this.closed = true;
    this.pending = undefined;
    this.pendingTrailers = undefined;
    this.conn.forget(this);
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
  /** The header block being read: its stream (0: none), END_STREAM, fragments. */
  private hdrStream = 0;
  private hdrEndStream = false;
  private hdrParts: Buffer[] = [];
  private hdrSize = 0;
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
  /** Ticks since the connection opened, while its preface and first SETTINGS have not arrived. */
  private age = 0;

  constructor(
    private readonly socket: Socket,
    private readonly opts: H2Options,
  ) {
    // our preface: SETTINGS, then the connection window opened wide
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(0x3, 0); // MAX_CONCURRENT_STREAMS
    settings.writeUInt32BE(opts.maxConcurrentStreams, 2);
    settings.writeUInt16BE(0x6, 6); // MAX_HEADER_LIST_SIZE
    settings.writeUInt32BE(opts.maxHeaderListSize, 8);
    this.out.push(frame(SETTINGS, 0, 0, settings));
    this.out.push(frame(WINDOW_UPDATE, 0, 0, u32(CONNECTION_WINDOW - DEFAULT_WINDOW)));
    this.flush();
    socket.on('data', (chunk: Buffer) => this.read(chunk));
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

  /** Called every few hundred ms: resets the budgets; a connection without its preface and SETTINGS after `maxAge` ticks goes. */
  tick(maxAge: number): void {
    this.nuisance = 0;
    if (!this.settingsSeen && ++this.age > maxAge) this.destroy();
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
      if (this.nuisance > NUISANCE_BUDGET)
        this.fail(H2Error.ENHANCE_YOUR_CALM, 'too many frames that do nothing');
    } finally {
      this.reading = false;
      this.flush();
    }
  }

  /** Keeps the start of a frame (or of the preface) until `need` bytes are in; a copy: a view would pin the read buffer. */
  private keep(part: Buffer, need: number): void {
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
        return this.addFragment(p, flags);
      case PRIORITY:
        if (id === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        this.nuisance++;
        if (p.length !== 5) this.streamError(id, H2Error.FRAME_SIZE_ERROR);
        return;
      case RST_STREAM: {
        if (id === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (p.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM size');
        if (id > this.lastStreamId) return this.fail(H2Error.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
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
      // a stream closed or reset meanwhile: its data is dropped (the connection window was counted)
      this.nuisance++;
    } else if (s.remoteEnded) this.streamError(id, H2Error.STREAM_CLOSED);
    else if (len > s.recvWindow) this.streamError(id, H2Error.FLOW_CONTROL_ERROR);
    else {
      s.recvWindow -= len;
      s.recvUnacked += len;
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
    this.hdrStream = id;
    this.hdrEndStream = (flags & END_STREAM) !== 0;
    this.hdrParts = [];
    this.hdrSize = 0;
    this.addFragment(p.subarray(start, end), flags);
  }

  private addFragment(fragment: Buffer, flags: number) {
    this.hdrSize += fragment.length;
    if (this.hdrSize > MAX_HEADER_BLOCK)
      return this.fail(H2Error.ENHANCE_YOUR_CALM, 'header block too large');
    if (fragment.length === 0 && (flags & END_HEADERS) === 0) this.nuisance++;
    if ((flags & END_HEADERS) !== 0) {
      this.hdrParts.push(fragment);
      this.headerBlock();
    } else this.hdrParts.push(Buffer.from(fragment)); // kept past this read: a copy, not a view
  }

  private headerBlock() {
    const id = this.hdrStream;
    const endStream = this.hdrEndStream;
    const block = this.hdrParts.length === 1 ? this.hdrParts[0]! : Buffer.concat(this.hdrParts);
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
      // trailers: they must end the stream; their fields are not used
      if (open.remoteEnded || !endStream) return this.streamError(id, H2Error.PROTOCOL_ERROR);
      open.deliver(EMPTY, true);
      return;
    }
    if (id <= this.lastStreamId) return this.streamError(id, H2Error.STREAM_CLOSED);
    if (id % 2 === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'an even stream id from a client');
    this.lastStreamId = id;
    // streams opened after our GOAWAY are not processed (the client knows from its last stream id)
    if (this.goawaySent) return;
    if (decoded.tooLarge) return this.streamError(id, H2Error.ENHANCE_YOUR_CALM);
    if (this.streams.size >= this.opts.maxConcurrentStreams)
      return this.streamError(id, H2Error.REFUSED_STREAM);
    const head = requestHead(decoded.fields);
    if (head === undefined) return this.streamError(id, H2Error.PROTOCOL_ERROR);
    const s = new H2Stream(this, id, this.peerInitialWindow);
    this.streams.set(id, s);
    this.opts.onStream(s, head);
    if (endStream && !s.closed) s.deliver(EMPTY, true);
  }

  private onSettings(flags: number, id: number, p: Buffer) {
    if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if ((flags & ACK) !== 0) {
      if (p.length !== 0) this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return;
    }
    if (p.length % 6 !== 0) return this.fail(H2Error.FRAME_SIZE_ERROR, 'SETTINGS size');
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
  forget(s: H2Stream): void {
    this.streams.delete(s.id);
    this.blocked.delete(s);
    if ((this.goawaySent || this.peerGoaway) && this.streams.size === 0) this.end();
  }

  private flush(): void {
    if (this.out.length === 0 || this.closed) return;
    const data = this.out.length === 1 ? this.out[0]! : Buffer.concat(this.out);
    this.out = [];
    this.socket.write(data);
    if (this.socket.writableLength > MAX_UNREAD) {
      this.opts.onError?.(new Error('the client does not read its replies'));
      this.destroy();
    }
  }

  private streamError(id: number, code: number): void {
    const s = this.streams.get(id);
    if (s !== undefined) {
      s.reset(code);
      s.onAbort?.();
    } else this.sendFrame(frame(RST_STREAM, 0, id, u32(code)));
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

/**
 * The request's head, or undefined when the fields are not a well-formed
 * HTTP/2 request (RFC 9113 section 8.3): pseudo-fields first, known, once
 * each, :method :scheme :path present; names lower case; no connection-specific
 * fields; `te` only `trailers`; no NUL, CR or LF in a value.
 */
function requestHead(fields: string[]): RequestHead | undefined {
  let method: string | undefined;
  let path: string | undefined;
  let scheme: string | undefined;
  let authority: string | undefined;
  let regular = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    if (name.length === 0) return undefined;
    for (let j = 0; j < value.length; j++) {
      const c = value.charCodeAt(j);
      if (c === 0 || c === 10 || c === 13) return undefined;
    }
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
    for (let j = 0; j < name.length; j++) {
      const c = name.charCodeAt(j);
      if ((c >= 0x41 && c <= 0x5a) || c <= 0x20 || c === 0x3a || c >= 0x7f) return undefined;
    }
    if (CONNECTION_FIELDS.has(name)) return undefined;
    if (name === 'te' && value !== 'trailers') return undefined;
  }
  if (method === undefined || path === undefined || path === '' || scheme === undefined) return undefined;
  return { method, path, fields };
}
