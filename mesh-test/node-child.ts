/**
 * One mesh-test node process: a real libp2p mesh node (createMeshLimiter) that
 * replays its own share of a trace in real time, in-process, on the parent's
 * command (IPC; see protocol.ts). Exits when the parent goes away.
 *
 * Role `rogue`: a mesh member whose engine publishes malformed and inflated
 * gossip on the real topic during its rogue window (signed with its own key,
 * exactly as a compromised member would).
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';
import { systemClock } from '../src/clock.js';
import { encodeGossip } from '../src/crdt/codec.js';
import { Engine } from '../src/decision/engine.js';
import type { EngineInit, MeshEngine } from '../src/mesh/engine-port.js';
import { createMeshLimiter, isolateForTests } from '../src/mesh/mesh-limiter.js';
import type { Logger, MeshLimiter, MeshStats } from '../src/mesh/types.js';
import {
  type ChildConfig,
  type ChildMessage,
  MODES,
  type ParentMessage,
  type RunReport,
  type RunSpec,
  type Status,
} from './protocol.js';

const send = (m: ChildMessage): void => {
  if (process.connected) process.send?.(m);
};

/** Warnings and errors go to the parent (deduplicated there); debug and info are dropped. */
const logger: Logger = {
  debug() {},
  info() {},
  warn(obj, msg) {
    send({ ev: 'log', level: 'warn', msg: msg ?? '', obj });
  },
  error(obj, msg) {
    send({ ev: 'log', level: 'error', msg: msg ?? '', obj });
  },
};

/** Malformed and inflated gossip, one kind per tick, while `active`. */
class RogueEngine extends Engine {
  active = false;
  readonly sent: Record<string, number> = {};
  private n = 0;
  private rogueSeq = 1_000_000;
  private readonly k: number;
  private readonly bw: number;
  private readonly L: number;

  constructor(
    init: EngineInit,
    private readonly key: string,
  ) {
    super(init);
    const p = this.policies.policies[0]!;
    this.k = p.buckets;
    this.bw = p.windowMs / p.buckets;
    this.L = p.limit;
  }

  override buildGossip(): Uint8Array {
    if (!this.active) return super.buildGossip();
    const now = systemClock.now();
    const cur = Math.floor(now / this.bw);
    const entry = (o: Partial<{ policy: number; key: string; counts: number[]; demand: number }>) => ({
      origin: 0,
      policy: o.policy ?? 0,
      key: o.key ?? this.key,
      base: cur - this.k,
      counts: o.counts ?? new Array<number>(this.k + 1).fill(10 * this.L),
      demand: o.demand ?? 1e9,
    });
    const msg = (entries: ReturnType<typeof entry>[], version?: string) =>
      encodeGossip({
        policies: this.policyTable().map((r) => (version === undefined ? r : { ...r, version })),
        seq: this.rogueSeq++,
        sentAt: now,
        members: 2,
        reach: 2,
        entries,
      });
    const kinds = [
      'inflated',
      'garbage',
      'truncated',
      'unknown-policy',
      'bad-key',
      'too-many-counts',
      'wrong-version',
    ] as const;
    const kind = kinds[this.n++ % kinds.length]!;
    this.sent[kind] = (this.sent[kind] ?? 0) + 1;
    switch (kind) {
      case 'inflated':
        return msg([entry({})]);
      case 'garbage': {
        const b = new Uint8Array(64 + (this.n % 200));
        for (let i = 0; i < b.length; i++) b[i] = (i * 131 + this.n * 7) & 0xff;
        return b;
      }
      case 'truncated': {
        const full = msg([entry({})]);
        return full.subarray(0, Math.max(12, full.length >> 1));
      }
      case 'unknown-policy':
        return msg([entry({ policy: 7 })]);
      case 'bad-key':
        return msg([entry({ key: 'bad\u0001key' })]);
      case 'too-many-counts':
        return msg([entry({ counts: new Array<number>(this.k + 10).fill(1) })]);
      case 'wrong-version':
        return msg([entry({})], 'ffffffffffffffff');
    }
  }
}

let limiter: MeshLimiter | undefined;
let rogue: RogueEngine | undefined;
let cfg: ChildConfig | undefined;

async function init(c: ChildConfig): Promise<void> {
  cfg = c;
  const privateKey = new Uint8Array(readFileSync(c.keyFile));
  limiter = createMeshLimiter({
    policies: c.policies,
    listen: [`/ip4/127.0.0.1/tcp/${c.port}`],
    bootstrap: c.bootstrap,
    privateKey,
    gossipIntervalMs: c.gossipIntervalMs,
    expectedDelayMs: c.expectedDelayMs,
    ...(c.injectDelayMs > 0 ? { injectDelayMs: c.injectDelayMs } : {}),
    ...(c.heartbeatMs === undefined ? {} : { heartbeatMs: c.heartbeatMs }),
    ...(c.discoveryIntervalMs === undefined ? {} : { discoveryIntervalMs: c.discoveryIntervalMs }),
    ...(c.relayFanout === undefined ? {} : { relayFanout: c.relayFanout }),
    ...(c.fastGossipIntervalMs === undefined ? {} : { fastGossipIntervalMs: c.fastGossipIntervalMs }),
    ...(c.relayMacPeers === undefined ? {} : { relayMacPeers: c.relayMacPeers }),
    ...(c.dialPeers === undefined ? {} : { dialPeers: c.dialPeers }),
    // the limiter's clock only: the replay keeps true time, so decisions are recorded in true time
    ...(c.skewMs ? { clock: { now: () => systemClock.now() + c.skewMs! } } : {}),
    logger,
    ...(c.role === 'rogue'
      ? {
          engineFactory: (i: EngineInit): MeshEngine => {
            const e = new RogueEngine(i, 'global');
            // the factory also builds the two throwaway warm-up engines (warm-a, warm-b): not the rogue
            if (!i.nodeId.startsWith('warm-')) rogue = e;
            return e;
          },
        }
      : {}),
  });
  await limiter.start();
  send({ ev: 'ready', peerId: limiter.peerId, addrs: limiter.multiaddrs() });
}

function status(): Status {
  const l = limiter!;
  const peers = l.peers();
  const live = peers.filter((p) => !p.stale).length;
  const s = l.stats();
  return {
    peerId: l.peerId,
    live,
    stale: peers.length - live,
    connected: s.peers.connected,
    synced: s.sync.pullsOk,
  };
}

function pct(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** This process's context switches so far (Linux; zeros elsewhere): voluntary ones are wake-ups after a wait. */
function ctxSwitches(): { voluntary: number; nonvoluntary: number } {
  try {
    const st = readFileSync('/proc/self/status', 'utf8');
    const v = /^voluntary_ctxt_switches:\s+(\d+)/m.exec(st);
    const n = /^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(st);
    return { voluntary: Number(v?.[1] ?? 0), nonvoluntary: Number(n?.[1] ?? 0) };
  } catch {
    return { voluntary: 0, nonvoluntary: 0 };
  }
}

/** Index of the first element of `sorted` at or above `x`. */
function lowerBound(sorted: Float64Array, x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Replays `run.times` in real time; resolves with the report once the last request is due and served. */
async function replay(run: RunSpec): Promise<RunReport> {
  const l = limiter!;
  const clock = systemClock;
  const n = run.times.length;
  const lat = new Float64Array(n);
  const late = new Float64Array(n);
  const fd = openSync(run.decisionFile, 'a');
  const buf = new Float64Array(2 * 256);
  const also = (run.also ?? []).map((a) => ({
    policy: a.policy,
    fd: openSync(a.decisionFile, 'a'),
    buf: new Float64Array(2 * 256),
    b: 0,
  }));
  let served = 0;
  let skipped = 0;
  let admitted = 0;
  let i = 0;
  let isoOn = -1;
  let isoOff = -1;

  // Wait for the common start instant (bounded: the parent picks it a few seconds ahead).
  const wait = run.startAt - clock.now();
  if (wait > 60_000) throw new Error(`start instant ${wait} ms away`);
  if (wait > 2) await sleep(wait - 2);
  while (clock.now() < run.startAt) {
    /* sub-2 ms spin to the start instant */
  }

  if (run.gateOnLivePeer) {
    const until = clock.now() + 30_000;
    while (l.peers().every((p) => p.stale) && clock.now() < until) await sleep(1);
  }
  // On time (and not gated): serve from the start instant; else from now (earlier requests are skipped).
  const servingFrom = wait >= 0 && !run.gateOnLivePeer ? 0 : clock.now() - run.startAt;
  const probeLat = new Float64Array(run.probe ? Math.ceil(((run.times[n - 1] ?? 0) / 50 + 40) * 20) : 0);
  let probed = 0;
  const probeTimer = run.probe
    ? setInterval(() => {
        for (let j = 0; j < 20 && probed < probeLat.length; j++) {
          const t0 = performance.now();
          l.check(run.policy, 'probe');
          probeLat[probed++] = (performance.now() - t0) * 1000;
        }
      }, 50)
    : undefined;
  // What stalls this process: its GC pauses and its event loop's delay (which includes waiting for a core).
  const gc = { n: 0, ms: 0, maxMs: 0, major: 0, majorMs: 0 };
  const gcObs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gc.n++;
      gc.ms += e.duration;
      if (e.duration > gc.maxMs) gc.maxMs = e.duration;
      // NODE_PERFORMANCE_GC_MAJOR = 4 (mark-compact)
      if ((((e as { detail?: { kind?: number } }).detail?.kind ?? 0) & 4) !== 0) {
        gc.major++;
        gc.majorMs += e.duration;
      }
    }
  });
  gcObs.observe({ entryTypes: ['gc'] });
  const sw0 = ctxSwitches();
  const gs0 = l.stats();
  const cpu0 = process.cpuUsage();
  const wall0 = clock.now();

  await new Promise<void>((resolve) => {
    const step = (): void => {
      const now = clock.now() - run.startAt;
      if (run.isolate !== undefined) {
        if (isoOn < 0 && now >= run.isolate.fromMs) {
          isolateForTests(l, true);
          isoOn = now;
        }
        if (isoOn >= 0 && isoOff < 0 && now >= run.isolate.toMs) {
          isolateForTests(l, false);
          isoOff = now;
        }
      }
      if (rogue !== undefined && run.rogue !== undefined) {
        rogue.active = now >= run.rogue.fromMs && now < run.rogue.toMs;
      }
      let b = 0;
      while (i < n && run.times[i]! <= now) {
        const due = run.times[i]!;
        if (due < servingFrom) {
          skipped++;
          i++;
          continue;
        }
        const t0 = performance.now();
        const d = l.check(run.policy, run.key);
        const t1 = performance.now();
        lat[served] = (t1 - t0) * 1000;
        const at = t1 + performance.timeOrigin - run.startAt;
        late[served] = at - due;
        served++;
        if (d.allowed) admitted++;
        buf[b++] = at;
        buf[b++] = (d.allowed ? 1 : 0) + 2 * MODES.indexOf(d.mode);
        if (b === buf.length) {
          writeSync(fd, buf, 0, b * 8);
          b = 0;
        }
        for (const x of also) {
          const dx = l.check(x.policy, run.key);
          x.buf[x.b++] = performance.now() + performance.timeOrigin - run.startAt;
          x.buf[x.b++] = (dx.allowed ? 1 : 0) + 2 * MODES.indexOf(dx.mode);
          if (x.b === x.buf.length) {
            writeSync(x.fd, x.buf, 0, x.b * 8);
            x.b = 0;
          }
        }
        i++;
      }
      if (b > 0) writeSync(fd, buf, 0, b * 8);
      for (const x of also) {
        if (x.b > 0) writeSync(x.fd, x.buf, 0, x.b * 8);
        x.b = 0;
      }
      const isoPending = run.isolate !== undefined && isoOff < 0;
      const roguePending = run.rogue !== undefined && now < run.rogue.toMs;
      if (i >= n && !isoPending && !roguePending) {
        resolve();
        return;
      }
      let next = i < n ? run.times[i]! - now : 1;
      if (isoPending) next = Math.min(next, (isoOn < 0 ? run.isolate!.fromMs : run.isolate!.toMs) - now);
      // One wake-up per gap: Node's timers count whole ms from a truncated loop time, so a timer set
      // for the fractional gap (or half a ms under it) often fires just before the request is due and
      // costs a second wake-up (measured: about two per request). floor + 1 fires at or after it,
      // at most about a ms late.
      setTimeout(step, Math.min(Math.floor(next) + 1, 50));
    };
    step();
  });

  if (probeTimer !== undefined) clearInterval(probeTimer);
  const cpu = process.cpuUsage(cpu0);
  gcObs.disconnect();
  const sw1 = ctxSwitches();
  const wallMs = clock.now() - wall0;
  closeSync(fd);
  for (const x of also) closeSync(x.fd);
  const gs1 = l.stats();
  const latS = lat.subarray(0, served).sort();
  const lateS = late.subarray(0, served).sort();
  const eng = gs1.engine as RunReport['engine'];
  const d = (k: keyof MeshStats['gossip']) => (gs1.gossip[k] as number) - (gs0.gossip[k] as number);
  return {
    index: cfg!.index,
    served,
    skipped,
    admitted,
    lateMs: { p50: pct(lateS, 0.5), p99: pct(lateS, 0.99), max: pct(lateS, 1) },
    latencyUs: { p50: pct(latS, 0.5), p99: pct(latS, 0.99), p999: pct(latS, 0.999), max: pct(latS, 1) },
    ...(run.probe
      ? (() => {
          const p = probeLat.subarray(0, probed).sort();
          return {
            probeUs: { n: probed, p50: pct(p, 0.5), p99: pct(p, 0.99), p999: pct(p, 0.999), max: pct(p, 1) },
          };
        })()
      : {}),
    stalls: {
      gcPauses: gc.n,
      gcMs: gc.ms,
      gcMaxMs: gc.maxMs,
      wakeups: sw1.voluntary - sw0.voluntary,
      preempted: sw1.nonvoluntary - sw0.nonvoluntary,
      gcMajor: gc.major,
      gcMajorMs: gc.majorMs,
      over20Ms: lateS.length - lowerBound(lateS, 20),
    },
    cpuPct: wallMs > 0 ? ((cpu.user + cpu.system) / 1000 / wallMs) * 100 : 0,
    wallMs,
    gossip: {
      msgsOut: d('msgsOut'),
      bytesOut: d('bytesOut'),
      msgsIn: d('msgsIn'),
      bytesIn: d('bytesIn'),
      earlyPublishes: d('earlyPublishes'),
      ticks: d('ticks'),
      relayed: d('relayed'),
      notRelayed: d('notRelayed'),
    },
    drops: gs1.dropped,
    ...(gs0.transport !== undefined && gs1.transport !== undefined
      ? {
          transport: {
            framesIn: gs1.transport.framesIn - gs0.transport.framesIn,
            framesOut: gs1.transport.framesOut - gs0.transport.framesOut,
            batchesIn: gs1.transport.batchesIn - gs0.transport.batchesIn,
            batchesOut: gs1.transport.batchesOut - gs0.transport.batchesOut,
            itemsIn: gs1.transport.itemsIn - gs0.transport.itemsIn,
            itemsNew: gs1.transport.itemsNew - gs0.transport.itemsNew,
            verified: gs1.transport.verified - gs0.transport.verified,
            macVerified: gs1.transport.macVerified - gs0.transport.macVerified,
            dropped: gs1.transport.dropped,
          },
        }
      : {}),
    connected: gs1.peers.connected,
    injected: { delayed: gs1.injected.delayed, dropped: gs1.injected.dropped },
    sync: { pulls: gs1.sync.pulls, pullsOk: gs1.sync.pullsOk, served: gs1.sync.served },
    engine: {
      dropped: eng.dropped,
      capped: eng.capped,
      gossipIn: eng.gossipIn,
      byMode: eng.byMode,
      livePeers: eng.livePeers,
      members: eng.members,
      skewedPeers: eng.skewedPeers,
    },
    peers: l.peers().map((p) => ({ id: p.id, clockOffsetMs: p.clockOffsetMs, stale: p.stale })),
    servingFrom,
    ...(run.isolate ? { isolation: { onAt: isoOn, offAt: isoOff } } : {}),
    ...(rogue ? { rogue: { sent: { ...rogue.sent } } } : {}),
  };
}

async function stop(): Promise<void> {
  const l = limiter;
  limiter = undefined;
  await Promise.race([l?.stop(), sleep(5_000)]);
}

process.on('message', (raw: ParentMessage) => {
  const reply = (id: number, p: Promise<unknown>) =>
    p.then(
      (data) => send({ ev: 'reply', id, data }),
      (err: unknown) => send({ ev: 'reply', id, data: { error: String((err as Error)?.stack ?? err) } }),
    );
  switch (raw.op) {
    case 'init':
      init(raw.cfg).catch((err: unknown) => {
        send({ ev: 'fatal', message: String((err as Error)?.stack ?? err) });
        process.exit(1);
      });
      break;
    case 'status':
      void reply(raw.id, Promise.resolve().then(status));
      break;
    case 'run':
      void reply(raw.id, replay(raw.run));
      break;
    case 'reload':
      void reply(
        raw.id,
        Promise.resolve().then(() => {
          if (limiter === undefined) throw new Error('not started');
          return limiter.replacePolicies(raw.policies);
        }),
      );
      break;
    case 'stop':
      void reply(raw.id, stop()).then(() => {
        process.disconnect?.();
        setTimeout(() => process.exit(0), 50).unref();
      });
      break;
  }
});

// The parent is the only owner: if it goes away, so do we.
process.on('disconnect', () => {
  void stop().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 6_000).unref();
});
