/**
 * The RLS gRPC server driven by HTTP/2 and gRPC stacks we did not write,
 * as Debian ships them: nghttp2's `nghttp` and `h2load` (nghttp2-client:
 * the HTTP/2 library Envoy long used as its codec) and gRPC C-core
 * (python3-grpcio: the core of Envoy's google_grpc client, through
 * scripts/interop-grpcio.py). The server is the real RLS server
 * (grpc-server.ts with its health service) in a child process.
 *
 * Runs when the binaries are installed, or when RATEMESH_INTEROP=1 (set by
 * scripts/ci-envoy-interop.sh, which installs them first): then a missing
 * binary FAILS, with what to install. Every call must get a correct answer
 * or a correct gRPC status; the server counts what it answered. Prints the
 * interop table at the end.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEALTH_SERVICE } from '../../src/envoy/grpc-server.js';
import { type Child, printRows, RLS_PATH, rlsMessage, startChild } from './h2-harness.js';

const NGHTTP = '/usr/bin/nghttp';
const H2LOAD = '/usr/bin/h2load';
const PYTHON = '/usr/bin/python3';
const GRPCIO_SCRIPT = fileURLToPath(new URL('../../scripts/interop-grpcio.py', import.meta.url));
const REQUIRED = process.env.RATEMESH_INTEROP === '1';
const present = [NGHTTP, H2LOAD, PYTHON].every((p) => existsSync(p));

/** Runs a command (bounded by `timeoutMs`), its stdout and stderr together. */
function run(cmd: string, args: string[], timeoutMs = 60_000): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'latin1' },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, out: `${stdout}${stderr}` });
      },
    );
  });
}

if (REQUIRED) {
  describe('interop prerequisites (RATEMESH_INTEROP=1)', () => {
    it('nghttp, h2load and python3 with grpcio are installed', async () => {
      const missing = [NGHTTP, H2LOAD, PYTHON].filter((p) => !existsSync(p));
      expect(
        missing,
        'apt-get install nghttp2-client python3-grpcio (scripts/ci-envoy-interop.sh does)',
      ).toEqual([]);
      const py = await run(PYTHON, ['-c', 'import grpc; print(grpc.__version__)']);
      expect(py.code, `python3-grpcio missing: ${py.out}`).toBe(0);
    });
  });
}

describe.runIf(REQUIRED || present)('the RLS server against nghttp2 and gRPC C-core (Debian)', () => {
  let child: Child;
  let dir: string;
  const rows: string[][] = [];
  const url = (path = RLS_PATH) => `http://127.0.0.1:${child.port}${path}`;
  const grpcHeaders = ['-H', 'content-type: application/grpc', '-H', 'te: trailers'];
  /** A file holding `body` (framed gRPC messages) for -d. */
  const file = (name: string, body: Buffer): string => {
    const p = join(dir, name);
    writeFileSync(p, body);
    return p;
  };
  const okCalls = async () => (await child.stats()).calls['0'] ?? 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratemesh-interop-'));
    child = await startChild({});
  });
  afterAll(async () => {
    printRows(
      'interop: the RLS server (ratemesh HTTP/2; "/ fallback": node:http2) driven by Debian clients',
      ['client', 'case', 'calls', 'as expected', 'answers'],
      rows,
    );
    await child?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** nghttp -v on `uris` (each `times` times, concurrently on one connection): the grpc-status of each stream. */
  async function nghttp(
    args: string[],
    times = 1,
    path = RLS_PATH,
  ): Promise<{ statuses: string[]; out: string }> {
    const r = await run(NGHTTP, ['-v', '-n', '-m', String(times), ...grpcHeaders, ...args, url(path)]);
    const statuses = [...r.out.matchAll(/recv \(stream_id=\d+\) grpc-status: (\d+)/g)].map((m) => m[1]!);
    return { statuses, out: r.out };
  }
  const count = (xs: string[]) => {
    const c: Record<string, number> = {};
    for (const x of xs) c[x] = (c[x] ?? 0) + 1;
    return Object.entries(c)
      .map(([k, v]) => `grpc-status ${k} x${v}`)
      .join(', ');
  };
  const row = (client: string, name: string, calls: number, ok: number, answers: string) =>
    rows.push([
      client,
      name,
      String(calls),
      ok === calls ? `${ok}/${calls}` : `${ok}/${calls} FAILED`,
      answers,
    ]);

  it('nghttp: a unary call, then 100 concurrent streams on one connection', async () => {
    const req = file('req.bin', rlsMessage());
    const before = await okCalls();
    const one = await nghttp(['-d', req]);
    expect(one.statuses).toEqual(['0']);
    expect(one.out).toMatch(/recv \(stream_id=\d+\) :status: 200/);
    row(
      'nghttp',
      'unary ShouldRateLimit',
      1,
      one.statuses.filter((s) => s === '0').length,
      count(one.statuses),
    );
    const many = await nghttp(['-d', req], 100);
    expect(many.statuses).toHaveLength(100);
    expect(many.statuses.every((s) => s === '0')).toBe(true);
    row(
      'nghttp',
      '100 concurrent streams, one connection',
      100,
      many.statuses.filter((s) => s === '0').length,
      count(many.statuses),
    );
    expect((await okCalls()) - before).toBe(101);
  });

  it('nghttp: small windows (1 KiB a stream, 64 KiB the connection), 50 streams: flow control both ways', async () => {
    const req = file('req.bin', rlsMessage());
    const r = await nghttp(['-w', '10', '-W', '16', '-d', req], 50);
    expect(r.statuses).toHaveLength(50);
    expect(r.statuses.every((s) => s === '0')).toBe(true);
    row(
      'nghttp',
      'windows 2^10 / 2^16, 50 streams',
      50,
      r.statuses.filter((s) => s === '0').length,
      count(r.statuses),
    );
  });

  it('nghttp: large metadata (8 KiB answered; 20 KiB over the header list cap: reset ENHANCE_YOUR_CALM)', async () => {
    const req = file('req.bin', rlsMessage());
    const big = Array.from({ length: 8 }, (_, i) => ['-H', `x-big-${i}: ${'m'.repeat(1000)}`]).flat();
    const ok = await nghttp([...big, '-d', req], 5);
    expect(ok.statuses).toEqual(['0', '0', '0', '0', '0']);
    row('nghttp', '8 KiB of metadata', 5, ok.statuses.length, count(ok.statuses));
    const huge = Array.from({ length: 20 }, (_, i) => ['-H', `x-huge-${i}: ${'m'.repeat(1000)}`]).flat();
    const refused = await nghttp([...huge, '-d', req], 3);
    const resets = [
      ...refused.out.matchAll(/recv RST_STREAM frame <[^>]*>\s*\(error_code=ENHANCE_YOUR_CALM/g),
    ].length;
    expect(refused.statuses).toEqual([]);
    expect(resets).toBe(3);
    row('nghttp', '20 KiB of metadata', 3, resets, `RST_STREAM ENHANCE_YOUR_CALM x${resets}`);
  });

  it('nghttp: the largest legal request (64 KiB) answered; one byte more RESOURCE_EXHAUSTED', async () => {
    const sized = (n: number): Buffer => {
      for (let pad = n - 40; ; pad++) {
        const m = rlsMessage('a'.repeat(pad));
        if (m.length - 5 === n) return m;
        if (m.length - 5 > n) throw new Error(`no message of exactly ${n} bytes`);
      }
    };
    const largest = await nghttp(['-d', file('largest.bin', sized(64 * 1024))], 3);
    expect(largest.statuses).toEqual(['0', '0', '0']);
    row(
      'nghttp',
      'largest legal request (65,536 B message)',
      3,
      largest.statuses.length,
      count(largest.statuses),
    );
    const over = await nghttp(['-d', file('over.bin', sized(64 * 1024 + 1))], 3);
    expect(over.statuses).toEqual(['8', '8', '8']);
    row('nghttp', 'one byte over (65,537 B)', 3, over.statuses.length, count(over.statuses));
  });

  it('nghttp: deadlines (grpc-timeout 1n: DEADLINE_EXCEEDED; malformed: INTERNAL), an unknown method, the health service', async () => {
    const req = file('req.bin', rlsMessage());
    const late = await nghttp(['-H', 'grpc-timeout: 1n', '-d', req], 5);
    expect(late.statuses).toEqual(['4', '4', '4', '4', '4']);
    row('nghttp', 'grpc-timeout 1n', 5, late.statuses.length, count(late.statuses));
    const bad = await nghttp(['-H', 'grpc-timeout: soon', '-d', req], 2);
    expect(bad.statuses).toEqual(['13', '13']);
    row('nghttp', 'grpc-timeout malformed', 2, bad.statuses.length, count(bad.statuses));
    const unknown = await nghttp(['-d', req], 2, '/envoy.service.ratelimit.v3.RateLimitService/Nope');
    expect(unknown.statuses).toEqual(['12', '12']);
    row('nghttp', 'unknown method', 2, unknown.statuses.length, count(unknown.statuses));
    // HealthCheckRequest{service: ''} is the empty message; the answer is {status: SERVING} = 08 01
    const health = await nghttp(['-d', file('health.bin', Buffer.alloc(5))], 3, `/${HEALTH_SERVICE}/Check`);
    expect(health.statuses).toEqual(['0', '0', '0']);
    row('nghttp', 'Health/Check', 3, health.statuses.length, count(health.statuses));
  });

  it('h2load: connection reuse (10,000 calls on one connection) and 4 connections x 100 streams (20,000 calls)', async () => {
    const req = file('req.bin', rlsMessage());
    for (const [name, args, n] of [
      ['one connection, 10,000 calls in turn', ['-c', '1', '-m', '1'], 10_000],
      ['4 connections x 100 streams', ['-c', '4', '-m', '100'], 20_000],
    ] as const) {
      const before = await okCalls();
      const r = await run(H2LOAD, ['-n', String(n), ...args, '-d', req, ...grpcHeaders, url()], 120_000);
      expect(r.code, r.out).toBe(0);
      const m =
        /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(
          r.out,
        );
      expect(m, r.out).not.toBeNull();
      expect(Number(m![3])).toBe(n);
      const answered = (await okCalls()) - before;
      expect(answered).toBe(n);
      const rps = /finished in [^,]+, ([\d.]+) req\/s/.exec(r.out)?.[1];
      const mean = /time for request:\s+\S+\s+\S+\s+(\S+)/.exec(r.out)?.[1];
      row(
        'h2load',
        name,
        n,
        answered,
        `${m![3]} succeeded, ${m![4]} failed; server: ${answered} grpc-status 0; ${Math.round(Number(rps))} req/s, mean ${mean}`,
      );
    }
  });

  /** Runs scripts/interop-grpcio.py against `port`; every case must be answered as it expects. */
  async function grpcio(client: string, port: number): Promise<void> {
    const r = await run(PYTHON, [GRPCIO_SCRIPT, String(port), String(64 * 1024)], 120_000);
    expect(r.code, r.out).toBe(0);
    const cases = r.out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map(
        (l) => JSON.parse(l) as { case: string; calls: number; ok: number; statuses: Record<string, number> },
      );
    expect(cases.length).toBeGreaterThanOrEqual(18);
    for (const c of cases) {
      const answers = Object.entries(c.statuses)
        .map(([k, v]) => `${k} x${v}`)
        .join(', ');
      row(client, c.case, c.calls, c.ok, answers);
      expect(c.ok, `${c.case}: ${JSON.stringify(c.statuses)}`).toBe(c.calls);
    }
  }

  it('gRPC C-core (python3-grpcio): unary, reuse, concurrency, cancellations, deadlines, metadata, sizes, health', async () => {
    await grpcio('grpcio', child.port);
    expect((await child.stats()).uncaught).toBe(0);
  });

  it('gRPC C-core against the node:http2 fallback transport: the same answers', async () => {
    const fallback = await startChild({ transport: 'node:http2' });
    try {
      await grpcio('grpcio / fallback', fallback.port);
      expect((await fallback.stats()).uncaught).toBe(0);
    } finally {
      await fallback.stop();
    }
  });
});
