/**
 * Envoy RLS bench: one ratemesh daemon (the real mesh limiter, standalone,
 * on loopback) serving both its HTTP check API and the Envoy RLS v3 gRPC
 * server (its own HTTP/2 on node:net, src/envoy/h2.ts and grpc-transport.ts), driven in the same run:
 *
 *   http-check      POST /v1/check {policy, key}: one decision
 *   grpc-rls        ShouldRateLimit, one descriptor (remote_address): one decision
 *   http-check-3    POST /v1/check {checks: [3 pairs]}: one decision over 3 keys
 *   grpc-rls-3      ShouldRateLimit, three descriptors: one decision over 3 keys
 *   floor-http      a bare node:http server: parse the JSON body, answer a fixed decision
 *   floor-grpc      the daemon's gRPC transport alone: decode the request, answer a fixed response
 *   floor-grpc-h2   the same on node:http2 (the core stream API, as lean as it goes): the alternative
 *   floor-grpc-js   a bare @grpc/grpc-js server of the RLS service (the transport before): a fixed response
 *   floor-grpc-fallback  the floor-grpc server on the fallback transport (grpc-transport-node.ts, node:http2)
 *   h2load-*        the same servers driven by nghttp2's h2load instead of node:http2 sessions (when
 *                   /usr/bin/h2load is installed: Debian's nghttp2-client; latency from its per-request log)
 *   grpcio-*        the same servers driven by gRPC C-core (Debian's python3-grpcio, when installed:
 *                   scripts/bench-grpcio.py), paced at GRPCIO_RATE (1000) req/s, what one Python client holds
 *
 * Every request is allowed (limit 10^9 per minute) and each pair of variants
 * decides exactly the same (policy, key) pairs: the HTTP variants name the
 * policies the envoy descriptors compile to. The daemon runs in a child
 * process; this process drives it: autocannon for HTTP, and for gRPC plain
 * node:http2 sessions sending the request as @grpc/proto-loader encodes it
 * and decoding every reply (the @grpc/grpc-js client costs several times the
 * server's CPU per call, so with it the client, not the server, sets the pace).
 *
 * Two passes, variants interleaved, SLICES slices of DURATION s each, medians:
 *  1. closed loop, CONCURRENCY requests in flight (HTTP: autocannon
 *     connections; gRPC: streams over CHANNELS sessions): throughput and p99;
 *  2. open loop at the same offered rate, RATE req/s, with the same arrival
 *     pattern for every variant (node:http keep-alive client for HTTP): the
 *     daemon's CPU time per decision. At equal rates and arrivals the cost of
 *     waking the process falls alike on both, so this is the fair CPU
 *     comparison (closed-loop CPU per request falls as the rate rises: the
 *     faster variant looks cheaper).
 * Then the codec alone, in this process: the RateLimitRequest decode and
 * RateLimitResponse encode of the server (codec.ts), of @grpc/proto-loader
 * (protobufjs with its object conversion), and of protobufjs' generated
 * Type.decode / Type.encode (what a precompiled static codec runs).
 *
 * Writes bench/results/rls.json. npm run bench:rls
 *   (DURATION=2 SLICES=5 CONCURRENCY=32 CHANNELS=4 RATE=4000 to change;
 *    VARIANTS=grpc-rls,http-check to run some; PROFILE=dir for the daemon's --cpu-prof)
 */
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { loadConfig } from '../src/daemon/config.js';
import { startDaemon } from '../src/daemon/daemon.js';
import { decodeRateLimitRequest, encodeRateLimitResponse } from '../src/envoy/codec.js';
import {
  PROTO_INCLUDE_DIRS,
  RLS_PROTO,
  RLS_SERVICE,
  rlsServiceDefinition,
} from '../src/envoy/grpc-server.js';
import { type GrpcTransport, MESSAGE_PREFIX, startGrpcServer } from '../src/envoy/grpc-transport.js';
import type { RlsResponse } from '../src/envoy/service.js';
import { printTable } from './table.js';

interface AutocannonResult {
  requests: { average: number; total: number };
  latency: { p99: number };
  non2xx: number;
  errors: number;
}
type Autocannon = (opts: {
  url: string;
  connections: number;
  duration: number;
  requests: { method: string; path: string; headers: Record<string, string>; body: string }[];
}) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const DURATION = Number(process.env.DURATION ?? 2);
/** The machine's load when the bench began (printed beside its figures: a shared machine skews them). */
const LOAD_AT_START = loadavg();
const SLICES = Number(process.env.SLICES ?? 5);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 32);
const CHANNELS = Number(process.env.CHANNELS ?? 4);
const RATE = Number(process.env.RATE ?? 4000);

const RATELIMIT_YAML = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
  - key: path
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 1000000000 }
`;

type ToChild = { cmd: 'cpu'; id: number };
/** The daemon's addresses and policy names, and the floor servers' ports. */
interface Ready {
  http: string;
  grpc: number;
  policies: Record<string, string>;
  floorHttp: number;
  floorGrpc: number;
  floorGrpcH2: number;
  floorGrpcJs: number;
  floorGrpcFallback: number;
}
type FromChild = { ready: Ready } | { id: number; cpu: number };

/** Child: one daemon with HTTP and gRPC; answers CPU-time queries. */
async function serve(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ratemesh-bench-rls-'));
  mkdirSync(join(dir, 'rl'));
  writeFileSync(join(dir, 'rl', 'bench.yaml'), RATELIMIT_YAML);
  writeFileSync(
    join(dir, 'daemon.yaml'),
    'http: { host: 127.0.0.1, port: 0 }\nmesh: { listen: [/ip4/127.0.0.1/tcp/0] }\nlog: { level: silent }\nenvoy: { files: [rl] }\ngrpc: { port: 0 }\n',
  );
  const config = loadConfig({ argv: ['--config', join(dir, 'daemon.yaml')] });
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const daemon = await startDaemon({ config, logger: quiet });
  const policies: Record<string, string> = {};
  for (const r of config.envoy!.config.rateLimits) policies[r.fullKey.split('.')[1]!] = r.policy!;
  const floor = await floorServers();
  process.on('message', (m: ToChild) => {
    if (m.cmd === 'cpu') {
      const u = process.cpuUsage();
      process.send!({ id: m.id, cpu: u.user + u.system } satisfies FromChild);
    }
  });
  process.on('disconnect', () => {
    void daemon.stop().finally(() => {
      rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    });
  });
  process.send!({
    ready: { http: daemon.http.url, grpc: daemon.grpc!.port, policies, ...floor },
  } satisfies FromChild);
}

/** The fixed reply of the floor servers, as the daemon answers one allowed descriptor. */
const FIXED_RESPONSE: RlsResponse = {
  overall_code: 'OK',
  statuses: [
    {
      code: 'OK',
      current_limit: { name: '', requests_per_unit: 1e9, unit: 'MINUTE' },
      limit_remaining: 999_999_999,
      duration_until_reset: { seconds: 60, nanos: 0 },
    },
  ],
  response_headers_to_add: [],
};

/**
 * The transports alone, in the same process: a node:http server that parses
 * the JSON body and answers a fixed decision; the daemon's gRPC transport
 * (same options as the daemon's) that decodes the RateLimitRequest and
 * answers a fixed response; and, for reference, a @grpc/grpc-js server of
 * the RLS service (the transport the daemon used before) answering the same.
 * What each costs per request is the floor under the daemon's figures.
 */
async function floorServers(): Promise<{
  floorHttp: number;
  floorGrpc: number;
  floorGrpcH2: number;
  floorGrpcJs: number;
  floorGrpcFallback: number;
}> {
  const answer = JSON.stringify({ allowed: true, limited: false, remaining: 1 });
  const h = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      JSON.parse(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
      res.end(answer);
    });
  });
  await new Promise<void>((r) => h.listen(0, '127.0.0.1', r));
  const fixed = encodeRateLimitResponse(FIXED_RESPONSE, MESSAGE_PREFIX);
  const floorGrpc = (transport: GrpcTransport) =>
    startGrpcServer({
      host: '127.0.0.1',
      port: 0,
      maxMessageBytes: 64 * 1024,
      maxConcurrentStreams: 256,
      requestTimeoutMs: 10_000,
      transport,
      methods: new Map([
        [
          `/${RLS_SERVICE}/ShouldRateLimit`,
          {
            kind: 'unary',
            call: (message: Buffer) => {
              const r = decodeRateLimitRequest(message);
              return r.ok ? { frame: fixed } : { code: 13, message: r.message };
            },
          },
        ],
      ]),
    });
  const g = await floorGrpc('ratemesh');
  const fallback = await floorGrpc('node:http2');
  // node:http2's core API at its leanest: no Date header, the reply as soon as the message is in
  const h2 = http2.createServer({ settings: { maxConcurrentStreams: 256 } });
  const okHeaders = { ':status': 200, 'content-type': 'application/grpc' };
  const okTrailers = { 'grpc-status': '0' };
  // sendDate: node's option (processHeaders), not in @types/node's ServerStreamResponseOptions
  const withTrailers = { waitForTrailers: true, sendDate: false };
  const headersOnly = { endStream: true, sendDate: false };
  h2.on('stream', (stream) => {
    const chunks: Buffer[] = [];
    stream.on('error', () => {});
    stream.on('data', (c: Buffer) => {
      chunks.push(c);
      const b = chunks.length === 1 ? c : Buffer.concat(chunks);
      if (b.length < 5 || b.length < 5 + b.readUInt32BE(1)) return;
      const r = decodeRateLimitRequest(b.subarray(5, 5 + b.readUInt32BE(1)));
      if (!r.ok) {
        stream.respond({ ...okHeaders, 'grpc-status': '13' }, headersOnly);
        return;
      }
      stream.respond(okHeaders, withTrailers);
      stream.once('wantTrailers', () => stream.sendTrailers(okTrailers));
      stream.end(fixed);
    });
  });
  await new Promise<void>((r) => h2.listen(0, '127.0.0.1', r));
  const gj = new grpc.Server({ 'grpc.enable_channelz': 0 });
  gj.addService(rlsServiceDefinition(), {
    ShouldRateLimit: (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) =>
      cb(null, FIXED_RESPONSE),
  });
  const floorGrpcJs = await new Promise<number>((resolve, reject) =>
    gj.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(err) : resolve(port),
    ),
  );
  return {
    floorHttp: (h.address() as { port: number }).port,
    floorGrpc: g.port,
    floorGrpcH2: (h2.address() as { port: number }).port,
    floorGrpcJs,
    floorGrpcFallback: fallback.port,
  };
}

let nextId = 0;
function childCpu(child: ChildProcess): Promise<number> {
  const id = nextId++;
  return new Promise((resolve) => {
    const on = (m: FromChild) => {
      if ('id' in m && m.id === id) {
        child.off('message', on);
        resolve(m.cpu);
      }
    };
    child.on('message', on);
    child.send({ cmd: 'cpu', id } satisfies ToChild);
  });
}

interface Row {
  rps: number;
  p99_ms: number;
  cpu_us: number;
  /** This process's CPU while it drove the slice, % of one core: near 100, the driver set the pace. */
  driver_pct: number;
  failed: number;
  total: number;
}

interface Variant {
  name: string;
  /** Closed loop when `rate` is undefined, else that many requests per second. */
  run(seconds: number, rate?: number): Promise<Omit<Row, 'cpu_us' | 'driver_pct'>>;
}

/** Sends one request and reports whether it was answered as expected. */
type Send = (done: (ok: boolean) => void) => void;

/**
 * Drives `send` for `seconds`: closed loop with CONCURRENCY in flight when
 * `rate` is undefined, else open loop at `rate` per second (each millisecond
 * sends what the rate owes by then, the same arrival pattern for every variant).
 */
function drive(
  seconds: number,
  rate: number | undefined,
  send: Send,
): Promise<Omit<Row, 'cpu_us' | 'driver_pct'>> {
  return new Promise((resolve) => {
    const latencies: number[] = [];
    let failed = 0;
    let inFlight = 0;
    let sent = 0;
    let stopped = false;
    const started = performance.now();
    const end = started + seconds * 1000;
    const finish = () => {
      const sorted = latencies.sort((x, y) => x - y);
      const total = sorted.length + failed;
      resolve({
        rps: total / ((performance.now() - started) / 1000),
        p99_ms:
          sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!,
        failed,
        total,
      });
    };
    const fire = () => {
      sent++;
      inFlight++;
      const t0 = performance.now();
      send((ok) => {
        inFlight--;
        const t1 = performance.now();
        if (ok) latencies.push(t1 - t0);
        else failed++;
        if (rate === undefined && t1 < end) fire();
        else if (stopped && inFlight === 0) finish();
      });
    };
    if (rate === undefined) {
      stopped = true;
      for (let i = 0; i < CONCURRENCY; i++) fire();
      return;
    }
    const timer = setInterval(() => {
      const now = performance.now();
      if (now >= end) {
        clearInterval(timer);
        stopped = true;
        if (inFlight === 0) finish();
        return;
      }
      const due = Math.floor(((now - started) / 1000) * rate);
      while (sent < due) fire();
    }, 1);
  });
}

/**
 * POST /v1/check: autocannon in the closed loop (the lightest HTTP/1.1
 * client), node:http with keep-alive connections when paced.
 */
function httpVariant(name: string, url: string, body: object): Variant {
  const text = JSON.stringify(body);
  return {
    name,
    async run(seconds, rate) {
      if (rate !== undefined) {
        const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
        const u = new URL('/v1/check', url);
        const headers = {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(text)),
        };
        const r = await drive(seconds, rate, (done) => {
          const req = http.request(u, { method: 'POST', agent, headers }, (res) => {
            res.resume();
            res.on('end', () => done(res.statusCode === 200));
          });
          req.on('error', () => done(false));
          req.end(text);
        });
        agent.destroy();
        return r;
      }
      const r = await autocannon({
        url,
        connections: CONCURRENCY,
        duration: seconds,
        requests: [
          { method: 'POST', path: '/v1/check', headers: { 'content-type': 'application/json' }, body: text },
        ],
      });
      return {
        rps: r.requests.average,
        p99_ms: r.latency.p99,
        failed: r.non2xx + r.errors,
        total: r.requests.total,
      };
    },
  };
}

/**
 * ShouldRateLimit over plain node:http2 sessions (CHANNELS of them), the
 * request encoded once by @grpc/proto-loader; each reply's trailers and
 * message are checked (grpc-status 0, overall_code OK).
 */
function h2Variant(name: string, port: number, request: object): Variant {
  const def = rlsServiceDefinition().ShouldRateLimit!;
  const msg = def.requestSerialize(request);
  const frame = Buffer.alloc(5 + msg.length);
  frame.writeUInt32BE(msg.length, 1);
  msg.copy(frame, 5);
  const headers = {
    ':method': 'POST',
    ':path': def.path,
    'content-type': 'application/grpc',
    te: 'trailers',
  };
  return {
    name,
    async run(seconds, rate) {
      const sessions = await Promise.all(
        Array.from(
          { length: CHANNELS },
          () =>
            new Promise<http2.ClientHttp2Session>((resolve, reject) => {
              const session = http2.connect(`http://127.0.0.1:${port}`);
              session.once('connect', () => resolve(session));
              session.once('error', reject);
            }),
        ),
      );
      let next = 0;
      const r = await drive(seconds, rate, (done) => {
        const stream = sessions[next++ % sessions.length]!.request(headers);
        const chunks: Buffer[] = [];
        let status: string | undefined;
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('trailers', (t) => {
          status = String(t['grpc-status']);
        });
        stream.on('error', () => {});
        stream.on('close', () => {
          const body = Buffer.concat(chunks);
          const res =
            status === '0' && body.length >= 5
              ? (def.responseDeserialize(body.subarray(5)) as { overall_code: string })
              : undefined;
          done(res?.overall_code === 'OK');
        });
        stream.end(frame);
      });
      for (const session of sessions) session.close();
      return r;
    },
  };
}

const H2LOAD = '/usr/bin/h2load';

/**
 * ShouldRateLimit driven by nghttp2's h2load: CHANNELS connections with
 * CONCURRENCY streams in all (closed loop), or --rps of RATE / CHANNELS per
 * connection (paced); p99 from its per-request log. h2load counts HTTP
 * statuses, not grpc-status: the interop test (test/envoy/interop-debian.test.ts)
 * checks with the server's own count that every call it drives is answered OK.
 */
function h2loadVariant(name: string, port: number, request: object): Variant {
  const def = rlsServiceDefinition().ShouldRateLimit!;
  const msg = def.requestSerialize(request);
  const dir = mkdtempSync(join(tmpdir(), 'ratemesh-bench-h2load-'));
  const body = join(dir, 'request.bin');
  const frame = Buffer.alloc(5 + msg.length);
  frame.writeUInt32BE(msg.length, 1);
  msg.copy(frame, 5);
  writeFileSync(body, frame);
  return {
    name,
    async run(seconds, rate) {
      const log = join(dir, 'log.tsv');
      rmSync(log, { force: true });
      const args = [
        '-c',
        String(CHANNELS),
        '-m',
        String(Math.max(1, Math.ceil(CONCURRENCY / CHANNELS))),
        '-D',
        String(seconds),
        ...(rate === undefined ? [] : ['--rps', String(Math.max(1, Math.round(rate / CHANNELS)))]),
        '-d',
        body,
        '-H',
        'content-type: application/grpc',
        '-H',
        'te: trailers',
        '--log-file',
        log,
        `http://127.0.0.1:${port}${def.path}`,
      ];
      const out = await new Promise<string>((resolve, reject) =>
        execFile(H2LOAD, args, { timeout: (seconds + 30) * 1000 }, (err, stdout) =>
          err ? reject(err) : resolve(stdout),
        ),
      );
      const m =
        /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(
          out,
        );
      const rps = /finished in [^,]+, ([\d.]+) req\/s/.exec(out);
      if (m === null || rps === null) throw new Error(`h2load: no summary in\n${out}`);
      const lat = readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => Number(l.split('\t')[2]) / 1000)
        .sort((a, b) => a - b);
      return {
        rps: Number(rps[1]),
        p99_ms: lat.length === 0 ? 0 : lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))]!,
        failed: Number(m[4]) + Number(m[5]) + Number(m[6]),
        total: Number(m[2]),
      };
    },
  };
}

const PYTHON = '/usr/bin/python3';
const GRPCIO_DRIVER = new URL('../scripts/bench-grpcio.py', import.meta.url).pathname;
/**
 * The paced rate of the grpcio-* variants: what one Python client holds on 2
 * cores beside the daemon (RATE is more than it sends, and then each variant
 * would get a different rate). Compare the grpcio rows with each other only.
 */
const GRPCIO_RATE = Number(process.env.GRPCIO_RATE ?? 1000);

/** Whether Debian's python3-grpcio is importable (the grpcio-* variants need it). */
function hasGrpcio(): Promise<boolean> {
  return new Promise((resolve) =>
    execFile(PYTHON, ['-c', 'import grpc'], { timeout: 10_000 }, (err) => resolve(err === null)),
  );
}

/**
 * ShouldRateLimit driven by gRPC C-core (Debian's python3-grpcio, the core of
 * Envoy's google_grpc client; scripts/bench-grpcio.py): CHANNELS channels,
 * CONCURRENCY calls in flight (closed loop) or RATE calls/s (paced); every
 * reply checked (status OK, overall_code OK). The Python client is slower
 * than the server: its closed-loop rate is the client's, and a paced rate it
 * cannot hold shows as a lower req/s; CPU per call is the daemon's, as always.
 */
function grpcioVariant(name: string, port: number, request: object): Variant {
  const def = rlsServiceDefinition().ShouldRateLimit!;
  const dir = mkdtempSync(join(tmpdir(), 'ratemesh-bench-grpcio-'));
  const body = join(dir, 'request.bin');
  writeFileSync(body, def.requestSerialize(request));
  return {
    name,
    async run(seconds, rate) {
      const paced = rate === undefined ? 0 : GRPCIO_RATE;
      const args = [GRPCIO_DRIVER, port, seconds, CONCURRENCY, CHANNELS, paced, body].map(String);
      const out = await new Promise<string>((resolve, reject) =>
        execFile(PYTHON, args, { timeout: (seconds + 30) * 1000 }, (err, stdout) =>
          err ? reject(err) : resolve(stdout),
        ),
      );
      const r = JSON.parse(out.trim().split('\n').pop()!) as {
        total: number;
        failed: number;
        rps: number;
        p99_ms: number;
      };
      return { rps: r.rps, p99_ms: r.p99_ms, failed: r.failed, total: r.total };
    },
  };
}

async function slice(child: ChildProcess, v: Variant, seconds: number, rate?: number): Promise<Row> {
  const before = await childCpu(child);
  const own = process.cpuUsage();
  const t0 = performance.now();
  const r = await v.run(seconds, rate);
  const ownCpu = process.cpuUsage(own);
  const wallUs = (performance.now() - t0) * 1000;
  const cpu = (await childCpu(child)) - before;
  return {
    ...r,
    cpu_us: r.total > 0 ? cpu / r.total : 0,
    driver_pct: (100 * (ownCpu.user + ownCpu.system)) / wallUs,
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** SLICES interleaved slices of every variant; the median of each figure. */
async function pass(
  child: ChildProcess,
  variants: Variant[],
  label: string,
  rate?: number,
): Promise<Map<string, Row>> {
  const rows = new Map<string, Row[]>(variants.map((v) => [v.name, []]));
  for (let i = 0; i < SLICES; i++) {
    for (const v of variants) {
      const row = await slice(child, v, DURATION, rate);
      rows.get(v.name)!.push(row);
      console.error(
        `${label} ${i + 1}/${SLICES} ${v.name}: ${Math.round(row.rps)} req/s, p99 ${row.p99_ms.toFixed(2)} ms, ${row.cpu_us.toFixed(1)} us cpu/req, ${row.failed} failed`,
      );
    }
  }
  return new Map(
    [...rows].map(([name, rs]) => [
      name,
      {
        rps: Math.round(median(rs.map((r) => r.rps))),
        p99_ms: median(rs.map((r) => r.p99_ms)),
        cpu_us: median(rs.map((r) => r.cpu_us)),
        driver_pct: median(rs.map((r) => r.driver_pct)),
        failed: rs.reduce((a, r) => a + r.failed, 0),
        total: rs.reduce((a, r) => a + r.total, 0),
      },
    ]),
  );
}

async function main(): Promise<void> {
  const child = fork(new URL(import.meta.url).pathname, [], {
    env: { ...process.env, RATEMESH_BENCH_CHILD: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: process.env.PROFILE
      ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${process.env.PROFILE}`]
      : process.execArgv,
  });
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('message', (m: FromChild) =>
      'ready' in m ? resolve(m.ready) : reject(new Error('bad child')),
    );
    child.once('exit', (code) => reject(new Error(`bench daemon exited (${code})`)));
  });
  const p = ready.policies;
  const entry = (key: string, value: string) => ({ entries: [{ key, value }] });
  const variants: Variant[] = [
    httpVariant('http-check', ready.http, { policy: p.remote_address, key: 'd:203.0.113.1' }),
    h2Variant('grpc-rls', ready.grpc, {
      domain: 'bench',
      descriptors: [entry('remote_address', '203.0.113.1')],
    }),
    httpVariant('http-check-3', ready.http, {
      checks: [
        { policy: p.remote_address, key: 'd:203.0.113.1' },
        { policy: p.path, key: 'd:/api/items' },
        { policy: p.user, key: 'd:alice' },
      ],
    }),
    h2Variant('grpc-rls-3', ready.grpc, {
      domain: 'bench',
      descriptors: [
        entry('remote_address', '203.0.113.1'),
        entry('path', '/api/items'),
        entry('user', 'alice'),
      ],
    }),
  ];
  variants.push(
    httpVariant('floor-http', `http://127.0.0.1:${ready.floorHttp}`, {
      policy: p.remote_address,
      key: 'd:203.0.113.1',
    }),
    h2Variant('floor-grpc', ready.floorGrpc, {
      domain: 'bench',
      descriptors: [entry('remote_address', '203.0.113.1')],
    }),
    h2Variant('floor-grpc-h2', ready.floorGrpcH2, {
      domain: 'bench',
      descriptors: [entry('remote_address', '203.0.113.1')],
    }),
    h2Variant('floor-grpc-js', ready.floorGrpcJs, {
      domain: 'bench',
      descriptors: [entry('remote_address', '203.0.113.1')],
    }),
    h2Variant('floor-grpc-fallback', ready.floorGrpcFallback, {
      domain: 'bench',
      descriptors: [entry('remote_address', '203.0.113.1')],
    }),
  );
  if (existsSync(H2LOAD)) {
    const one = { domain: 'bench', descriptors: [entry('remote_address', '203.0.113.1')] };
    variants.push(
      h2loadVariant('h2load-grpc-rls', ready.grpc, one),
      h2loadVariant('h2load-floor-grpc', ready.floorGrpc, one),
      h2loadVariant('h2load-floor-grpc-js', ready.floorGrpcJs, one),
    );
  } else console.error(`${H2LOAD} not found (apt-get install nghttp2-client): no h2load variants`);
  if (await hasGrpcio()) {
    const one = { domain: 'bench', descriptors: [entry('remote_address', '203.0.113.1')] };
    variants.push(
      grpcioVariant('grpcio-grpc-rls', ready.grpc, one),
      grpcioVariant('grpcio-floor-grpc', ready.floorGrpc, one),
      grpcioVariant('grpcio-floor-grpc-js', ready.floorGrpcJs, one),
    );
  } else console.error(`${PYTHON} cannot import grpc (apt-get install python3-grpcio): no grpcio variants`);
  const only = process.env.VARIANTS?.split(',');
  if (only !== undefined)
    variants.splice(0, variants.length, ...variants.filter((v) => only.includes(v.name)));
  try {
    for (const v of variants) await slice(child, v, 1); // warm-up
    const closed = await pass(child, variants, 'closed');
    const paced = await pass(child, variants, `${RATE}/s`, RATE);
    report(closed, paced, codecBench());
  } finally {
    child.disconnect();
  }
}

type CodecRow = { decode_ns: number; encode_ns: number };

/** protobufjs' own Root of the vendored protos, resolved as @grpc/proto-loader resolves them. */
function protobufRoot(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) => {
    if (isAbsolute(target)) return target;
    for (const dir of PROTO_INCLUDE_DIRS) if (existsSync(join(dir, target))) return join(dir, target);
    return protobuf.util.path.resolve(origin, target);
  };
  root.loadSync(RLS_PROTO, { keepCase: true });
  root.resolveAll();
  return root;
}

/**
 * The codecs alone, ns per RateLimitRequest decode (one descriptor, as the
 * grpc-rls variant sends) and per RateLimitResponse encode (one status, as the
 * daemon answers it): median of 5 rounds of 100,000 after a warm-up.
 */
function codecBench(): Record<string, CodecRow> {
  const def = (
    rlsServiceDefinition() as unknown as Record<
      string,
      {
        requestSerialize(v: unknown): Buffer;
        requestDeserialize(b: Buffer): unknown;
        responseSerialize(v: unknown): Buffer;
      }
    >
  ).ShouldRateLimit!;
  const bytes = def.requestSerialize({
    domain: 'bench',
    descriptors: [{ entries: [{ key: 'remote_address', value: '203.0.113.1' }] }],
  });
  const root = protobufRoot();
  const Req = root.lookupType('envoy.service.ratelimit.v3.RateLimitRequest');
  const Res = root.lookupType('envoy.service.ratelimit.v3.RateLimitResponse');
  const message = Res.fromObject(FIXED_RESPONSE);
  let sink = 0;
  const time = (fn: () => unknown): number => {
    const n = 100_000;
    for (let i = 0; i < 20_000; i++) fn();
    const rounds: number[] = [];
    for (let r = 0; r < 5; r++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < n; i++) if (fn() !== undefined) sink++;
      rounds.push(Number(process.hrtime.bigint() - t0) / n);
    }
    return median(rounds);
  };
  const rows: Record<string, CodecRow> = {
    'ratemesh codec.ts': {
      decode_ns: time(() => decodeRateLimitRequest(bytes)),
      encode_ns: time(() => encodeRateLimitResponse(FIXED_RESPONSE, MESSAGE_PREFIX)),
    },
    '@grpc/proto-loader': {
      decode_ns: time(() => def.requestDeserialize(bytes)),
      encode_ns: time(() => def.responseSerialize(FIXED_RESPONSE)),
    },
    'protobufjs Type.decode/encode': {
      decode_ns: time(() => Req.decode(bytes)),
      encode_ns: time(() => Res.encode(message).finish()),
    },
  };
  if (sink === 0) throw new Error('codec bench: nothing ran');
  return rows;
}

function report(closed: Map<string, Row>, paced: Map<string, Row>, codec: Record<string, CodecRow>): void {
  console.log(
    `\nRLS bench: one daemon (mesh limiter, standalone), node ${process.version}, ${SLICES} interleaved slices of ${DURATION} s per variant (median)`,
  );
  console.log(
    `load average (1, 5, 15 min) at the start ${LOAD_AT_START.map((l) => l.toFixed(2)).join(', ')}, at the end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')} (${cpus().length} cores)`,
  );
  console.log(
    `closed loop: ${CONCURRENCY} in flight (HTTP: connections; gRPC: streams over ${CHANNELS} HTTP/2 sessions); paced: ${RATE} req/s offered to each variant`,
  );
  const pair = (name: string) =>
    /^((h2load|grpcio)-)?floor-grpc/.test(name)
      ? 'floor-http'
      : name.replace(/^(h2load|grpcio)-/, '').replace('grpc-rls', 'http-check');
  // the grpcio rows run at another rate (paced) or the Python client's (closed): against nothing
  const vsHttp = (m: Map<string, Row>, name: string) =>
    !name.startsWith('grpcio-') && pair(name) !== name && m.has(pair(name))
      ? `${((100 * m.get(name)!.cpu_us) / m.get(pair(name))!.cpu_us).toFixed(0)}%`
      : '-';
  if ([...paced.keys()].some((n) => n.startsWith('grpcio-')))
    console.log(
      `(grpcio-* rows: gRPC C-core from one Python process, paced at ${GRPCIO_RATE} req/s, not ${RATE}: compare them with each other)`,
    );
  printTable(
    [
      'variant',
      'req/s',
      'p99 ms',
      'cpu us/req',
      'cpu vs http',
      'driver cpu',
      `@${RATE}/s: cpu us/req`,
      'cpu vs http',
      'p99 ms',
      'failed',
    ],
    [...closed].map(([name, r]) => {
      const q = paced.get(name)!;
      return [
        name,
        r.rps,
        r.p99_ms.toFixed(2),
        r.cpu_us.toFixed(1),
        vsHttp(closed, name),
        `${Math.round(r.driver_pct)}%`,
        q.cpu_us.toFixed(1),
        vsHttp(paced, name),
        q.p99_ms.toFixed(2),
        r.failed + q.failed,
      ];
    }),
  );
  console.log(
    '\ncodec alone, ns per call (RateLimitRequest of one descriptor; RateLimitResponse of one status)',
  );
  printTable(
    ['codec', 'decode ns', 'encode ns'],
    Object.entries(codec).map(([name, c]) => [name, Math.round(c.decode_ns), Math.round(c.encode_ns)]),
  );
  const verdict = (grpcName: string, httpName: string): boolean | undefined => {
    const g = paced.get(grpcName);
    const h = paced.get(httpName);
    if (g === undefined || h === undefined) return undefined;
    const met = g.cpu_us <= h.cpu_us;
    console.log(
      `target (a decision costs the gRPC server no more than POST /v1/check), at ${RATE} req/s: ${grpcName} ${g.cpu_us.toFixed(1)} us vs ${httpName} ${h.cpu_us.toFixed(1)} us of daemon CPU -> ${met ? 'met' : 'NOT met'}`,
    );
    return met;
  };
  console.log('');
  const met = verdict('grpc-rls', 'http-check');
  const met3 = verdict('grpc-rls-3', 'http-check-3');
  const g = paced.get('grpc-rls');
  const h = paced.get('http-check');
  const fh = paced.get('floor-http');
  const fg = paced.get('floor-grpc');
  const fj = paced.get('floor-grpc-js');
  const f2 = paced.get('floor-grpc-h2');
  // the transport's target: its CPU per call under half of @grpc/grpc-js's (same fixed reply, same driver)
  const halfOfGrpcJs: Record<string, boolean> = {};
  for (const [ours, theirs] of [
    ['floor-grpc', 'floor-grpc-js'],
    ['h2load-floor-grpc', 'h2load-floor-grpc-js'],
    ['grpcio-floor-grpc', 'grpcio-floor-grpc-js'],
  ] as const) {
    const a = paced.get(ours);
    const b = paced.get(theirs);
    if (a === undefined || b === undefined) continue;
    halfOfGrpcJs[ours] = a.cpu_us < b.cpu_us / 2;
    console.log(
      `target (the transport's CPU per call under half of @grpc/grpc-js's), at ${ours.startsWith('grpcio-') ? GRPCIO_RATE : RATE} req/s: ${ours} ${a.cpu_us.toFixed(1)} us vs ${theirs} ${b.cpu_us.toFixed(1)} us (${((100 * a.cpu_us) / b.cpu_us).toFixed(0)}%) -> ${halfOfGrpcJs[ours] ? 'met' : 'NOT met'}`,
    );
  }
  let overFloor: { grpc: number; http: number } | undefined;
  if (g !== undefined && h !== undefined && fh !== undefined && fg !== undefined) {
    overFloor = { grpc: g.cpu_us - fg.cpu_us, http: h.cpu_us - fh.cpu_us };
    console.log(
      `the transports alone (floor-*), at ${RATE} req/s: ratemesh's HTTP/2 gRPC ${fg.cpu_us.toFixed(1)} us` +
        `${f2 === undefined ? '' : `, node:http2 ${f2.cpu_us.toFixed(1)} us`}${fj === undefined ? '' : `, @grpc/grpc-js ${fj.cpu_us.toFixed(1)} us`}` +
        ` vs node:http ${fh.cpu_us.toFixed(1)} us per request; ` +
        `ratemesh's work on top (match, decide, answer, metrics): ${overFloor.grpc.toFixed(1)} us over gRPC vs ${overFloor.http.toFixed(1)} us over HTTP`,
    );
  }
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  const figures = (m: Map<string, Row>) =>
    Object.fromEntries(
      [...m].map(([name, r]) => [
        name,
        {
          rps: r.rps,
          p99_ms: Number(r.p99_ms.toFixed(3)),
          cpu_us_per_req: Number(r.cpu_us.toFixed(2)),
          driver_cpu_pct: Math.round(r.driver_pct),
          failed: r.failed,
        },
      ]),
    );
  const out = {
    node: process.version,
    loadAverage: { start: LOAD_AT_START, end: loadavg(), cores: cpus().length },
    slices: SLICES,
    durationS: DURATION,
    closedLoop: { concurrency: CONCURRENCY, channels: CHANNELS, variants: figures(closed) },
    paced: { rate: RATE, variants: figures(paced) },
    codecNs: codec,
    targetMet: met,
    targetMet3: met3,
    transportUnderHalfOfGrpcJs: halfOfGrpcJs,
    overTransportFloorUs: overFloor,
  };
  writeFileSync(new URL('./results/rls.json', import.meta.url), `${JSON.stringify(out, null, 2)}\n`);
  console.log('wrote bench/results/rls.json');
}

if (process.env.RATEMESH_BENCH_CHILD === '1') await serve();
else await main();
