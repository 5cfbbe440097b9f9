/**
 * CPU per call of h2.ts alone, no network: an H2Connection on an in-memory
 * socket is fed CALLS gRPC-shaped calls (HEADERS + DATA, in reads of 100
 * calls, the header block as a client with HPACK indexing sends it after the
 * first) and answers each as grpc-transport.ts does (headers, one message,
 * trailers). Prints the CPU time per call. For a before/after of the
 * transport's own cost (scheduling and loopback out of the figure):
 *
 *   farm-bench -n 9 -- npx tsx scripts/h2-cpu.ts --vs 'npx tsx OTHER_TREE/scripts/h2-cpu.ts'
 *
 * H2_ROOT=dir runs the h2.ts and hpack.ts of another tree (an older checkout)
 * with this driver. CALLS (default 200,000) to change.
 */
import { EventEmitter } from 'node:events';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = resolve(process.env.H2_ROOT ?? new URL('..', import.meta.url).pathname);
const h2 = (await import(
  pathToFileURL(`${root}/src/envoy/h2.ts`).href
)) as typeof import('../src/envoy/h2.js');
const hpack = (await import(
  pathToFileURL(`${root}/src/envoy/hpack.ts`).href
)) as typeof import('../src/envoy/hpack.js');
const CALLS = Number(process.env.CALLS ?? 200_000);

/** The socket surface H2Connection uses. */
class MemorySocket extends EventEmitter {
  writableLength = 0;
  bytesWritten = 0;
  destroyed = false;
  out = 0;
  write(b: Buffer): boolean {
    this.out += b.length;
    this.bytesWritten += b.length;
    return true;
  }
  end(): void {}
  destroy(): void {
    this.destroyed = true;
  }
  setTimeout(): void {}
  pause(): void {}
  resume(): void {}
}

function frame(type: number, flags: number, id: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9 + payload.length);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  payload.copy(h, 9);
  return h;
}

// the first block as literals with incremental indexing (a client's first request), later ones as indexes
const fields: [string, string][] = [
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit'],
  [':authority', '127.0.0.1:8081'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
  ['grpc-timeout', '20m'],
  ['user-agent', 'envoy/1.30'],
];
const literalIndexed = (name: string, value: string): Buffer =>
  Buffer.concat([
    Buffer.from([0x40, name.length]),
    Buffer.from(name),
    Buffer.from([value.length]),
    Buffer.from(value),
  ]);
const first = Buffer.concat(fields.map(([n, v]) => literalIndexed(n, v)));
const later = Buffer.from(fields.map((_, i) => 0x80 | (62 + fields.length - 1 - i)));
const message = Buffer.concat([Buffer.from([0, 0, 0, 0, 34]), Buffer.alloc(34, 7)]);
const OK_HEADERS = hpack.encodeHeaders([
  [':status', '200'],
  ['content-type', 'application/grpc'],
]);
const OK_TRAILERS = hpack.encodeHeaders([['grpc-status', '0']]);
const reply = Buffer.alloc(5 + 40, 1);

const socket = new MemorySocket();
let answered = 0;
const conn = new h2.H2Connection(socket as never, {
  maxConcurrentStreams: 256,
  maxHeaderListSize: 16 * 1024,
  onStream(s) {
    s.onData = (_chunk, end) => {
      if (!end) return;
      s.respond(OK_HEADERS, false);
      s.write(reply);
      s.end(OK_TRAILERS);
      answered++;
    };
  },
});
socket.emit(
  'data',
  Buffer.concat([
    Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
    frame(4, 0, 0, Buffer.alloc(0)),
    // the client's connection window opened to 2^31 - 1 at once: the replies never wait for it
    frame(8, 0, 0, Buffer.from([0x7f, 0xff, 0x00, 0x00])),
  ]),
);
const batch = (start: number): Buffer => {
  const parts: Buffer[] = [];
  for (let i = 0; i < 100; i++) {
    const id = start + 2 * i;
    parts.push(frame(1, 4, id, id === 1 ? first : later), frame(0, 1, id, message));
  }
  return Buffer.concat(parts);
};
const t0 = process.cpuUsage();
let id = 1;
for (let n = 0; n < CALLS; n += 100) {
  // ids stay below 2^31; a new connection's worth every 1,000,000 calls is not needed at these counts
  socket.emit('data', batch(id));
  id += 200;
  if (n % 10_000 === 0) (conn as unknown as { tick(x?: number): void }).tick(1);
}
const cpu = process.cpuUsage(t0);
if (answered !== CALLS || socket.destroyed)
  throw new Error(`answered ${answered} of ${CALLS}, destroyed ${socket.destroyed}`);
console.log(
  `${root}: ${CALLS} calls, ${((cpu.user + cpu.system) / CALLS).toFixed(2)} us CPU per call (h2.ts + hpack.ts, in memory), ${(socket.out / CALLS).toFixed(0)} B out per call`,
);
