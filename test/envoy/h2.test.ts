/**
 * The gRPC server's HTTP/2 (src/envoy/h2.ts) frame by frame, with a raw
 * socket client, and against node:http2's client (nghttp2: HPACK with
 * Huffman and its dynamic table, flow control as a real peer does it).
 */
import http2 from 'node:http2';
import net from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import {
  field,
  H2_LIMITS,
  H2Connection,
  H2Error,
  type H2Stream,
  type RequestHead,
} from '../../src/envoy/h2.js';
import { encodeHeaders, HpackDecoder } from '../../src/envoy/hpack.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const T = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
};

function frame(type: number, flags: number, id: number, payload: Buffer | number[] = []): Buffer {
  const p = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const h = Buffer.alloc(9);
  h.writeUIntBE(p.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, p]);
}
const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v);
  return b;
};
const setting = (key: number, value: number) => {
  const b = Buffer.alloc(6);
  b.writeUInt16BE(key);
  b.writeUInt32BE(value, 2);
  return b;
};

const REQUEST = encodeHeaders([
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', '/echo'],
  [':authority', 'x'],
  ['content-type', 'application/grpc'],
]);

interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** A test server: H2Connection on net, each stream answered by `handler`. */
interface TestServer {
  port: number;
  heads: RequestHead[];
  errors: string[];
  conns: Set<H2Connection>;
  close(): Promise<void>;
}

/** The connections' clock, moved by the test: {@link tick} sets it and runs the connection's tick. */
let fakeNow = 0;
function tick(c: H2Connection, t: number): void {
  fakeNow = t;
  c.tick();
}

let servers: TestServer[] = [];
let sockets: net.Socket[] = [];
let clients: http2.ClientHttp2Session[] = [];
afterEach(async () => {
  fakeNow = 0;
  for (const s of sockets) s.destroy();
  for (const c of clients) c.destroy();
  sockets = [];
  clients = [];
  for (const s of servers) await s.close();
  servers = [];
});

/** By default each stream gets the body it sent back, with the request's field count in a trailer. */
async function server(
  opts: { maxConcurrentStreams?: number; handler?: (s: H2Stream, head: RequestHead) => void } = {},
): Promise<TestServer> {
  const heads: RequestHead[] = [];
  const errors: string[] = [];
  const conns = new Set<H2Connection>();
  const echo = (s: H2Stream, head: RequestHead) => {
    const chunks: Buffer[] = [];
    s.onData = (chunk, end) => {
      chunks.push(Buffer.from(chunk));
      if (!end) return;
      s.respond(encodeHeaders([[':status', '200']]), false);
      s.write(Buffer.concat(chunks));
      s.end(encodeHeaders([['x-fields', String(head.fields.length / 2)]]));
    };
  };
  const srv = net.createServer((socket) => {
    const c = new H2Connection(socket, {
      maxConcurrentStreams: opts.maxConcurrentStreams ?? 100,
      maxHeaderListSize: 16 * 1024,
      onStream: (s, head) => {
        heads.push(head);
        (opts.handler ?? echo)(s, head);
      },
      onError: (e) => errors.push(e.message),
      clock: () => fakeNow,
    });
    conns.add(c);
    socket.on('close', () => conns.delete(c));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const t: TestServer = {
    port: (srv.address() as net.AddressInfo).port,
    heads,
    errors,
    conns,
    close: () =>
      new Promise<void>((r) => {
        for (const c of conns) c.destroy();
        srv.close(() => r());
      }),
  };
  servers.push(t);
  return t;
}

/** A raw HTTP/2 client: sends bytes, collects the server's frames. */
class Raw {
  readonly frames: Frame[] = [];
  closed = false;
  private buf = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  readonly hpack = new HpackDecoder();

  constructor(readonly socket: net.Socket) {
    socket.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      while (this.buf.length >= 9) {
        const len = this.buf.readUIntBE(0, 3);
        if (this.buf.length < 9 + len) break;
        this.frames.push({
          type: this.buf[3]!,
          flags: this.buf[4]!,
          id: this.buf.readUInt32BE(5) & 0x7fffffff,
          payload: this.buf.subarray(9, 9 + len),
        });
        this.buf = this.buf.subarray(9 + len);
      }
      this.wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  static async open(port: number, handshake = true): Promise<Raw> {
    const socket = net.connect(port, '127.0.0.1');
    sockets.push(socket);
    await new Promise<void>((r) => socket.once('connect', () => r()));
    const raw = new Raw(socket);
    if (handshake) {
      raw.send(PREFACE, frame(T.SETTINGS, 0, 0));
      await raw.until((f) => f.type === T.SETTINGS && f.flags === 1);
    }
    return raw;
  }

  send(...bufs: Buffer[]): void {
    this.socket.write(Buffer.concat(bufs));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits for a frame matching `pred` (the first one not yet taken), or the close. */
  async until(pred: (f: Frame) => boolean): Promise<Frame | undefined> {
    for (;;) {
      const f = this.frames.find(pred);
      if (f !== undefined) return f;
      if (this.closed) return undefined;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  async goaway(): Promise<{ last: number; code: number } | undefined> {
    const f = await this.until((x) => x.type === T.GOAWAY);
    return f && { last: f.payload.readUInt32BE(0), code: f.payload.readUInt32BE(4) };
  }

  async closedNow(): Promise<void> {
    while (!this.closed) await new Promise<void>((r) => this.waiters.push(r));
  }

  /** The code of the `nth` RST_STREAM on stream `id`. */
  async rst(id: number, nth = 0): Promise<number | undefined> {
    const all = () => this.frames.filter((x) => x.type === T.RST_STREAM && x.id === id);
    await this.until(() => all().length > nth);
    return all()[nth]?.payload.readUInt32BE(0);
  }

  /** The fields of the `nth` HEADERS frame on stream `id` (our server never indexes, so any order decodes). */
  async headers(id: number, nth = 0): Promise<[string, string][]> {
    for (;;) {
      const list = this.frames.filter((x) => x.type === T.HEADERS && x.id === id);
      if (list.length > nth) {
        const fields = this.hpack.decode(list[nth]!.payload, 1 << 20).fields;
        const out: [string, string][] = [];
        for (let i = 0; i < fields.length; i += 2) out.push([fields[i]!, fields[i + 1]!]);
        return out;
      }
      if (this.closed) return [];
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }
}

describe('HTTP/2 connection: the handshake and the control frames', () => {
  it('sends its SETTINGS and opens the connection window; ACKs SETTINGS and PING', async () => {
    const s = await server({ maxConcurrentStreams: 7 });
    const raw = await Raw.open(s.port);
    const settings = raw.frames.find((f) => f.type === T.SETTINGS && f.flags === 0)!;
    const values = new Map<number, number>();
    for (let i = 0; i < settings.payload.length; i += 6)
      values.set(settings.payload.readUInt16BE(i), settings.payload.readUInt32BE(i + 2));
    expect(values.get(3)).toBe(7);
    expect(values.get(6)).toBe(16 * 1024);
    const wu = raw.frames.find((f) => f.type === T.WINDOW_UPDATE && f.id === 0)!;
    expect(wu.payload.readUInt32BE(0)).toBe((1 << 20) - 65535);
    raw.send(frame(T.PING, 0, 0, Buffer.from('12345678')));
    const pong = await raw.until((f) => f.type === T.PING);
    expect(pong).toMatchObject({ flags: 1, payload: Buffer.from('12345678') });
  });

  it('connection errors: GOAWAY with the code, then the connection closes', async () => {
    const s = await server();
    const cases: [Buffer[], number, boolean][] = [
      [[Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')], H2Error.PROTOCOL_ERROR, false],
      [[PREFACE, frame(T.PING, 0, 0, Buffer.alloc(8))], H2Error.PROTOCOL_ERROR, false],
      [[frame(T.DATA, 0, 1, Buffer.alloc(16_385))], H2Error.FRAME_SIZE_ERROR, true],
      [[frame(T.HEADERS, 5, 2, REQUEST)], H2Error.PROTOCOL_ERROR, true],
      [[frame(T.HEADERS, 5, 1, Buffer.from([0x80]))], H2Error.COMPRESSION_ERROR, true],
      [[frame(T.DATA, 0, 9, Buffer.from('x'))], H2Error.PROTOCOL_ERROR, true],
      [[frame(T.WINDOW_UPDATE, 0, 0, u32(0))], H2Error.PROTOCOL_ERROR, true],
      [[frame(T.WINDOW_UPDATE, 0, 0, u32(2 ** 31 - 1))], H2Error.FLOW_CONTROL_ERROR, true],
      [[frame(T.SETTINGS, 0, 0, setting(4, 2 ** 31))], H2Error.FLOW_CONTROL_ERROR, true],
      [[frame(T.SETTINGS, 0, 0, setting(5, 100))], H2Error.PROTOCOL_ERROR, true],
      [[frame(T.SETTINGS, 0, 0, Buffer.alloc(5))], H2Error.FRAME_SIZE_ERROR, true],
      [[frame(T.PING, 0, 0, Buffer.alloc(7))], H2Error.FRAME_SIZE_ERROR, true],
      [[frame(T.HEADERS, 0, 1, REQUEST), frame(T.PING, 0, 0, Buffer.alloc(8))], H2Error.PROTOCOL_ERROR, true],
      [[frame(T.CONTINUATION, 4, 1, REQUEST)], H2Error.PROTOCOL_ERROR, true],
      [[frame(5, 4, 1, Buffer.alloc(4))], H2Error.PROTOCOL_ERROR, true],
      [[frame(T.RST_STREAM, 0, 11, u32(8))], H2Error.PROTOCOL_ERROR, true],
      [[frame(T.HEADERS, 0x8 | 5, 1, Buffer.from([200]))], H2Error.PROTOCOL_ERROR, true],
      [
        [frame(T.HEADERS, 0x20 | 5, 1, Buffer.concat([u32(1), Buffer.from([0]), REQUEST]))],
        H2Error.PROTOCOL_ERROR,
        true,
      ],
    ];
    for (const [bytes, code, handshake] of cases) {
      const raw = await Raw.open(s.port, false);
      if (handshake) raw.send(PREFACE, frame(T.SETTINGS, 0, 0));
      raw.send(...bytes);
      const g = await raw.goaway();
      expect(g?.code, bytes.map((b) => b.subarray(0, 12).toString('hex')).join(' ')).toBe(code);
      await raw.closedNow();
    }
    // the server is fine
    const raw = await Raw.open(s.port);
    raw.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('hi')));
    expect(await raw.headers(1)).toEqual([[':status', '200']]);
  });

  it('a connection without its preface and SETTINGS by the deadline is closed', async () => {
    const s = await server();
    const silent = await Raw.open(s.port, false);
    const prefaceOnly = await Raw.open(s.port, false);
    prefaceOnly.send(PREFACE);
    const fine = await Raw.open(s.port);
    await new Promise((r) => setTimeout(r, 20));
    // the connections' clock starts at 0 (the test server's `now`)
    for (const c of s.conns) tick(c, H2_LIMITS.prefaceTimeoutMs);
    await silent.closedNow();
    await prefaceOnly.closedNow();
    expect(fine.closed).toBe(false);
  });

  it('flood of frames that do nothing: ENHANCE_YOUR_CALM', async () => {
    const s = await server();
    const raw = await Raw.open(s.port);
    const pings = Array.from({ length: 3000 }, () => frame(T.PING, 0, 0, Buffer.alloc(8)));
    raw.send(...pings);
    expect((await raw.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
  });

  it('a header block over 64 KiB in CONTINUATION frames: ENHANCE_YOUR_CALM', async () => {
    const s = await server();
    const raw = await Raw.open(s.port);
    const parts = [frame(T.HEADERS, 0, 1, Buffer.alloc(16_000, 0x82))];
    for (let i = 0; i < 5; i++) parts.push(frame(T.CONTINUATION, 0, 1, Buffer.alloc(16_000, 0x82)));
    raw.send(...parts);
    expect((await raw.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
  });
});

describe('HTTP/2 streams', () => {
  it('a request across HEADERS + CONTINUATION, padded frames, and trailers from the client', async () => {
    const s = await server();
    const raw = await Raw.open(s.port);
    const half = Math.floor(REQUEST.length / 2);
    raw.send(
      frame(
        T.HEADERS,
        0x8 | 0x20,
        1,
        Buffer.concat([
          Buffer.from([3]),
          u32(0),
          Buffer.from([16]),
          REQUEST.subarray(0, half),
          Buffer.alloc(3),
        ]),
      ),
      frame(T.CONTINUATION, 4, 1, REQUEST.subarray(half)),
      frame(T.DATA, 0x8, 1, Buffer.concat([Buffer.from([2]), Buffer.from('abc'), Buffer.alloc(2)])),
      frame(T.HEADERS, 5, 1, encodeHeaders([['x-trailer', '1']])),
    );
    expect(await raw.headers(1)).toEqual([[':status', '200']]);
    const data = await raw.until((f) => f.type === T.DATA && f.id === 1);
    expect(data?.payload.toString()).toBe('abc');
    expect(await raw.headers(1, 1)).toEqual([['x-fields', '5']]);
    expect(s.heads[0]).toMatchObject({ method: 'POST', path: '/echo' });
  });

  it('malformed requests and refused streams are reset; the connection goes on', async () => {
    const s = await server({ maxConcurrentStreams: 2, handler: () => {} });
    const raw = await Raw.open(s.port);
    const base: [string, string][] = [
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', '/x'],
    ];
    const malformed: [string, string][][] = [
      [
        [':method', 'POST'],
        [':scheme', 'http'],
      ],
      [...base, ['Upper', 'x']],
      [
        [':method', 'POST'],
        ['a', 'b'],
        [':scheme', 'http'],
        [':path', '/x'],
      ],
      [...base, [':method', 'GET']],
      [...base, [':status', '200']],
      [...base, ['connection', 'close']],
      [...base, ['te', 'gzip']],
      [...base, ['x', 'a\nb']],
    ];
    let id = 1;
    for (const fields of malformed) {
      raw.send(frame(T.HEADERS, 5, id, encodeHeaders(fields)));
      expect(await raw.rst(id), JSON.stringify(fields)).toBe(H2Error.PROTOCOL_ERROR);
      id += 2;
    }
    expect(s.heads).toHaveLength(0);
    // two streams open (the handler never answers), the third refused
    raw.send(
      frame(T.HEADERS, 4, id, REQUEST),
      frame(T.HEADERS, 4, id + 2, REQUEST),
      frame(T.HEADERS, 4, id + 4, REQUEST),
    );
    expect(await raw.rst(id + 4)).toBe(H2Error.REFUSED_STREAM);
    expect(s.heads).toHaveLength(2);
    // a header list over the cap
    raw.send(
      frame(T.RST_STREAM, 0, id, u32(8)),
      frame(T.HEADERS, 5, id + 6, encodeHeaders([...base, ['big', 'x'.repeat(16_300)]])),
    );
    expect(await raw.rst(id + 6)).toBe(H2Error.ENHANCE_YOUR_CALM);
    // late HEADERS on a stream we reset are ignored (RFC 9113 section 5.1), the connection goes on
    raw.send(frame(T.HEADERS, 5, 3, REQUEST), frame(T.PING, 0, 0, Buffer.from('late-hdr')));
    await raw.until((f) => f.type === T.PING && f.payload.toString() === 'late-hdr');
    expect(raw.frames.filter((f) => f.type === T.RST_STREAM && f.id === 3)).toHaveLength(1);
    expect(raw.closed).toBe(false);
    // HEADERS on a stream the client itself reset: a connection error, STREAM_CLOSED
    raw.send(frame(T.HEADERS, 5, id, REQUEST));
    expect((await raw.goaway())?.code).toBe(H2Error.STREAM_CLOSED);
  });

  it('flow control: no DATA past the peer windows; WINDOW_UPDATE releases the rest, trailers last', async () => {
    const s = await server();
    const raw = await Raw.open(s.port, false);
    raw.send(PREFACE, frame(T.SETTINGS, 0, 0, setting(4, 0)));
    await raw.until((f) => f.type === T.SETTINGS && f.flags === 1);
    raw.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('0123456789')));
    expect(await raw.headers(1)).toEqual([[':status', '200']]);
    await new Promise((r) => setTimeout(r, 50));
    expect(raw.frames.filter((f) => f.type === T.DATA)).toHaveLength(0);
    raw.send(frame(T.WINDOW_UPDATE, 0, 1, u32(4)));
    await raw.until((f) => f.type === T.DATA);
    expect(raw.frames.filter((f) => f.type === T.HEADERS && f.id === 1)).toHaveLength(1);
    // a larger initial window for all streams: the rest goes, then the trailers
    raw.send(frame(T.SETTINGS, 0, 0, setting(4, 100)));
    expect(await raw.headers(1, 1)).toEqual([['x-fields', '5']]);
    const data = Buffer.concat(raw.frames.filter((f) => f.type === T.DATA).map((f) => f.payload));
    expect(data.toString()).toBe('0123456789');
    expect(raw.frames.filter((f) => f.type === T.DATA)[0]!.payload.toString()).toBe('0123');
  });

  it('a peer that changes its HPACK table size gets a table size update before our next header block', async () => {
    const s = await server();
    const raw = await Raw.open(s.port, false);
    raw.send(PREFACE, frame(T.SETTINGS, 0, 0, setting(1, 0)));
    await raw.until((f) => f.type === T.SETTINGS && f.flags === 1);
    raw.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('x')));
    expect(await raw.headers(1)).toEqual([[':status', '200']]);
    await raw.headers(1, 1);
    // the response's block starts with the update (then :status 200, 0x88); the trailers' does not
    const blocks = raw.frames.filter((f) => f.type === T.HEADERS).map((f) => [...f.payload.subarray(0, 2)]);
    expect(blocks).toEqual([
      [0x20, 0x88],
      [0x00, 8],
    ]);
    // and nghttp2, told a table of 0, reads our replies
    const c = http2.connect(`http://127.0.0.1:${s.port}`, { settings: { headerTableSize: 0 } });
    clients.push(c);
    for (let i = 0; i < 3; i++) {
      const status = await new Promise<number | undefined>((resolve) => {
        const st = c.request({ ':method': 'POST', ':path': '/t', 'content-type': 'application/grpc' });
        st.on('response', (h) => resolve(h[':status']));
        st.on('error', () => resolve(undefined));
        st.resume();
        st.end('x');
      });
      expect(status).toBe(200);
    }
  });

  it('bytes that arrive a few at a time: the same frames', async () => {
    const s = await server();
    const raw = await Raw.open(s.port, false);
    const bytes = Buffer.concat([
      PREFACE,
      frame(T.SETTINGS, 0, 0),
      frame(T.HEADERS, 4, 1, REQUEST),
      frame(T.DATA, 1, 1, Buffer.from('slow')),
    ]);
    for (let i = 0; i < bytes.length; i += 3) {
      raw.send(bytes.subarray(i, i + 3));
      await new Promise((r) => setImmediate(r));
    }
    expect(await raw.headers(1)).toEqual([[':status', '200']]);
    const data = await raw.until((f) => f.type === T.DATA && f.id === 1);
    expect(data?.payload.toString()).toBe('slow');
  });

  it('a request larger than the stream window: the server opens it as it reads', async () => {
    const s = await server();
    const c = http2.connect(`http://127.0.0.1:${s.port}`);
    clients.push(c);
    const body = Buffer.alloc(300_000, 7);
    const got = await new Promise<Buffer>((resolve) => {
      const st = c.request({ ':method': 'POST', ':path': '/big', 'content-type': 'application/grpc' });
      const chunks: Buffer[] = [];
      st.on('data', (d: Buffer) => chunks.push(d));
      st.on('end', () => resolve(Buffer.concat(chunks)));
      st.end(body);
    });
    expect(got.equals(body)).toBe(true);
  });

  it('HPACK against nghttp2 (node:http2 client): random fields, many requests on one connection, Huffman and the dynamic table', async () => {
    const s = await server();
    const c = http2.connect(`http://127.0.0.1:${s.port}`);
    clients.push(c);
    const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/);
    const value = fc.stringMatching(/^[ -~]{0,60}$/).map((v) => v.trim());
    const sample = fc.sample(fc.array(fc.tuple(name, value), { maxLength: 12 }), { numRuns: 300, seed: 31 });
    for (const fields of sample) {
      const headers: http2.OutgoingHttpHeaders = {
        ':method': 'POST',
        ':path': '/hpack',
        'content-type': 'application/grpc',
      };
      const sent = new Map<string, string>();
      for (const [n, v] of fields) {
        if (
          n === 'te' ||
          n === 'content-type' ||
          n === 'connection' ||
          n === 'keep-alive' ||
          n === 'upgrade' ||
          n === 'host' ||
          n === 'transfer-encoding' ||
          n === 'proxy-connection' ||
          n === 'http2-settings'
        )
          continue;
        sent.set(n, v);
        headers[n] = v;
      }
      await new Promise<void>((resolve) => {
        const st = c.request(headers);
        st.on('response', () => {});
        st.resume();
        st.on('close', () => resolve());
        st.end();
      });
      const head = s.heads.at(-1)!;
      for (const [n, v] of sent) expect(field(head.fields, n), n).toBe(v);
      expect(head.path).toBe('/hpack');
    }
  });
});

describe('HTTP/2 hostile bytes', () => {
  it('random frames after the handshake: no exception escapes, the server keeps serving', async () => {
    const s = await server();
    const frameArb = fc.tuple(
      fc.integer({ min: 0, max: 12 }),
      fc.integer({ min: 0, max: 255 }),
      fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 9 }), fc.integer({ min: 0, max: 2 ** 31 - 1 })),
      fc.uint8Array({ maxLength: 40 }),
    );
    const conns = fc.sample(fc.array(frameArb, { minLength: 1, maxLength: 12 }), { numRuns: 150, seed: 41 });
    for (const frames of conns) {
      const raw = await Raw.open(s.port, false);
      raw.send(
        PREFACE,
        frame(T.SETTINGS, 0, 0),
        frame(T.HEADERS, 4, 1, REQUEST),
        ...frames.map(([type, flags, id, p]) => frame(type, flags, id, Buffer.from(p))),
      );
      await new Promise((r) => setTimeout(r, 2));
      raw.socket.destroy();
    }
    const raw = await Raw.open(s.port);
    raw.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('ok')));
    expect(await raw.headers(1)).toEqual([[':status', '200']]);
  });

  it('shutdown: GOAWAY(NO_ERROR) with the last stream, the open stream still finishes, then the connection closes', async () => {
    const s = await server();
    const raw = await Raw.open(s.port);
    raw.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 0, 1, Buffer.from('a')));
    await new Promise((r) => setTimeout(r, 20));
    for (const c of s.conns) c.shutdown();
    expect(await raw.goaway()).toEqual({ last: 1, code: H2Error.NO_ERROR });
    // a stream opened after the GOAWAY is ignored; the open one completes
    raw.send(frame(T.HEADERS, 5, 3, REQUEST), frame(T.DATA, 1, 1, Buffer.from('b')));
    expect(await raw.headers(1)).toEqual([[':status', '200']]);
    await raw.closedNow();
    expect(s.heads).toHaveLength(1);
    expect(raw.frames.some((f) => f.id === 3)).toBe(false);
  });
});
