/**
 * The mesh-test harness: N real node processes on 127.0.0.1 (node-child.ts,
 * one OS process each, createMeshLimiter inside), every one bootstrapped with
 * every other. Each replays its own share of a trace in real time, in-process;
 * the parent only starts them at a common wall-clock instant and reads their
 * decisions afterwards. Every wait is bounded; children die with the parent
 * (exit, failure, Ctrl-C, or the IPC channel closing).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateKeyPair, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import type { PolicySpec } from '../src/types.js';
import {
  type ChildConfig,
  type ChildMessage,
  MODES,
  type ParentMessage,
  type RunReport,
  type RunSpec,
  type Status,
} from './protocol.js';

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(HERE, '..');
const CHILD = join(HERE, 'node-child.ts');

/** Every child process this module started and has not seen exit; killed on the way out. */
const live = new Set<ChildProcess>();
let hooked = false;

function killAll(): void {
  for (const c of live) {
    try {
      c.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
  live.clear();
}

/** Kills every child on exit, on an uncaught error, and on SIGINT / SIGTERM / SIGHUP. */
export function installExitHooks(): void {
  if (hooked) return;
  hooked = true;
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      killAll();
      process.exit(sig === 'SIGINT' ? 130 : 143);
    });
  }
}

/** Kills every child this process started (for tests' afterAll). */
export function killAllChildren(): void {
  killAll();
}

/** `n` distinct free TCP ports on 127.0.0.1 (held open together, then released). */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<import('node:net').Server>((res, rej) => {
          const s = createServer();
          s.once('error', rej);
          s.listen(0, '127.0.0.1', () => res(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as import('node:net').AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Rejects after `ms` with `what`; the timer never holds the process open. */
export function within<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, rej) => {
    t = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    t.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

/** One node process. */
export class NodeProc {
  peerId = '';
  exited = false;
  private proc: ChildProcess | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { res: (v: unknown) => void; rej: (e: Error) => void }>();
  private onReady: ((v: { peerId: string }) => void) | undefined;
  private onFail: ((e: Error) => void) | undefined;

  constructor(
    readonly cfg: ChildConfig,
    private readonly log: (level: string, msg: string, obj: unknown) => void,
  ) {}

  /** Spawns the process and resolves once its mesh node has started (bounded). */
  start(timeoutMs = 30_000): Promise<void> {
    this.exited = false;
    // MESH_TEST_CPU_PROF=<dir>: write a V8 CPU profile of every node process there (on a clean exit);
    // MESH_TEST_CPU_PROF_NODES=0,1,2: only of those node indexes (profiling all 32 overloads 2 cores).
    const prof = process.env.MESH_TEST_CPU_PROF;
    const only = process.env.MESH_TEST_CPU_PROF_NODES?.split(',').map(Number);
    const args =
      prof && (only === undefined || only.includes(this.cfg.index))
        ? ['--cpu-prof', '--cpu-prof-dir', prof]
        : [];
    // MESH_TEST_NODE_ARGS="--perf-basic-prof ...": more flags for every node process (a perf profile)
    const extra = process.env.MESH_TEST_NODE_ARGS?.split(' ').filter((a) => a !== '') ?? [];
    args.push(...extra);
    const proc = spawn(process.execPath, [...args, '--import', 'tsx', CHILD], {
      cwd: ROOT,
      // its own session: the kernel's autogroup scheduler then weighs it as one service, not as a
      // 1/N part of the harness's session (it still dies with the parent: IPC disconnect, kill hooks)
      detached: this.cfg.ownSession === true,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    this.proc = proc;
    live.add(proc);
    const ready = new Promise<{ peerId: string }>((res, rej) => {
      this.onReady = res;
      this.onFail = rej;
    });
    proc.on('message', (m: ChildMessage) => this.onMessage(m));
    proc.on('exit', (code, signal) => {
      this.exited = true;
      live.delete(proc);
      const err = new Error(`node ${this.cfg.index} exited (${signal ?? code})`);
      this.onFail?.(err);
      for (const p of this.pending.values()) p.rej(err);
      this.pending.clear();
    });
    proc.on('error', (err) => this.onFail?.(err));
    this.send({ op: 'init', cfg: this.cfg });
    return within(`node ${this.cfg.index} start`, timeoutMs, ready).then((r) => {
      this.peerId = r.peerId;
    });
  }

  private send(m: ParentMessage): void {
    if (this.proc?.connected) this.proc.send(m);
  }

  private onMessage(m: ChildMessage): void {
    switch (m.ev) {
      case 'ready':
        this.onReady?.({ peerId: m.peerId });
        break;
      case 'fatal':
        this.onFail?.(new Error(`node ${this.cfg.index}: ${m.message}`));
        break;
      case 'log':
        this.log(m.level, m.msg, m.obj);
        break;
      case 'reply': {
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        const data = m.data as { error?: string } | undefined;
        if (data && typeof data === 'object' && typeof data.error === 'string')
          p?.rej(new Error(`node ${this.cfg.index}: ${data.error}`));
        else p?.res(m.data);
        break;
      }
    }
  }

  private request<T>(
    op: 'status' | 'run' | 'stop' | 'reload',
    timeoutMs: number,
    run?: RunSpec,
    policies?: PolicySpec[],
  ): Promise<T> {
    if (this.exited || !this.proc?.connected) return Promise.reject(new Error(`node ${this.cfg.index} gone`));
    const id = this.nextId++;
    const p = new Promise<T>((res, rej) => {
      this.pending.set(id, { res: res as (v: unknown) => void, rej });
    });
    this.send(
      op === 'run' ? { op, id, run: run! } : op === 'reload' ? { op, id, policies: policies! } : { op, id },
    );
    return within(`node ${this.cfg.index} ${op}`, timeoutMs, p);
  }

  /** Replace the node's policies in place (the limiter's runtime replacement, as a daemon reload does). */
  reload(policies: PolicySpec[]): Promise<{ kept: string[]; changed: string[]; version: string }> {
    return this.request('reload', 5_000, undefined, policies);
  }

  status(): Promise<Status> {
    return this.request('status', 5_000);
  }

  run(spec: RunSpec, timeoutMs: number): Promise<RunReport> {
    return this.request('run', timeoutMs, spec);
  }

  /** Graceful stop (bounded), then SIGKILL if it is still there. */
  async stop(): Promise<void> {
    if (this.exited || this.proc === undefined) return;
    const gone = new Promise<void>((r) => this.proc!.once('exit', () => r()));
    try {
      await this.request('stop', 6_000);
    } catch {
      /* killed below */
    }
    await within('exit', 3_000, gone).catch(() => this.kill());
  }

  /** kill -9. */
  kill(): void {
    try {
      this.proc?.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }

  /** Resolves once the process has exited (bounded). */
  waitExit(timeoutMs = 5_000): Promise<void> {
    if (this.exited || this.proc === undefined) return Promise.resolve();
    const gone = new Promise<void>((r) => this.proc!.once('exit', () => r()));
    return within('exit', timeoutMs, gone);
  }
}

export interface MeshSpec {
  nodes: number;
  policies: PolicySpec[];
  gossipIntervalMs: number;
  injectDelayMs: number;
  /** Expected delay given to the engines (staleness = 3g + 2d). Default injectDelayMs. */
  expectedDelayMs?: number;
  /** Add a rogue member (index `nodes`). */
  rogue?: boolean;
  heartbeatMs?: number;
  discoveryIntervalMs?: number;
  /** Per node index: its clock's offset from true time, ms (a skew drill). */
  skewMs?: readonly number[];
  /** Relay mode's fanout for every node (absent or 0: broadcast). */
  relayFanout?: number;
  /** MeshLimiterOptions.fastGossipIntervalMs of every node; absent: the default ('auto'). */
  fastGossipIntervalMs?: number | 'auto';
  /** Relay mode's relayMacPeers for every node (absent: the limiter's default). */
  relayMacPeers?: number;
  /** Bootstrap entries each node dials (absent: the limiter's default). */
  dialPeers?: number;
  /** Node processes started at once (default: all; a 2-core box forms a 32-node mesh better in waves). */
  startConcurrency?: number;
  /**
   * Every node process in its own session (setsid). With the kernel's autogroup
   * scheduling (on here: /proc/sys/kernel/sched_autogroup_enabled) all the
   * processes of one session share ONE fair share of the CPU against every
   * other session on the box: 32 nodes in the harness's session get what one
   * process of another session gets. 32 services on one host would be 32
   * sessions (or cgroups). Default false.
   */
  ownSessions?: boolean;
}

/** A mesh of node processes, with a work directory for keys and decision files. */
export class Mesh {
  readonly dir: string;
  readonly procs: NodeProc[] = [];
  readonly logs = new Map<string, number>();

  private constructor(readonly spec: MeshSpec) {
    this.dir = mkdtempSync(join(tmpdir(), 'ratemesh-mesh-'));
  }

  /** Starts every node (in parallel), each with every other in its bootstrap list. */
  static async start(spec: MeshSpec, timeoutMs = 60_000): Promise<Mesh> {
    installExitHooks();
    const mesh = new Mesh(spec);
    try {
      const total = spec.nodes + (spec.rogue ? 1 : 0);
      const ports = await freePorts(total);
      const ids: string[] = [];
      for (let i = 0; i < total; i++) {
        const key = await generateKeyPair('Ed25519');
        writeFileSync(join(mesh.dir, `node-${i}.key`), privateKeyToProtobuf(key));
        ids.push(key.publicKey.toString());
      }
      const addr = (i: number) => `/ip4/127.0.0.1/tcp/${ports[i]}/p2p/${ids[i]}`;
      for (let i = 0; i < total; i++) {
        const cfg: ChildConfig = {
          index: i,
          role: spec.rogue && i === spec.nodes ? 'rogue' : 'node',
          keyFile: join(mesh.dir, `node-${i}.key`),
          port: ports[i]!,
          bootstrap: ids
            .map((_, j) => j)
            .filter((j) => j !== i && j < total)
            .map(addr),
          policies: spec.policies,
          gossipIntervalMs: spec.gossipIntervalMs,
          expectedDelayMs: spec.expectedDelayMs ?? spec.injectDelayMs,
          injectDelayMs: spec.injectDelayMs,
          ...(spec.heartbeatMs === undefined ? {} : { heartbeatMs: spec.heartbeatMs }),
          ...(spec.discoveryIntervalMs === undefined
            ? {}
            : { discoveryIntervalMs: spec.discoveryIntervalMs }),
          ...(spec.skewMs?.[i] ? { skewMs: spec.skewMs[i] } : {}),
          ...(spec.relayFanout ? { relayFanout: spec.relayFanout } : {}),
          ...(spec.fastGossipIntervalMs === undefined
            ? {}
            : { fastGossipIntervalMs: spec.fastGossipIntervalMs }),
          ...(spec.relayMacPeers === undefined ? {} : { relayMacPeers: spec.relayMacPeers }),
          ...(spec.dialPeers === undefined ? {} : { dialPeers: spec.dialPeers }),
          ...(spec.ownSessions ? { ownSession: true } : {}),
        };
        // Honest nodes do not dial the rogue; it dials them.
        if (spec.rogue && i < spec.nodes)
          cfg.bootstrap = cfg.bootstrap.filter((a) => !a.endsWith(ids[spec.nodes]!));
        mesh.procs.push(new NodeProc(cfg, (level, msg) => mesh.onLog(level, msg)));
      }
      const wave = Math.max(1, spec.startConcurrency ?? mesh.procs.length);
      for (let i = 0; i < mesh.procs.length; i += wave) {
        await Promise.all(mesh.procs.slice(i, i + wave).map((p) => p.start(timeoutMs)));
      }
      return mesh;
    } catch (err) {
      await mesh.close();
      throw err;
    }
  }

  private onLog(level: string, msg: string): void {
    const k = `${level}: ${msg}`;
    this.logs.set(k, (this.logs.get(k) ?? 0) + 1);
  }

  /**
   * Resolves once every node has seen `want` live peers (default: all others) at
   * some poll since the call (on a starved box freshness flaps, so nodes are not
   * required to show it at the same poll), polling every 100 ms; bounded.
   */
  async waitForPeers(
    timeoutMs = 30_000,
    want = this.procs.length - 1,
    /** Count members the engine knows (live or stale) instead of live ones (a relay mesh on a busy box). */
    known = false,
  ): Promise<Status[]> {
    const deadline = Date.now() + timeoutMs;
    const seen = new Array<boolean>(this.procs.length).fill(false);
    let last: Status[] = [];
    for (let round = 0; round < 10_000; round++) {
      // a node too busy to answer within the status timeout is not there yet (polled again)
      const polled = await Promise.all(this.procs.map((p) => p.status().catch(() => undefined)));
      last = polled.map(
        (s, i) => s ?? last[i] ?? { peerId: '', live: -1, stale: 0, connected: -1, synced: 0 },
      );
      last.forEach((s, i) => {
        if (s.live + (known ? s.stale : 0) >= want) seen[i] = true;
      });
      if (seen.every(Boolean)) return last;
      if (Date.now() > deadline) break;
      await sleep(100);
    }
    throw new Error(
      `timed out after ${timeoutMs} ms waiting for ${want} live peers each: ` +
        last.map((s, i) => `${s.live}${seen[i] ? '*' : ''}/${s.connected}c`).join(', '),
    );
  }

  decisionFile(i: number, incarnation = 0): string {
    return join(this.dir, `decisions-${i}-${incarnation}.bin`);
  }

  /** Kills every node (graceful first, bounded) and removes the work directory. */
  async close(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.stop().catch(() => p.kill())));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One decision read back from a decision file. */
export interface DecisionRecord {
  t: number;
  allowed: boolean;
  mode: (typeof MODES)[number];
}

/** Reads a decision file (missing file: none). */
export function readDecisions(file: string): DecisionRecord[] {
  let buf: Buffer;
  try {
    buf = readFileSync(file);
  } catch {
    return [];
  }
  const n = Math.floor(buf.byteLength / 16);
  const f = new Float64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + n * 16));
  const out: DecisionRecord[] = [];
  for (let i = 0; i < n; i++) {
    const code = f[2 * i + 1]!;
    out.push({ t: f[2 * i]!, allowed: (code & 1) === 1, mode: MODES[code >> 1] ?? 'global' });
  }
  return out;
}

/** Splits a trace's request times by node. */
export function shares(t: ArrayLike<number>, node: ArrayLike<number>, nodes: number, untilMs = Infinity) {
  const out: number[][] = Array.from({ length: nodes }, () => []);
  for (let i = 0; i < t.length; i++) if (t[i]! < untilMs) out[node[i]!]!.push(t[i]!);
  return out;
}

/** The seed-trace policy of the bench rows (bench/accuracy.ts gossipRow). */
export const SEED_POLICY: PolicySpec = {
  name: 'seed',
  limit: 1000,
  windowMs: 1000,
  buckets: 50,
  overAdmission: 'controlled',
  fallback: true,
};

export function ensureDir(p: string): void {
  mkdirSync(p, { recursive: true });
}
