/**
 * The caps and timeouts of H2Connection (H2Limits) and the RFC 9113 rules
 * added with them, on a connection in this process whose clock the test
 * drives: `now: 0` at the start, then tick(t) with the time it wants. A
 * timeout is asserted by the closure (or reset) it causes, never by how
 * long it took.
 */
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  H2_LIMITS,
  H2Connection,
  H2Error,
  type H2Limits,
  type H2Stream,
  h2Limits,
  type RequestHead,
} from '../../src/envoy/h2.js';
import { encodeHeaders } from '../../src/envoy/hpack.js';
import { frame, PREFACE, Raw, setting, T, u32 } from './h2-harness.js';

interface Server {
  port: number;
  conns: H2Connection[];
  heads: RequestHead[];
  errors: string[];
  close(): Promise<void>;
}

/** The connections' clock, moved by the test: {@link tick} sets it and runs the connection's tick. */
let fakeNow = 0;
function tick(c: H2Connection, t: number): void {
  fakeNow = t;
  c.tick();
}

let servers: Server[] = [];
let raws: Raw[] = [];
afterEach(async () => {
  fakeNow = 0;
  for (const r of raws) r.destroy();
  raws = [];
  for (const s of servers) await s.close();
  servers = [];
});

/** Streams answered 200 with their body echoed once the request ends; the connections' clock starts at 0. */
async function server(limits: Partial<H2Limits> = {}, answer = true): Promise<Server> {
  const conns: H2Connection[] = [];
  const heads: RequestHead[] = [];
  const errors: string[] = [];
  const srv = net.createServer((socket) => {
    conns.push(
      new H2Connection(socket, {
        maxConcurrentStreams: 100,
        maxHeaderListSize: 16 * 1024,
        limits: h2Limits(limits),
        clock: () => fakeNow,
        onError: (e) => errors.push(e.message),
        onStream: (s: H2Stream, head) => {
          heads.push(head);
          const chunks: Buffer[] = [];
          s.onData = (chunk, end) => {
            chunks.push(Buffer.from(chunk));
            if (!end || !answer) return;
            s.respond(encodeHeaders([[':status', '200']]), false);
            s.write(Buffer.concat([Buffer.from('echo:'), ...chunks]));
            s.end(encodeHeaders([['grpc-status', '0']]));
          };
        },
      }),
    );
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const s: Server = {
    port: (srv.address() as net.AddressInfo).port,
    conns,
    heads,
    errors,
    close: () =>
      new Promise<void>((r) => {
        for (const c of conns) c.destroy();
        srv.close(() => r());
      }),
  };
  servers.push(s);
  return s;
}

async function open(s: Server, handshake = true): Promise<Raw> {
  const r = await Raw.open(s.port, handshake);
  raws.push(r);
  return r;
}

const BASE: [string, string][] = [
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', '/x'],
];
const REQUEST = encodeHeaders(BASE);

/** Waits until the server has seen every byte sent so far (a PING round trip). */
async function sync(raw: Raw, tag: string): Promise<void> {
  raw.send(frame(T.PING, 0, 0, Buffer.from(tag.padEnd(8).slice(0, 8))));
  await raw.until((f) => f.type === T.PING && f.payload.toString() === tag.padEnd(8).slice(0, 8));
}

describe('H2Limits: validated, defaults stated', () => {
  it('refuses a limit that is not a positive integer', () => {
    expect(h2Limits()).toEqual(H2_LIMITS);
    expect(h2Limits({ idleTimeoutMs: 5 }).idleTimeoutMs).toBe(5);
    expect(() => h2Limits({ maxContinuations: 0 })).toThrow(/maxContinuations/);
    expect(() => h2Limits({ frameTimeoutMs: 1.5 })).toThrow(/frameTimeoutMs/);
  });
});

describe('caps on frames', () => {
  it('a header block of more than maxContinuations CONTINUATION frames: ENHANCE_YOUR_CALM', async () => {
    const s = await server({ maxContinuations: 3 });
    const ok = await open(s);
    // HEADERS + 3 CONTINUATIONs: within the cap, the request goes through
    const q = Math.ceil(REQUEST.length / 4);
    ok.send(
      frame(T.HEADERS, 0, 1, REQUEST.subarray(0, q)),
      frame(T.CONTINUATION, 0, 1, REQUEST.subarray(q, 2 * q)),
      frame(T.CONTINUATION, 0, 1, REQUEST.subarray(2 * q, 3 * q)),
      frame(T.CONTINUATION, 4, 1, REQUEST.subarray(3 * q)),
      frame(T.DATA, 1, 1, Buffer.from('a')),
    );
    expect(await ok.grpcStatus(1)).toBe('0');
    const bad = await open(s);
    bad.send(frame(T.HEADERS, 0, 1, REQUEST));
    for (let i = 0; i < 4; i++) bad.send(frame(T.CONTINUATION, 0, 1));
    expect((await bad.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
    await bad.closedNow();
  });

  it('empty fragments are not kept: a block of empty CONTINUATIONs still decodes as its one real fragment', async () => {
    const s = await server({ maxContinuations: 8 });
    const raw = await open(s);
    raw.send(frame(T.HEADERS, 0, 1));
    for (let i = 0; i < 7; i++) raw.send(frame(T.CONTINUATION, 0, 1));
    raw.send(frame(T.CONTINUATION, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('b')));
    expect(await raw.grpcStatus(1)).toBe('0');
    expect(s.heads).toHaveLength(1);
  });

  it('SETTINGS with more than maxSettingsEntries entries: ENHANCE_YOUR_CALM; at the cap: ACKed', async () => {
    const s = await server({ maxSettingsEntries: 4 });
    const ok = await open(s);
    ok.send(frame(T.SETTINGS, 0, 0, Buffer.concat(Array.from({ length: 4 }, () => setting(0x99, 1)))));
    await ok.until((f) => f.type === T.SETTINGS && f.flags === 1 && ok.frames.indexOf(f) > 1);
    const bad = await open(s);
    bad.send(frame(T.SETTINGS, 0, 0, Buffer.concat(Array.from({ length: 5 }, () => setting(0x99, 1)))));
    expect((await bad.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
    expect(ok.closed).toBe(false);
  });

  it('every HEADERS and CONTINUATION counts: more than headerFramesPerTick in a tick is ENHANCE_YOUR_CALM', async () => {
    const s = await server({ headerFramesPerTick: 50 });
    const raw = await open(s);
    const calls: Buffer[] = [];
    for (let i = 0; i < 60; i++)
      calls.push(frame(T.HEADERS, 4, 1 + 2 * i, REQUEST), frame(T.DATA, 1, 1 + 2 * i, Buffer.from('c')));
    raw.send(...calls);
    expect((await raw.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
    // after a tick the budget is new: 40 a tick go through
    const next = await open(s);
    for (let round = 0; round < 2; round++) {
      const batch: Buffer[] = [];
      for (let i = 0; i < 40; i++) {
        const id = 1 + 2 * (round * 40 + i);
        batch.push(frame(T.HEADERS, 4, id, REQUEST), frame(T.DATA, 1, id, Buffer.from('c')));
      }
      next.send(...batch);
      expect(await next.grpcStatus(1 + 2 * (round * 40 + 39))).toBe('0');
      for (const c of s.conns) tick(c, 1);
    }
    expect(next.closed).toBe(false);
  });

  it('rapid reset: HEADERS then RST_STREAM, again and again, is counted and cut off', async () => {
    const s = await server({ nuisancePerTick: 100 }, false);
    const raw = await open(s);
    const burst: Buffer[] = [];
    for (let i = 0; i < 150; i++)
      burst.push(frame(T.HEADERS, 4, 1 + 2 * i, REQUEST), frame(T.RST_STREAM, 0, 1 + 2 * i, u32(8)));
    raw.send(...burst);
    expect((await raw.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
  });
});

describe('RFC 9113 errors for frames out of place', () => {
  it('DATA or HEADERS on a stream the client ended: connection error STREAM_CLOSED', async () => {
    const s = await server();
    const a = await open(s);
    a.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('x')));
    expect(await a.grpcStatus(1)).toBe('0');
    a.send(frame(T.DATA, 1, 1, Buffer.from('late')));
    expect((await a.goaway())?.code).toBe(H2Error.STREAM_CLOSED);
    const b = await open(s);
    b.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('x')));
    expect(await b.grpcStatus(1)).toBe('0');
    b.send(frame(T.HEADERS, 5, 1, REQUEST));
    expect((await b.goaway())?.code).toBe(H2Error.STREAM_CLOSED);
  });

  it('DATA on a stream the client reset: STREAM_CLOSED; on one we reset: ignored', async () => {
    const s = await server();
    const a = await open(s);
    a.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.RST_STREAM, 0, 1, u32(8)), frame(T.DATA, 1, 1));
    expect((await a.goaway())?.code).toBe(H2Error.STREAM_CLOSED);
    const b = await open(s);
    // a malformed request is reset by the server; the client's DATA already on its way is dropped
    b.send(frame(T.HEADERS, 4, 1, encodeHeaders([...BASE, ['Bad', 'x']])));
    expect(await b.rst(1)).toBe(H2Error.PROTOCOL_ERROR);
    b.send(frame(T.DATA, 1, 1, Buffer.from('in flight')));
    await sync(b, 'ignored');
    expect(b.closed).toBe(false);
  });

  it('PRIORITY of a stream on itself: connection error PROTOCOL_ERROR (as nghttp2)', async () => {
    const s = await server();
    const raw = await open(s);
    raw.send(frame(T.PRIORITY, 0, 3, Buffer.concat([u32(3), Buffer.from([16])])));
    expect((await raw.goaway())?.code).toBe(H2Error.PROTOCOL_ERROR);
  });

  it('late DATA on a stream closed too long ago to be remembered (128 since) is dropped, not an error', async () => {
    const s = await server();
    const raw = await open(s);
    const bad = encodeHeaders([...BASE, ['Bad', 'x']]);
    for (let i = 0; i < 130; i++) raw.send(frame(T.HEADERS, 4, 1 + 2 * i, bad));
    expect(await raw.rst(1 + 2 * 129)).toBe(H2Error.PROTOCOL_ERROR);
    raw.send(frame(T.DATA, 1, 1, Buffer.from('very late')));
    await sync(raw, 'dropped');
    expect(raw.closed).toBe(false);
  });

  it('a new stream id lower than one already used: connection error PROTOCOL_ERROR', async () => {
    const s = await server();
    const raw = await open(s);
    raw.send(frame(T.HEADERS, 4, 5, REQUEST), frame(T.HEADERS, 5, 3, REQUEST));
    expect((await raw.goaway())?.code).toBe(H2Error.PROTOCOL_ERROR);
  });

  it('trailers with a pseudo-field, or a malformed field, are refused (PROTOCOL_ERROR); good trailers end the request', async () => {
    const s = await server();
    const raw = await open(s);
    const cases = [
      encodeHeaders([[':path', '/y']]),
      encodeHeaders([['Upper', 'x']]),
      encodeHeaders([['x', ' leading space']]),
      encodeHeaders([['connection', 'close']]),
    ];
    let id = 1;
    for (const t of cases) {
      raw.send(
        frame(T.HEADERS, 4, id, REQUEST),
        frame(T.DATA, 0, id, Buffer.from('x')),
        frame(T.HEADERS, 5, id, t),
      );
      expect(await raw.rst(id), t.toString('hex')).toBe(H2Error.PROTOCOL_ERROR);
      id += 2;
    }
    raw.send(
      frame(T.HEADERS, 4, id, REQUEST),
      frame(T.DATA, 0, id, Buffer.from('x')),
      frame(T.HEADERS, 5, id, encodeHeaders([['x-checksum', 'abc']])),
    );
    expect(await raw.grpcStatus(id)).toBe('0');
  });

  it('field values with a space or tab at either end are refused', async () => {
    const s = await server();
    const raw = await open(s);
    let id = 1;
    for (const v of [' x', 'x ', '\tx', 'x\t']) {
      raw.send(frame(T.HEADERS, 5, id, encodeHeaders([...BASE, ['x-v', v]])));
      expect(await raw.rst(id), JSON.stringify(v)).toBe(H2Error.PROTOCOL_ERROR);
      id += 2;
    }
    raw.send(frame(T.HEADERS, 4, id, encodeHeaders([...BASE, ['x-v', 'in side']])), frame(T.DATA, 1, id));
    expect(await raw.grpcStatus(id)).toBe('0');
    expect(s.heads).toHaveLength(1);
  });

  it('content-length: DATA must add up to it; more, less, or a malformed value is PROTOCOL_ERROR', async () => {
    const s = await server();
    const raw = await open(s);
    const cl = (v: string) => encodeHeaders([...BASE, ['content-length', v]]);
    const cases: [Buffer, Buffer[]][] = [
      [cl('3'), [frame(T.DATA, 1, 0, Buffer.from('four'))]],
      [cl('5'), [frame(T.DATA, 1, 0, Buffer.from('four'))]],
      [cl('x'), [frame(T.DATA, 1, 0, Buffer.from('four'))]],
      [cl('4'), [frame(T.DATA, 0, 0, Buffer.from('four')), frame(T.DATA, 1, 0, Buffer.from('!'))]],
    ];
    let id = 1;
    for (const [head, datas] of cases) {
      for (const d of datas) d.writeUInt32BE(id, 5);
      raw.send(frame(T.HEADERS, 4, id, head), ...datas);
      expect(await raw.rst(id), head.toString('latin1')).toBe(H2Error.PROTOCOL_ERROR);
      id += 2;
    }
    // content-length 4 on a HEADERS with END_STREAM
    raw.send(frame(T.HEADERS, 5, id, cl('4')));
    expect(await raw.rst(id)).toBe(H2Error.PROTOCOL_ERROR);
    id += 2;
    raw.send(
      frame(T.HEADERS, 4, id, cl('4')),
      frame(T.DATA, 0, id, Buffer.from('fo')),
      frame(T.DATA, 1, id, Buffer.from('ur')),
    );
    expect(await raw.grpcStatus(id)).toBe('0');
  });
});

describe('timeouts, on the injected clock', () => {
  const L = { prefaceTimeoutMs: 1000, frameTimeoutMs: 1000, idleTimeoutMs: 5000, stallTimeoutMs: 2000 };

  it('no preface and SETTINGS by prefaceTimeoutMs: closed; one that sent them: not', async () => {
    const s = await server(L);
    const silent = await open(s, false);
    const fine = await open(s);
    for (const c of s.conns) tick(c, 999);
    await sync(fine, 'alive');
    expect(silent.closed).toBe(false);
    for (const c of s.conns) tick(c, 1000);
    await silent.closedNow();
    expect(fine.closed).toBe(false);
  });

  it('a frame begun and not finished by frameTimeoutMs: GOAWAY ENHANCE_YOUR_CALM', async () => {
    const s = await server(L);
    const raw = await open(s);
    const whole = frame(T.HEADERS, 4, 1, REQUEST);
    raw.send(whole.subarray(0, 5));
    await new Promise((r) => setTimeout(r, 50));
    for (const c of s.conns) tick(c, 500);
    raw.send(whole.subarray(5, 7));
    await new Promise((r) => setTimeout(r, 50));
    for (const c of s.conns) tick(c, 999);
    expect(raw.closed).toBe(false);
    for (const c of s.conns) tick(c, 1000);
    expect((await raw.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
    await raw.closedNow();
  });

  it('a header block begun (HEADERS without END_HEADERS) not finished by frameTimeoutMs: closed', async () => {
    const s = await server(L);
    const raw = await open(s);
    raw.send(frame(T.HEADERS, 0, 1, REQUEST.subarray(0, 3)));
    // (no PING to sync on: any frame but CONTINUATION inside a header block is its own error)
    await new Promise((r) => setTimeout(r, 50));
    for (const c of s.conns) tick(c, 999);
    expect(raw.closed).toBe(false);
    for (const c of s.conns) tick(c, 1000);
    expect((await raw.goaway())?.code).toBe(H2Error.ENHANCE_YOUR_CALM);
  });

  it('idle: no stream for idleTimeoutMs, GOAWAY NO_ERROR and closed; a stream open keeps it', async () => {
    const s = await server(L, false);
    const idle = await open(s);
    const busy = await open(s);
    busy.send(frame(T.HEADERS, 4, 1, REQUEST));
    await sync(busy, 'busy');
    for (const c of s.conns) tick(c, 4999);
    expect(idle.closed).toBe(false);
    for (const c of s.conns) tick(c, 5000);
    expect((await idle.goaway())?.code).toBe(H2Error.NO_ERROR);
    await idle.closedNow();
    expect(busy.closed).toBe(false);
    // once its stream goes, the idle time counts from the first tick that sees it idle
    busy.send(frame(T.RST_STREAM, 0, 1, u32(8)));
    await sync(busy, 'reset');
    for (const c of s.conns) tick(c, 5001);
    for (const c of s.conns) tick(c, 10_000);
    await sync(busy, 'still');
    expect(busy.closed).toBe(false);
    for (const c of s.conns) tick(c, 10_001);
    expect((await busy.goaway())?.code).toBe(H2Error.NO_ERROR);
  });

  it('a reply stalled on a zero window for stallTimeoutMs: the stream is reset (CANCEL)', async () => {
    const s = await server(L);
    const raw = await open(s, false);
    raw.send(PREFACE, frame(T.SETTINGS, 0, 0, setting(4, 0)));
    await raw.until((f) => f.type === T.SETTINGS && f.flags === 1);
    raw.send(frame(T.HEADERS, 4, 1, REQUEST), frame(T.DATA, 1, 1, Buffer.from('x')));
    await raw.until((f) => f.type === T.HEADERS && f.id === 1);
    for (const c of s.conns) tick(c, 1999);
    await sync(raw, 'stalled');
    expect(raw.frames.some((f) => f.type === T.RST_STREAM)).toBe(false);
    for (const c of s.conns) tick(c, 2000);
    expect(await raw.rst(1)).toBe(H2Error.CANCEL);
    expect(raw.frames.some((f) => f.type === T.DATA && f.id === 1)).toBe(false);
    expect(raw.closed).toBe(false);
  });
});
