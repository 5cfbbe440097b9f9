/**
 * A bare TCP round trip between processes on loopback (no libp2p, no engine): the floor under an
 * owner ask (mesh-test/owner-drill.ts, mesh-test/bare-floor.ts). Each process serves an echo on
 * its port; a {@link BareLink} pings another's with 8 bytes, echoed in order.
 */
import { connect, createServer, type Socket } from 'node:net';

/** Echoes what arrives on `port` (loopback). */
export function serveEcho(port: number): void {
  createServer((s) => {
    s.setNoDelay(true);
    s.on('data', (b) => s.write(b));
    s.on('error', () => undefined);
  }).listen(port, '127.0.0.1');
}

/** A persistent link to the echo on `port`: each ping resolves with its round trip in ms (NaN once the link is gone). */
export class BareLink {
  private readonly waiting: ((ms: number) => void)[] = [];
  private readonly sentAt: number[] = [];
  private got = 0;
  private dead = false;
  private readonly sock: Socket;

  constructor(port: number) {
    this.sock = connect(port, '127.0.0.1');
    this.sock.setNoDelay(true);
    this.sock.on('data', (b) => {
      this.got += b.length;
      while (this.got >= 8 && this.waiting.length > 0) {
        this.got -= 8;
        this.waiting.shift()!(performance.now() - this.sentAt.shift()!);
      }
    });
    const end = (): void => {
      this.dead = true;
      for (const w of this.waiting.splice(0)) w(Number.NaN);
      this.sentAt.length = 0;
    };
    this.sock.on('error', end);
    this.sock.on('close', end);
  }

  ping(): Promise<number> {
    if (this.dead) return Promise.resolve(Number.NaN);
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.sentAt.push(performance.now());
      this.sock.write(Buffer.alloc(8));
    });
  }
}
