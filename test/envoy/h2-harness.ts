/**
 * What the abuse and interop tests share: the server child
 * (h2-server-child.ts) started and asked for its stats, a raw HTTP/2 client
 * that writes any bytes and reads the server's frames, and the bytes of a
 * good ShouldRateLimit call.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { RLS_SERVICE, rlsServiceDefinition } from '../../src/envoy/grpc-server.js';
import type { H2Limits } from '../../src/envoy/h2.js';
import { encodeHeaders, HpackDecoder } from '../../src/envoy/hpack.js';
import type { ChildStats } from './h2-server-child.js';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
export const T = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
export const H2 = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  FLOW_CONTROL_ERROR: 3,
  SETTINGS_TIMEOUT: 4,
  FRAME_SIZE_ERROR: 6,
  STREAM_CLOSED: 5,
  REFUSED_STREAM: 7,
  CANCEL: 8,
  COMPRESSION_ERROR: 9,
  ENHANCE_YOUR_CALM: 11,
} as const;

export function frame(type: number, flags: number, id: number, payload: Buffer | number[] = []): Buffer {
  const p = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const h = Buffer.alloc(9);
  h.writeUIntBE(p.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, p]);
}
export const u32 = (v: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v);
  return b;
};
export const setting = (key: number, value: number): Buffer => {
  const b = Buffer.alloc(6);
  b.writeUInt16BE(key);
  b.writeUInt32BE(value, 2);
  return b;
};

export const RLS_PATH = `/${RLS_SERVICE}/ShouldRateLimit`;
const def = (rlsServiceDefinition() as unknown as Record<string, { requestSerialize(v: unknown): Buffer }>)
  .ShouldRateLimit!;

/** A RateLimitRequest on domain `edge` (always OK), framed as gRPC sends it. */
export function rlsMessage(address = '192.0.2.1', domain = 'edge', key = 'remote_address'): Buffer {
  const msg = def.requestSerialize({ domain, descriptors: [{ entries: [{ key, value: address }] }] });
  const out = Buffer.alloc(5 + msg.length);
  out.writeUInt32BE(msg.length, 1);
  msg.copy(out, 5);
  return out;
}

/** The request head of a ShouldRateLimit call, as one HPACK block of literals. */
export const RLS_HEADERS = encodeHeaders([
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', RLS_PATH],
  [':authority', '127.0.0.1'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
]);

/** The frames of one whole call on stream `id`: HEADERS, then DATA with END_STREAM. */
export function callFrames(id: number, message = rlsMessage()): Buffer {
  return Buffer.concat([frame(T.HEADERS, 4, id, RLS_HEADERS), frame(T.DATA, 1, id, message)]);
}

export interface Frame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** A raw HTTP/2 client: writes bytes, collects the server's frames (and how many bytes it read). */
export class Raw {
  readonly frames: Frame[] = [];
  closed = false;
  bytesIn = 0;
  private buf: Buffer = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  readonly hpack = new HpackDecoder();

  constructor(readonly socket: net.Socket) {
    socket.on('data', (c: Buffer) => {
      this.bytesIn += c.length;
      this.buf = this.buf.length === 0 ? c : Buffer.concat([this.buf, c]);
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
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', () => resolve());
      socket.once('error', reject);
    });
    const raw = new Raw(socket);
    if (handshake) {
      raw.send(PREFACE, frame(T.SETTINGS, 0, 0));
      await raw.until((f) => f.type === T.SETTINGS && f.flags === 1);
    }
    return raw;
  }

  send(...bufs: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(bufs.length === 1 ? bufs[0]! : Buffer.concat(bufs));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits for a frame matching `pred`, or the close (then undefined). */
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

  /** The RST_STREAM code on stream `id`, or undefined if the connection closed first. */
  async rst(id: number): Promise<number | undefined> {
    const f = await this.until((x) => x.type === T.RST_STREAM && x.id === id);
    return f?.payload.readUInt32BE(0);
  }

  /** The grpc-status of stream `id` (from its trailers, or a trailers-only reply), once the stream ended. */
  async grpcStatus(id: number): Promise<string | undefined> {
    const end = await this.until((x) => x.type === T.HEADERS && x.id === id && (x.flags & 1) !== 0);
    if (end === undefined) return undefined;
    const fields = this.hpack.decode(end.payload, 1 << 20).fields;
    for (let i = 0; i < fields.length; i += 2) if (fields[i] === 'grpc-status') return fields[i + 1];
    return undefined;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** The server child running. */
export interface Child {
  port: number;
  proc: ChildProcess;
  stats(): Promise<ChildStats>;
  stop(): Promise<void>;
}

const CHILD = fileURLToPath(new URL('./h2-server-child.ts', import.meta.url));

/** Options of the child server; with `limits` or `maxConnections` it runs the transport alone. */
export interface ChildOptions {
  limits?: Partial<H2Limits>;
  maxConnections?: number;
  maxConcurrentStreams?: number;
  requestTimeoutMs?: number;
  transport?: 'ratemesh' | 'node:http2';
}

/** Starts the server child and waits for its port. */
export async function startChild(opts: ChildOptions = {}): Promise<Child> {
  const proc = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', CHILD], {
    env: { ...process.env, H2_CHILD_OPTS: JSON.stringify(opts) },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) resolve((JSON.parse(out.slice(0, nl)) as { port: number }).port);
    });
    proc.once('exit', (code) => reject(new Error(`server child exited (${code}) before its port`)));
  });
  let next = 0;
  return {
    port,
    proc,
    stats: () =>
      new Promise<ChildStats>((resolve) => {
        const id = next++;
        const on = (m: { id: number; stats: ChildStats }) => {
          if (m.id !== id) return;
          proc.off('message', on);
          resolve(m.stats);
        };
        proc.on('message', on);
        proc.send({ cmd: 'stats', id });
      }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.disconnect();
        setTimeout(() => proc.kill('SIGKILL'), 3000).unref();
      }),
  };
}

/** One good call on a fresh connection: its grpc-status ('0' when answered OK). */
export async function goodCall(port: number): Promise<string | undefined> {
  const raw = await Raw.open(port);
  try {
    raw.send(callFrames(1));
    return await raw.grpcStatus(1);
  } finally {
    raw.destroy();
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Prints a table: a title, then the columns padded to their widest cell. */
export function printRows(title: string, header: string[], rows: string[][]): void {
  const table = [header, ...rows];
  const w = header.map((_, i) => Math.max(...table.map((r) => (r[i] ?? '').length)));
  console.log(`\n${title}\n${table.map((r) => r.map((c, i) => c.padEnd(w[i]!)).join('  ')).join('\n')}`);
}
