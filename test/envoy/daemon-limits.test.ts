/**
 * The `grpc` section's transport limits reach a real daemon's RLS server: a
 * daemon started from a config file with a connection cap of 2 and an idle
 * timeout of 600 ms refuses a third connection on loopback and closes idle
 * ones, on each transport the config can choose. Bounded in count (three
 * connections) and in time (the idle timeout; the waits end on the server's
 * frames or the close, with the test's timeout as the only wall-clock bound).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/daemon/config.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { memoryLogger } from '../daemon/fake-limiter.js';
import { callFrames, frame, goodCall, H2, PREFACE, Raw, T } from './h2-harness.js';
import { EngineLimiter } from './helpers.js';

const IDLE_MS = 600;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ratemesh-grpc-limits-'));
  writeFileSync(
    join(dir, 'edge.yaml'),
    'domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 1000000 }\n',
  );
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let daemon: Daemon | undefined;
const raws: Raw[] = [];
afterEach(async () => {
  for (const r of raws.splice(0)) r.destroy();
  await daemon?.stop();
  daemon = undefined;
});

async function start(
  transport: string,
  extra = '',
): Promise<{ port: number; log: ReturnType<typeof memoryLogger> }> {
  const file = join(dir, `daemon-${transport.replace(':', '-')}.yaml`);
  writeFileSync(
    file,
    `http: { host: 127.0.0.1, port: 0, drainTimeoutMs: 500 }
mesh: { listen: [/ip4/127.0.0.1/tcp/0] }
log: { level: silent }
envoy: { files: [edge.yaml] }
grpc:
  port: 0
  transport: ${transport}
  maxConnections: 2
  idleTimeoutMs: ${IDLE_MS}
${extra}`,
  );
  const log = memoryLogger();
  daemon = await startDaemon({
    config: loadConfig({ argv: ['--config', file], env: {} }),
    logger: log,
    createLimiter: (o) => new EngineLimiter(o.policies),
  });
  return { port: daemon.grpc!.port, log };
}

async function open(port: number, handshake = true): Promise<Raw> {
  const r = await Raw.open(port, handshake);
  raws.push(r);
  return r;
}

describe.each(['ratemesh', 'node:http2'] as const)(
  'a daemon with grpc { transport: %s, maxConnections: 2, idleTimeoutMs }',
  (transport) => {
    it('refuses the third connection, closes idle ones after the timeout, then serves again', async () => {
      const { port, log } = await start(transport);
      const started = log.lines.find((l) => l.msg === 'ratemesh node started');
      expect(started?.obj).toMatchObject({ grpcTransport: transport });

      const t0 = performance.now();
      const a = await open(port);
      const b = await open(port);
      a.send(callFrames(1));
      expect(await a.grpcStatus(1)).toBe('0');

      // the third: over the cap, closed without a stream; ours says why first
      const c = await open(port, false);
      c.send(PREFACE, frame(T.SETTINGS, 0, 0));
      await c.closedNow();
      if (transport === 'ratemesh') {
        expect(c.frames.find((f) => f.type === T.GOAWAY)?.payload.readUInt32BE(4)).toBe(H2.ENHANCE_YOUR_CALM);
      } else {
        // node's net server drops a socket over server.maxConnections before HTTP/2 sees it
        expect(c.frames).toEqual([]);
      }

      // both held ones are closed once idle (GOAWAY NO_ERROR), not before the timeout
      const goaways = await Promise.all([a.goaway(), b.goaway()]);
      expect(goaways.map((g) => g?.code)).toEqual([H2.NO_ERROR, H2.NO_ERROR]);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(IDLE_MS - 50);
      await Promise.all([a.closedNow(), b.closedNow()]);

      // the places are free again
      expect(await goodCall(port)).toBe('0');
    }, 10_000);
  },
);

describe('a daemon on node:http2 with limits that transport does not apply', () => {
  it('warns, naming them', async () => {
    const { log } = await start(
      'node:http2',
      '  maxContinuations: 4\n  frameTimeoutMs: 5000\n  stallTimeoutMs: 5000\n',
    );
    const warn = log.lines.find((l) => l.level === 'warn' && /node:http2/.test(l.msg ?? ''));
    expect(warn?.obj).toEqual({
      transport: 'node:http2',
      ignored: ['grpc.maxContinuations', 'grpc.frameTimeoutMs'],
    });
  });
});
