import { ManualClock } from '../../src/clock.js';
import type { EngineFactory } from '../../src/mesh/engine-port.js';
import { createMeshLimiter } from '../../src/mesh/index.js';
import type { Logger, MeshLimiter, MeshLimiterOptions } from '../../src/mesh/types.js';
import type { PolicySpec } from '../../src/types.js';

export const LOOPBACK = ['/ip4/127.0.0.1/tcp/0'];

export const POLICIES: PolicySpec[] = [{ name: 'api', limit: 100, windowMs: 1_000 }];

/** Collects log lines so tests can assert on warnings; prints nothing. */
export class MemoryLogger implements Logger {
  readonly lines: Array<{ level: string; obj: object; msg: string | undefined }> = [];
  debug(obj: object, msg?: string): void {
    this.lines.push({ level: 'debug', obj, msg });
  }
  info(obj: object, msg?: string): void {
    this.lines.push({ level: 'info', obj, msg });
  }
  warn(obj: object, msg?: string): void {
    this.lines.push({ level: 'warn', obj, msg });
  }
  error(obj: object, msg?: string): void {
    this.lines.push({ level: 'error', obj, msg });
  }
  has(level: string, text: string): boolean {
    return this.lines.some((l) => l.level === level && (l.msg ?? '').includes(text));
  }
}

/** Polls `cond` every `stepMs` until it holds; fails after `timeoutMs` with `what`. */
export async function waitFor(
  what: string,
  cond: () => boolean,
  timeoutMs = 20_000,
  stepMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** Past its start gate: it decides global policies (EngineStats.starting false). */
export function deciding(node: MeshLimiter): boolean {
  return !node.stats().engine.starting;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** A full multiaddr (with /p2p/<id>) another node can bootstrap from. */
export function dialable(node: MeshLimiter): string {
  const a = node.multiaddrs().find((m) => m.includes('/ip4/127.0.0.1/'));
  if (a === undefined) throw new Error(`node ${node.peerId} has no loopback address`);
  return a;
}

/** Tracks started nodes so every test stops what it started, even when it fails. */
export class Cluster {
  readonly nodes: MeshLimiter[] = [];

  async add(opts: Partial<MeshLimiterOptions> & { engineFactory?: EngineFactory }): Promise<MeshLimiter> {
    const node = createMeshLimiter({
      policies: POLICIES,
      listen: LOOPBACK,
      gossipIntervalMs: 50,
      heartbeatMs: 200,
      discoveryIntervalMs: 300,
      logger: new MemoryLogger(),
      ...opts,
    });
    this.nodes.push(node);
    await node.start();
    return node;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
    this.nodes.length = 0;
  }
}

export { ManualClock };
