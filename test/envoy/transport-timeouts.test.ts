/**
 * The gRPC server's timeouts hold on both transports, ratemesh's HTTP/2 and
 * the node:http2 fallback (grpc-transport-node.ts): a connection that never
 * sends its preface, or drips it, is closed after prefaceTimeoutMs; an idle
 * one after idleTimeoutMs (not before); a header block left open, a partial
 * frame and a frame sent a byte at a time are closed (ours at frameTimeoutMs,
 * the fallback, which cannot see them, at its idle timeout and then
 * CLOSE_GRACE_MS); a reply stalled on a zero window is reset (CANCEL) after
 * stallTimeoutMs and its connection then closed as idle; a server stream
 * (Health/Watch) keeps its connection past the idle timeout until it ends.
 *
 * Timeouts are set small (200 ms to 800 ms); each assertion is "closed
 * within the timeout plus SLACK", a generous bound (the sweep checks every
 * 250 ms), and "not before the timeout" where that is the point. Every wait
 * ends on the server's frames or its close; the bounds only decide failure.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { HEALTH_SERVICE, type RlsServer, startRlsServer } from '../../src/envoy/grpc-server.js';
import { CLOSE_GRACE_MS } from '../../src/envoy/grpc-transport-node.js';
import type { H2Limits } from '../../src/envoy/h2.js';
import { encodeHeaders } from '../../src/envoy/hpack.js';
import { RlsService } from '../../src/envoy/service.js';
import { callFrames, frame, H2, PREFACE, Raw, RLS_HEADERS, setting, sleep, T } from './h2-harness.js';
import { config, EngineLimiter } from './helpers.js';

const YAML = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
`;

/** How late past its timeout a close may come and still pass (the sweep is 250 ms; a loaded machine). */
const SLACK = 1500;

let server: RlsServer | undefined;
let limiter: EngineLimiter | undefined;
const raws: Raw[] = [];
afterEach(async () => {
  for (const r of raws.splice(0)) r.destroy();
  await server?.stop(100);
  await limiter?.stop();
  server = undefined;
  limiter = undefined;
});

async function start(transport: 'ratemesh' | 'node:http2', limits: Partial<H2Limits>): Promise<number> {
  const cfg = config(YAML);
  limiter = new EngineLimiter(cfg.policies);
  await limiter.start();
  server = await startRlsServer({
    service: new RlsService({ config: cfg, limiter }),
    host: '127.0.0.1',
    port: 0,
    logger: { debug() {}, info() {}, warn() {}, error() {} },
    transport,
    limits,
    requestTimeoutMs: 300,
  });
  server.setServing(true);
  return server.port;
}

async function open(port: number, handshake = true): Promise<Raw> {
  const r = await Raw.open(port, handshake);
  raws.push(r);
  return r;
}

/** Milliseconds from `t0` until `r` is closed, or Infinity if still open after `boundMs` from t0. */
async function closedAfter(r: Raw, t0: number, boundMs: number): Promise<number> {
  const left = Math.max(0, t0 + boundMs - performance.now());
  const closed = await Promise.race([r.closedNow().then(() => true), sleep(left).then(() => false)]);
  return closed ? performance.now() - t0 : Number.POSITIVE_INFINITY;
}

/** Writes `bytes` one at a time, 50 ms apart, until they are all out or the connection closes. */
function drip(r: Raw, bytes: Buffer): void {
  void (async () => {
    for (let i = 0; i < bytes.length && !r.closed; i++) {
      r.send(bytes.subarray(i, i + 1));
      await sleep(50);
    }
  })();
}

const WATCH_HEADERS = encodeHeaders([
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', `/${HEALTH_SERVICE}/Watch`],
  [':authority', '127.0.0.1'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
]);

describe.each(['ratemesh', 'node:http2'] as const)('timeouts on the %s transport', (transport) => {
  it('no preface, a preface a byte every 50 ms, a preface without SETTINGS: closed after prefaceTimeoutMs', async () => {
    const PREFACE_MS = 200;
    const port = await start(transport, { prefaceTimeoutMs: PREFACE_MS, idleTimeoutMs: 60_000 });
    const t0 = performance.now();
    const silent = await open(port, false);
    const dripping = await open(port, false);
    drip(dripping, PREFACE);
    const half = await open(port, false);
    half.send(PREFACE);
    const after = await Promise.all(
      [silent, dripping, half].map((r) => closedAfter(r, t0, PREFACE_MS + SLACK)),
    );
    for (const ms of after) {
      expect(ms).toBeLessThanOrEqual(PREFACE_MS + SLACK);
      expect(ms).toBeGreaterThanOrEqual(PREFACE_MS - 50);
    }
  }, 10_000);

  it('an idle connection: GOAWAY NO_ERROR and closed after idleTimeoutMs, not before; PINGs do not keep it', async () => {
    const IDLE_MS = 800;
    const port = await start(transport, { idleTimeoutMs: IDLE_MS });
    const quiet = await open(port);
    const pinging = await open(port);
    quiet.send(callFrames(1));
    pinging.send(callFrames(1));
    expect(await quiet.grpcStatus(1)).toBe('0');
    expect(await pinging.grpcStatus(1)).toBe('0');
    const t0 = performance.now();
    void (async () => {
      while (!pinging.closed) {
        pinging.send(frame(T.PING, 0, 0, Buffer.alloc(8)));
        await sleep(100);
      }
    })();
    const after = await Promise.all([quiet, pinging].map((r) => closedAfter(r, t0, IDLE_MS + SLACK)));
    for (const [i, r] of [quiet, pinging].entries()) {
      expect(after[i]).toBeLessThanOrEqual(IDLE_MS + SLACK);
      expect(after[i]).toBeGreaterThanOrEqual(IDLE_MS - 50);
      expect((await r.goaway())?.code).toBe(H2.NO_ERROR);
    }
  }, 10_000);

  it('a header block left open, a partial frame, a frame a byte every 50 ms: closed', async () => {
    const IDLE_MS = 800;
    const FRAME_MS = 200;
    const port = await start(transport, { idleTimeoutMs: IDLE_MS, frameTimeoutMs: FRAME_MS });
    const block = await open(port);
    const partial = await open(port);
    const dripping = await open(port);
    const t0 = performance.now();
    block.send(frame(T.HEADERS, 0, 1, RLS_HEADERS)); // no END_HEADERS: a CONTINUATION is owed
    partial.send(callFrames(1).subarray(0, 5));
    drip(dripping, callFrames(1));
    // ours: at frameTimeoutMs; the fallback (nghttp2 keeps these to itself): at its idle timeout, destroyed CLOSE_GRACE_MS later
    const bound = (transport === 'ratemesh' ? FRAME_MS : IDLE_MS + CLOSE_GRACE_MS) + SLACK;
    const after = await Promise.all([block, partial, dripping].map((r) => closedAfter(r, t0, bound)));
    for (const ms of after) expect(ms).toBeLessThanOrEqual(bound);
  }, 10_000);

  it('a reply stalled on a zero window: reset CANCEL after stallTimeoutMs, then the connection closed as idle', async () => {
    const IDLE_MS = 800;
    const STALL_MS = 300;
    const port = await start(transport, { idleTimeoutMs: IDLE_MS, stallTimeoutMs: STALL_MS });
    const r = await open(port, false);
    r.send(PREFACE, frame(T.SETTINGS, 0, 0, setting(4, 0))); // SETTINGS_INITIAL_WINDOW_SIZE 0
    await r.until((f) => f.type === T.SETTINGS && (f.flags & 1) !== 0);
    r.send(frame(T.SETTINGS, 1, 0));
    const t0 = performance.now();
    r.send(callFrames(1));
    const code = await Promise.race([r.rst(1), sleep(STALL_MS + SLACK).then(() => 'none')]);
    expect(code).toBe(H2.CANCEL);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(STALL_MS - 50);
    const t1 = performance.now();
    expect(await closedAfter(r, t1, IDLE_MS + CLOSE_GRACE_MS + SLACK)).toBeLessThanOrEqual(
      IDLE_MS + CLOSE_GRACE_MS + SLACK,
    );
  }, 10_000);

  it('a Health/Watch stream keeps its connection past the idle timeout; once cancelled, the connection is closed as idle', async () => {
    const IDLE_MS = 500;
    const port = await start(transport, { idleTimeoutMs: IDLE_MS });
    const r = await open(port);
    r.send(frame(T.HEADERS, 4, 1, WATCH_HEADERS), frame(T.DATA, 0, 1, Buffer.alloc(5))); // HealthCheckRequest{}
    await r.until((f) => f.type === T.DATA && f.id === 1); // SERVING
    await sleep(IDLE_MS + CLOSE_GRACE_MS + 500);
    expect(r.closed).toBe(false);
    expect(
      r.frames.some((f) => f.type === T.RST_STREAM || (f.type === T.HEADERS && (f.flags & 1) !== 0)),
    ).toBe(false);
    const t0 = performance.now();
    r.send(frame(T.RST_STREAM, 0, 1, Buffer.from([0, 0, 0, H2.CANCEL])));
    expect(await closedAfter(r, t0, IDLE_MS + CLOSE_GRACE_MS + SLACK)).toBeLessThanOrEqual(
      IDLE_MS + CLOSE_GRACE_MS + SLACK,
    );
  }, 15_000);
});
