/**
 * Hostile inputs against the gRPC server's HTTP/2, the server in a process
 * of its own (h2-server-child.ts) with short timeouts (LIMITS): after every case the
 * process still answers a good call on a new connection, its RSS (after a
 * GC) stays within {@link RSS_BOUND} of where it started, no exception
 * escaped a connection handler, and the attacking connection got the
 * answer RFC 9113 or the limits give (GOAWAY code, reset, or closure).
 * Every loop is bounded in count; waits end at the test timeout at most.
 * Prints the table of cases at the end.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeHeaders } from '../../src/envoy/hpack.js';
import {
  type Child,
  callFrames,
  frame,
  goodCall,
  H2,
  PREFACE,
  printRows,
  Raw,
  RLS_HEADERS,
  RLS_PATH,
  rlsMessage,
  setting,
  sleep,
  startChild,
  T,
  u32,
} from './h2-harness.js';

/** The server's RSS may grow at most this much over its start, across all the cases. */
const RSS_BOUND = 96 * 1024 * 1024;
/**
 * Short timeouts; a nuisance budget of 500 a tick (not 2,500) so that a flood
 * trips it within one tick even when a loaded machine slows the server's reads;
 * idle long enough that a flood's connection is not closed as idle first.
 */
const LIMITS = {
  prefaceTimeoutMs: 400,
  frameTimeoutMs: 400,
  idleTimeoutMs: 3000,
  stallTimeoutMs: 400,
  nuisancePerTick: 500,
};

let child: Child;
let baseRss = 0;
const rows: string[][] = [];

beforeAll(async () => {
  child = await startChild({ limits: LIMITS, maxConnections: 2000, requestTimeoutMs: 1000 });
  // a few calls first, so that the baseline has the code paths warm
  for (let i = 0; i < 5; i++) expect(await goodCall(child.port)).toBe('0');
  baseRss = (await child.stats()).rss;
});

afterAll(async () => {
  printRows(
    `HTTP/2 abuse (server child; RSS bound ${RSS_BOUND / 2 ** 20} MiB over its start, ${(baseRss / 2 ** 20).toFixed(1)} MiB)`,
    ['case', 'the attacker got', 'good call after', 'server RSS vs start'],
    rows,
  );
  await child?.stop();
});

/** After a case: a good call answered, RSS within the bound, nothing uncaught; the row recorded. */
async function check(name: string, got: string): Promise<void> {
  const good = await goodCall(child.port);
  const st = await child.stats();
  const delta = st.rss - baseRss;
  rows.push([
    name,
    got,
    good === '0' ? 'OK' : `FAILED (${good})`,
    `${delta >= 0 ? '+' : ''}${(delta / 2 ** 20).toFixed(1)} MiB`,
  ]);
  expect(good).toBe('0');
  expect(st.uncaught).toBe(0);
  expect(delta).toBeLessThan(RSS_BOUND);
}

const codeName = (code: number | undefined): string =>
  code === undefined ? 'closed' : (Object.entries(H2).find(([, v]) => v === code)?.[0] ?? String(code));

async function open(handshake = true): Promise<Raw> {
  return Raw.open(child.port, handshake);
}

/** An HPACK integer with an N-bit prefix. */
function hpackInt(first: number, prefix: number, v: number): number[] {
  const mask = (1 << prefix) - 1;
  if (v < mask) return [first | v];
  const out = [first | mask];
  let rest = v - mask;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/** A header block split into HEADERS + CONTINUATION frames of at most 16 KiB. */
function headerFrames(id: number, block: Buffer, endStream: boolean): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < block.length; at += 16_384) {
    const last = at + 16_384 >= block.length;
    const flags = (at === 0 && endStream ? 1 : 0) | (last ? 4 : 0);
    out.push(frame(at === 0 ? T.HEADERS : T.CONTINUATION, flags, id, block.subarray(at, at + 16_384)));
  }
  return out;
}

describe('HPACK', () => {
  it('a bomb: one 4 KiB entry indexed 16,000 times (64 MB of headers from 40 KB): the stream is refused', async () => {
    const raw = await open();
    const bomb = [0x40, ...hpackInt(0, 7, 6), ...Buffer.from('x-bomb'), ...hpackInt(0, 7, 4000)];
    const block = Buffer.concat([
      RLS_HEADERS,
      Buffer.from(bomb),
      Buffer.alloc(4000, 0x61),
      Buffer.alloc(16_000, 0xbe), // index 62: the entry just added
    ]);
    raw.send(...headerFrames(1, block, true));
    const code = await raw.rst(1);
    expect(code).toBe(H2.ENHANCE_YOUR_CALM);
    // the connection goes on, its table in step: a call on it is answered
    raw.send(callFrames(3));
    expect(await raw.grpcStatus(3)).toBe('0');
    raw.destroy();
    await check('HPACK bomb (16,000 x a 4 KiB entry)', `RST_STREAM ${codeName(code)}, connection kept`);
  });

  it('dynamic-table games: a size past 4096, a size update after a field, an index past the table: COMPRESSION_ERROR', async () => {
    const got: string[] = [];
    const cases: Buffer[] = [
      Buffer.from(hpackInt(0x20, 5, 4097)),
      Buffer.concat([RLS_HEADERS, Buffer.from(hpackInt(0x20, 5, 0))]),
      Buffer.from(hpackInt(0x80, 7, 62 + 5)),
      Buffer.from([0x40, 0x7f]), // a name length running past the block
    ];
    for (const block of cases) {
      const raw = await open();
      raw.send(frame(T.HEADERS, 5, 1, block));
      const g = await raw.goaway();
      expect(g?.code, block.toString('hex')).toBe(H2.COMPRESSION_ERROR);
      got.push(codeName(g?.code));
      raw.destroy();
    }
    // a table filled, evicted and resized (1,000 size updates before the fields): legal, and answered
    const raw = await open();
    const churn: number[] = [];
    for (let i = 0; i < 1000; i++) churn.push(...hpackInt(0x20, 5, i % 2 === 0 ? 0 : 4096));
    const fill: Buffer[] = [];
    for (let i = 0; i < 200; i++)
      fill.push(
        encodeHeaders([]),
        Buffer.from([0x40, 0x05, ...Buffer.from(`x-${String(i).padStart(3, '0')}`), 0x03, 0x61, 0x62, 0x63]),
      );
    raw.send(
      frame(T.HEADERS, 4, 1, Buffer.concat([Buffer.from(churn), RLS_HEADERS, ...fill])),
      frame(T.DATA, 1, 1, rlsMessage()),
    );
    expect(await raw.grpcStatus(1)).toBe('0');
    raw.destroy();
    await check(
      'HPACK table games (4 kinds) + 1,000 size updates',
      `GOAWAY ${got.join(', ')}; legal churn answered`,
    );
  });
});

describe('CONTINUATION', () => {
  it('a flood: 9 CONTINUATIONs after a HEADERS, and 10 connections of 16 KiB fragments past 64 KiB: ENHANCE_YOUR_CALM', async () => {
    const raw = await open();
    raw.send(frame(T.HEADERS, 0, 1, RLS_HEADERS));
    for (let i = 0; i < 9; i++) raw.send(frame(T.CONTINUATION, 0, 1, Buffer.from([0x82])));
    const g = await raw.goaway();
    expect(g?.code).toBe(H2.ENHANCE_YOUR_CALM);
    raw.destroy();
    const big = await Promise.all(Array.from({ length: 10 }, () => open()));
    for (const r of big) {
      r.send(frame(T.HEADERS, 0, 1, Buffer.alloc(16_000, 0x82)));
      for (let i = 0; i < 5; i++) r.send(frame(T.CONTINUATION, 0, 1, Buffer.alloc(16_000, 0x82)));
    }
    const codes = await Promise.all(big.map((r) => r.goaway()));
    for (const c of codes) expect(c?.code).toBe(H2.ENHANCE_YOUR_CALM);
    for (const r of big) r.destroy();
    await check('CONTINUATION flood (9 frames; 10 x 96 KB blocks)', `GOAWAY ${codeName(g?.code)} (all 11)`);
  });

  it('a drip: empty CONTINUATIONs, then 1-byte ones, every 50 ms: cut off by the frame cap or the header block timeout', async () => {
    const empty = await open();
    const oneByte = await open();
    empty.send(frame(T.HEADERS, 0, 1));
    oneByte.send(frame(T.HEADERS, 0, 1, Buffer.from([0x83])));
    // at most 40 drips each (2 s): the cap (8) or the timeout (400 ms) ends both long before
    for (let i = 0; i < 40 && !(empty.closed && oneByte.closed); i++) {
      empty.send(frame(T.CONTINUATION, 0, 1));
      if (i < 6) oneByte.send(frame(T.CONTINUATION, 0, 1, Buffer.from([0x86])));
      await sleep(50);
    }
    const a = await empty.goaway();
    const b = await oneByte.goaway();
    expect(a?.code).toBe(H2.ENHANCE_YOUR_CALM);
    expect(b?.code).toBe(H2.ENHANCE_YOUR_CALM);
    await empty.closedNow();
    await oneByte.closedNow();
    await check(
      'CONTINUATION drip (empty; 1 byte, 6 of them)',
      `GOAWAY ${codeName(a?.code)}; GOAWAY ${codeName(b?.code)} (timeout)`,
    );
  });
});

describe('floods', () => {
  it('rapid reset: 5,000 HEADERS + RST_STREAM in one write: ENHANCE_YOUR_CALM', async () => {
    const raw = await open();
    const burst: Buffer[] = [];
    for (let i = 0; i < 5000; i++)
      burst.push(frame(T.HEADERS, 4, 1 + 2 * i, RLS_HEADERS), frame(T.RST_STREAM, 0, 1 + 2 * i, u32(8)));
    raw.send(...burst);
    const g = await raw.goaway();
    expect(g?.code).toBe(H2.ENHANCE_YOUR_CALM);
    raw.destroy();
    await check(
      'rapid reset (5,000 HEADERS + RST_STREAM)',
      `GOAWAY ${codeName(g?.code)} after stream ${g?.last}`,
    );
  });

  it('SETTINGS and PING floods, and one SETTINGS frame of 2,730 entries: ENHANCE_YOUR_CALM', async () => {
    const got: string[] = [];
    const attacks: Buffer[][] = [
      Array.from({ length: 3000 }, () => frame(T.SETTINGS, 0, 0)),
      Array.from({ length: 3000 }, () => frame(T.PING, 0, 0, Buffer.alloc(8))),
      [
        frame(
          T.SETTINGS,
          0,
          0,
          Buffer.concat(Array.from({ length: 2730 }, (_, i) => setting(0x10 + (i % 100), i))),
        ),
      ],
    ];
    for (const a of attacks) {
      const raw = await open();
      raw.send(...a);
      const g = await raw.goaway();
      expect(g?.code).toBe(H2.ENHANCE_YOUR_CALM);
      got.push(codeName(g?.code));
      raw.destroy();
    }
    await check('SETTINGS flood, PING flood, 2,730-entry SETTINGS', `GOAWAY ${got.join(', ')}`);
  });
});

describe('slow and stalled peers', () => {
  it('a client that never reads its replies: its connection is dropped', async () => {
    // its windows wide open (so that flow control does not hold the replies back), then it stops reading
    const raw = await open(false);
    raw.send(
      PREFACE,
      frame(T.SETTINGS, 0, 0, setting(4, 2 ** 31 - 1)),
      frame(T.WINDOW_UPDATE, 0, 0, u32(2 ** 31 - 1 - 65_535)),
    );
    await raw.until((f) => f.type === T.SETTINGS && f.flags === 1);
    raw.socket.pause();
    const before = (await child.stats()).errors['the client does not read its replies'] ?? 0;
    // bounded: at most 4,000 writes of 100 calls (400,000 calls) or 20 s
    const end = Date.now() + 20_000;
    let id = 1;
    let dropped = false;
    for (let i = 0; i < 4000 && Date.now() < end; i++) {
      const batch: Buffer[] = [];
      for (let j = 0; j < 100; j++, id += 2) batch.push(callFrames(id));
      raw.send(...batch);
      await sleep(i % 10 === 0 ? 20 : 0);
      if (
        i % 50 === 49 &&
        ((await child.stats()).errors['the client does not read its replies'] ?? 0) > before
      ) {
        dropped = true;
        break;
      }
      if (raw.socket.destroyed) break;
    }
    if (!dropped) {
      await sleep(1000);
      dropped = ((await child.stats()).errors['the client does not read its replies'] ?? 0) > before;
    }
    expect(dropped, JSON.stringify((await child.stats()).errors)).toBe(true);
    raw.destroy();
    await check('a client that never reads', `dropped after ${(id - 1) / 2} calls`);
  });

  it('a client that never opens its window: the stalled reply is reset (CANCEL), then the idle connection closed', async () => {
    const raw = await open(false);
    raw.send(PREFACE, frame(T.SETTINGS, 0, 0, setting(4, 0)));
    await raw.until((f) => f.type === T.SETTINGS && f.flags === 1);
    raw.send(callFrames(1));
    const code = await raw.rst(1);
    expect(code).toBe(H2.CANCEL);
    const g = await raw.goaway();
    expect(g?.code).toBe(H2.NO_ERROR);
    await raw.closedNow();
    await check(
      'a client that never opens its window',
      `RST_STREAM ${codeName(code)}, then GOAWAY ${codeName(g?.code)} (idle)`,
    );
  });

  it('a slow preface (a byte every 50 ms) and a frame a byte at a time: closed by their timeouts', async () => {
    const slow = await open(false);
    const drip = await open();
    const whole = callFrames(1);
    // at most 24 preface bytes and 40 frame bytes, 50 ms apart
    for (let i = 0; i < 40 && !(slow.closed && drip.closed); i++) {
      if (i < PREFACE.length) slow.send(PREFACE.subarray(i, i + 1));
      drip.send(whole.subarray(i, i + 1));
      await sleep(50);
    }
    await slow.closedNow();
    const g = await drip.goaway();
    expect(g?.code).toBe(H2.ENHANCE_YOUR_CALM);
    await drip.closedNow();
    await check('slow preface; a frame a byte at a time', `closed; GOAWAY ${codeName(g?.code)}`);
  });

  it('a thousand idle connections: others are served meanwhile; all are closed (GOAWAY NO_ERROR) once idle', async () => {
    const idle: Raw[] = [];
    for (let i = 0; i < 10; i++) idle.push(...(await Promise.all(Array.from({ length: 100 }, () => open()))));
    expect(await goodCall(child.port)).toBe('0');
    const held = (await child.stats()).rss - baseRss;
    const codes = await Promise.all(idle.map((r) => r.goaway()));
    expect(codes.every((c) => c?.code === H2.NO_ERROR)).toBe(true);
    await Promise.all(idle.map((r) => r.closedNow()));
    await check(
      '1,000 idle connections',
      `all GOAWAY NO_ERROR (idle); ${held >= 0 ? '+' : ''}${(held / 2 ** 20).toFixed(1)} MiB while held`,
    );
  });

  it('the connection cap: one past it gets GOAWAY ENHANCE_YOUR_CALM; a place freed is taken again', async () => {
    const capped = await startChild({ maxConnections: 20 });
    try {
      const held = await Promise.all(Array.from({ length: 20 }, () => Raw.open(capped.port)));
      const over = await Raw.open(capped.port, false);
      over.send(PREFACE, frame(T.SETTINGS, 0, 0));
      const g = await over.goaway();
      expect(g).toEqual({ last: 0, code: H2.ENHANCE_YOUR_CALM });
      await over.closedNow();
      held[0]!.destroy();
      await held[0]!.closedNow();
      await sleep(50);
      expect(await goodCall(capped.port)).toBe('0');
      for (const r of held) r.destroy();
      rows.push([
        'connection cap (20)',
        `21st: GOAWAY ${codeName(g?.code)}, last stream 0`,
        'OK (after one left)',
        '-',
      ]);
    } finally {
      await capped.stop();
    }
  });
});

/** A small seeded PRNG (mulberry32): the same mutants every run. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** What a node:http2 client (nghttp2) sends for five calls: the bytes, recorded through a proxy. */
async function capture(port: number): Promise<Buffer> {
  const recorded: Buffer[] = [];
  const proxy = net.createServer((c) => {
    const up = net.connect(port, '127.0.0.1');
    c.on('data', (d: Buffer) => {
      recorded.push(Buffer.from(d));
      up.write(d);
    });
    up.pipe(c);
    c.on('error', () => up.destroy());
    up.on('error', () => c.destroy());
    c.on('close', () => up.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const session = http2.connect(`http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`);
  for (let i = 0; i < 5; i++) {
    await new Promise<void>((resolve) => {
      const s = session.request({
        ':method': 'POST',
        ':path': RLS_PATH,
        'content-type': 'application/grpc',
        te: 'trailers',
        'x-request-id': `req-${i}`,
        'user-agent': 'capture/1.0',
      });
      s.on('data', () => {});
      s.on('close', () => resolve());
      s.end(rlsMessage(`192.0.2.${i}`));
    });
  }
  session.close();
  await new Promise<void>((r) => proxy.close(() => r()));
  return Buffer.concat(recorded);
}

describe('mutation fuzz', () => {
  it('600 mutants of captured valid traffic: nothing escapes, the server keeps answering', async () => {
    const valid = await capture(child.port);
    expect(valid.subarray(0, PREFACE.length)).toEqual(PREFACE);
    const rand = rng(29);
    const outcomes: Record<string, number> = {};
    const mutate = (): Buffer => {
      const b = Buffer.from(valid);
      const n = 1 + Math.floor(rand() * 4);
      let out = b;
      for (let k = 0; k < n; k++) {
        const at = PREFACE.length + Math.floor(rand() * (out.length - PREFACE.length));
        const op = Math.floor(rand() * 5);
        if (op === 0) out[at] = Math.floor(rand() * 256);
        else if (op === 1) out[at] = out[at]! ^ (1 << Math.floor(rand() * 8));
        else if (op === 2)
          out = Buffer.concat([
            out.subarray(0, at),
            out.subarray(Math.min(out.length, at + 1 + Math.floor(rand() * 16))),
          ]);
        else if (op === 3)
          out = Buffer.concat([out.subarray(0, at), out.subarray(at, at + 32), out.subarray(at)]);
        else out = out.subarray(0, at);
      }
      return out;
    };
    const one = async (): Promise<void> => {
      const raw = await open(false);
      raw.send(mutate());
      await Promise.race([raw.closedNow(), sleep(150)]);
      const g = raw.frames.find((f) => f.type === T.GOAWAY);
      const answered = raw.frames.some((f) => f.type === T.HEADERS);
      const k =
        g !== undefined
          ? `GOAWAY ${codeName(g.payload.readUInt32BE(4))}`
          : answered
            ? 'answered'
            : raw.closed
              ? 'closed'
              : 'open, waiting';
      outcomes[k] = (outcomes[k] ?? 0) + 1;
      raw.destroy();
    };
    for (let round = 0; round < 60; round++) await Promise.all(Array.from({ length: 10 }, one));
    const total = Object.values(outcomes).reduce((a, b) => a + b, 0);
    expect(total).toBe(600);
    const summary = Object.entries(outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    await check(`mutation fuzz (600 mutants of ${valid.length} B)`, summary);
  });
});
