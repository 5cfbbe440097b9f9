/** The live replay of a trace against the replicas, and what it recorded. */
import { Agent } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { round, worstRolling } from '../../src/sim/metrics.js';
import type { Trace } from '../../src/sim/trace.js';
import {
  BATCH_MS,
  CHECK_TIMEOUT_MS,
  MAX_BATCH,
  MAX_BATCHES_IN_FLIGHT,
  MAX_BODY_BYTES,
  quantile,
  SEED,
} from './config.js';
import { httpCall, type Target } from './http.js';

// ---------------------------------------------------------------- the live replay

export const CODE_ADMITTED = 1;
export const CODE_DENIED = 2;
export const CODE_ERROR = 3;
export const CODE_SKIPPED = 4;
export const MODES = ['global', 'fallback', 'local'] as const;

export interface Replay {
  /**
   * Per request, ms since the replay start: scheduled time, send time (the agent gave it a
   * socket), reply time, and the replica's decision time when its reply carries `decidedAt`.
   */
  sched: Float64Array;
  sent: Float64Array;
  replied: Float64Array;
  decided: Float64Array;
  node: Uint8Array;
  code: Uint8Array;
  /** 0 global, 1 fallback, 2 local, 255 unknown. */
  mode: Uint8Array;
  /** The replica each request went to: an index into {@link targets} (255: not sent). */
  via: Uint8Array;
  /**
   * The replicas requests went to (targetKey), in the order first routed to: one per Target the
   * route returned, so a replica that took a removed one's address, or a restarted process (a
   * clock of its own), is one of its own.
   */
  targets: string[];
  /** The Target objects of {@link targets}. */
  targetRefs: Target[];
  startedAt: number;
  durationMs: number;
  maxQueued: number;
  /** Why requests got no decision: reason -> count (transport error, HTTP status, decision status). */
  errorReasons: Map<string, number>;
  /** Per replica (as {@link targets}), its clock's offset from the driver's (see {@link alignClocks}). */
  clocks: ClockOffset[];
}

/**
 * A replica's clock minus the driver's, ms, as its replies bound it: a decision happens after its
 * request left and before its reply came back, so every reply gives
 * decidedAt - replied <= offset <= decidedAt - sent; `offsetMs` is the middle of the tightest
 * interval, `spreadMs` its width (the uncertainty; negative: the bounds disagree).
 */
export interface ClockOffset {
  target: string;
  offsetMs: number;
  spreadMs: number;
  replies: number;
}

/**
 * Puts every replica's decision times on the driver's clock: subtracts each replica's offset
 * ({@link ClockOffset}) from its `decided` times. Needed because a replica's clock is the wall
 * time at its process start plus monotonic time since (src/clock.ts), and where the wall clock
 * is stepped or slewed against the monotonic one (this VM's runs 0.5 % fast: 5 ms a second),
 * replicas started at different times disagree by 5 ms per second between their starts: in the
 * rolling drill the first replicas ran ~300 ms behind the driver and each new one up to ~150 ms
 * ahead, so a window over the raw times added admissions of different real seconds.
 */
export function alignClocks(r: Replay): void {
  const lo = r.targets.map(() => Number.NEGATIVE_INFINITY);
  const hi = r.targets.map(() => Number.POSITIVE_INFINITY);
  const n = r.targets.map(() => 0);
  for (let i = 0; i < r.code.length; i++) {
    const v = r.via[i]!;
    const d = r.decided[i]!;
    if (v >= r.targets.length || Number.isNaN(d) || Number.isNaN(r.sent[i]!) || Number.isNaN(r.replied[i]!))
      continue;
    lo[v] = Math.max(lo[v]!, d - r.replied[i]!);
    hi[v] = Math.min(hi[v]!, d - r.sent[i]!);
    n[v]!++;
  }
  r.clocks = r.targets.map((target, v) => {
    const ok = n[v]! > 0;
    return {
      target,
      offsetMs: ok ? round((lo[v]! + hi[v]!) / 2, 2) : 0,
      spreadMs: ok ? round(hi[v]! - lo[v]!, 2) : Number.NaN,
      replies: n[v]!,
    };
  });
  for (let i = 0; i < r.code.length; i++) {
    const c = r.clocks[r.via[i]!];
    if (c !== undefined && !Number.isNaN(r.decided[i]!)) r.decided[i] = r.decided[i]! - c.offsetMs;
  }
}

export interface ReplayHooks {
  /** Where request i of trace node `node` goes now; undefined = skipped (replica down). */
  route: (node: number) => Target | undefined;
  /** Events at trace times (ms), run without blocking the sender; given the replay's start (performance.now()). */
  events?: { atMs: number; run: (replayStart: number) => Promise<void> }[];
  /** Set by replay: fails every request in flight to `t` at once (its replica was killed). */
  abort?: (t: Target) => void;
}

/** The fields of a check decision (POST /v1/check, or one entry of a batch) the replay reads. */
export interface DecisionReply {
  allowed?: boolean;
  mode?: string;
  decidedAt?: number;
  status?: number;
}

export function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

export function targetKey(t: Target): string {
  return 'socketPath' in t ? t.socketPath : `${t.host}:${t.port}`;
}

/**
 * Sends request i at its trace time to its node's replica; records decisions. With
 * --batch-ms B > 0 the requests due for a replica go together every B ms as one
 * POST /v1/check/batch (each still decided on its own, its decidedAt its own time).
 */
export async function replay(trace: Trace, key: string, hooks: ReplayHooks): Promise<Replay> {
  const n = trace.t.length;
  const out: Replay = {
    sched: trace.t,
    sent: new Float64Array(n).fill(Number.NaN),
    replied: new Float64Array(n).fill(Number.NaN),
    decided: new Float64Array(n).fill(Number.NaN),
    node: trace.node,
    code: new Uint8Array(n),
    mode: new Uint8Array(n).fill(255),
    via: new Uint8Array(n).fill(255),
    targets: [],
    targetRefs: [],
    startedAt: 0,
    durationMs: 0,
    maxQueued: 0,
    errorReasons: new Map(),
    clocks: [],
  };
  const noDecision = (idx: number, why: string) => {
    out.code[idx] = CODE_ERROR;
    out.errorReasons.set(why, (out.errorReasons.get(why) ?? 0) + 1);
  };
  const item = JSON.stringify({ policy: SEED.name, key, cost: 1 });
  const body = Buffer.from(item);
  // A batch must fit the batch endpoint's body cap (BATCH_BODY_BYTES, 640 KiB) and count (MAX_BATCH):
  // backpressure grows batches behind a slow replica, and a 413 would answer none of them.
  const perBatch = Math.max(1, Math.min(MAX_BATCH, Math.floor((MAX_BODY_BYTES - 32) / (item.length + 1))));
  const agents = new Map<string, Agent>();
  const targetIdx = new Map<Target, number>();
  const viaOf = (t: Target): number => {
    let v = targetIdx.get(t);
    if (v === undefined) {
      v = Math.min(254, out.targets.length);
      targetIdx.set(t, v);
      out.targets.push(targetKey(t));
      out.targetRefs.push(t);
    }
    return v;
  };
  const agentFor = (t: Target) => {
    const k = targetKey(t);
    let a = agents.get(k);
    if (!a) {
      a = new Agent({ keepAlive: true, maxSockets: 256, keepAliveMsecs: 1000 });
      agents.set(k, a);
    }
    return a;
  };
  hooks.abort = (t) => {
    const k = targetKey(t);
    agents.get(k)?.destroy();
    agents.delete(k);
  };
  // Warm the connections so the first requests do not pay for TCP set-up.
  await Promise.all(
    Array.from({ length: trace.nodes }, (_, node) => {
      const t = hooks.route(node);
      return t ? httpCall(t, 'GET', '/healthz', agentFor(t), 2000).catch(() => undefined) : undefined;
    }),
  );
  let pending = 0;
  let done = 0;
  let i = 0;
  const start = performance.now();
  const epochStart = Date.now() - (performance.now() - start);
  /** Request idx's outcome from its decision as the replica answered it (undefined: no decision). */
  const record = (idx: number, d: DecisionReply | null | undefined, why: string) => {
    if (
      typeof d !== 'object' ||
      d === null ||
      (d.status !== undefined && d.status !== 200 && d.status !== 429)
    ) {
      noDecision(idx, why);
      return;
    }
    out.code[idx] = d.allowed === true ? CODE_ADMITTED : CODE_DENIED;
    if (typeof d.decidedAt === 'number') out.decided[idx] = d.decidedAt - epochStart;
    const m = MODES.indexOf(d.mode as (typeof MODES)[number]);
    if (m >= 0) out.mode[idx] = m;
  };
  out.startedAt = start;
  const events = [...(hooks.events ?? [])].sort((a, b) => a.atMs - b.atMs);
  const eventRuns: Promise<void>[] = [];
  const lastT = n > 0 ? trace.t[n - 1]! : 0;
  const hardStop = lastT + 30_000;
  /**
   * Requests due per replica, sent as one batch every BATCH_MS, at most MAX_BATCHES_IN_FLIGHT
   * batches in flight per replica: a replica that falls behind gets larger batches, not more
   * connections (opening ever more sockets to a starved replica made it slower still).
   */
  const queued = new Map<string, { target: Target; idxs: number[]; inFlight: number }>();
  await new Promise<void>((finish) => {
    const maybeFinish = () => {
      if (i >= n && done >= n) finish();
    };
    const flush = (q: { target: Target; idxs: number[]; inFlight: number }) => {
      while (q.idxs.length > 0 && q.inFlight < MAX_BATCHES_IN_FLIGHT) {
        const idxs = q.idxs.splice(0, perBatch);
        q.inFlight++;
        const sentAt = performance.now() - start;
        for (const idx of idxs) out.sent[idx] = sentAt;
        pending += idxs.length;
        out.maxQueued = Math.max(out.maxQueued, pending);
        const onSocket = () => {
          const t = performance.now() - start;
          for (const idx of idxs) out.sent[idx] = t;
        };
        const settle = () => {
          pending -= idxs.length;
          done += idxs.length;
          q.inFlight--;
          flush(q);
          maybeFinish();
        };
        const batchBody = Buffer.from(`{"requests":[${new Array(idxs.length).fill(item).join(',')}]}`);
        httpCall(
          q.target,
          'POST',
          '/v1/check/batch',
          agentFor(q.target),
          CHECK_TIMEOUT_MS,
          batchBody,
          onSocket,
        ).then(
          (r) => {
            const at = performance.now() - start;
            const ds =
              (r.status === 200
                ? parseJson<{ decisions?: DecisionReply[] }>(r.body)?.decisions
                : undefined) ?? [];
            idxs.forEach((idx, j) => {
              out.replied[idx] = at;
              const d = ds[j];
              record(
                idx,
                d,
                r.status === 200 ? `decision status ${d?.status ?? 'missing'}` : `HTTP ${r.status}`,
              );
            });
            settle();
          },
          (e: unknown) => {
            const at = performance.now() - start;
            for (const idx of idxs) {
              out.replied[idx] = at;
              noDecision(idx, e instanceof Error ? e.message : String(e));
            }
            settle();
          },
        );
      }
    };
    const pump = () => {
      const now = performance.now() - start;
      while (events.length > 0 && events[0]!.atMs <= now) {
        const ev = events.shift()!;
        eventRuns.push(ev.run(start));
      }
      while (i < n && trace.t[i]! <= now) {
        const idx = i++;
        const target = hooks.route(trace.node[idx]!);
        if (!target) {
          out.code[idx] = CODE_SKIPPED;
          done++;
          continue;
        }
        out.via[idx] = viaOf(target);
        if (BATCH_MS > 0) {
          const k = targetKey(target);
          let q = queued.get(k);
          if (!q) {
            q = { target, idxs: [], inFlight: 0 };
            queued.set(k, q);
          }
          q.idxs.push(idx);
          continue;
        }
        out.sent[idx] = performance.now() - start;
        pending++;
        out.maxQueued = Math.max(out.maxQueued, pending);
        const onSocket = () => {
          out.sent[idx] = performance.now() - start;
        };
        httpCall(target, 'POST', '/v1/check', agentFor(target), CHECK_TIMEOUT_MS, body, onSocket).then(
          (r) => {
            out.replied[idx] = performance.now() - start;
            record(
              idx,
              r.status === 200 || r.status === 429 ? parseJson<DecisionReply>(r.body) : undefined,
              `HTTP ${r.status}`,
            );
            pending--;
            done++;
            maybeFinish();
          },
          (e: unknown) => {
            out.replied[idx] = performance.now() - start;
            noDecision(idx, e instanceof Error ? e.message : String(e));
            pending--;
            done++;
            maybeFinish();
          },
        );
      }
      for (const q of queued.values()) flush(q);
      if (i < n || events.length > 0) {
        if (now > hardStop) {
          finish();
          return;
        }
        setTimeout(pump, BATCH_MS > 0 ? BATCH_MS : 1);
      } else if ([...queued.values()].some((q) => q.idxs.length > 0)) {
        // everything is due; what waits behind a replica's batches in flight leaves as they return
        if (now <= hardStop) setTimeout(pump, BATCH_MS);
        else finish();
      } else maybeFinish();
    };
    pump();
  });
  out.durationMs = performance.now() - start;
  alignClocks(out);
  await Promise.allSettled(eventRuns);
  for (const a of agents.values()) a.destroy();
  return out;
}

/**
 * When each request was decided, as well as the host can tell: the replica's own decision
 * time when its reply carries `decidedAt` (epoch ms; same kernel clock as the host), else the
 * send time (the arrival at the replica, give or take the network and its queue).
 */
export function decisionTime(r: Replay, i: number): number {
  const d = r.decided[i]!;
  return Number.isNaN(d) ? r.sent[i]! : d;
}

/** True when every reply carried the replica's decision time. */
export function hasDecisionTimes(r: Replay): boolean {
  for (let i = 0; i < r.code.length; i++)
    if (r.code[i] === CODE_ADMITTED && Number.isNaN(r.decided[i]!)) return false;
  return true;
}

/** Admitted times (ms since the replay start), ascending, by `at` (default: decision time). */
export function admittedTimes(r: Replay, at: (i: number) => number = (i) => decisionTime(r, i)): number[] {
  const xs: number[] = [];
  for (let i = 0; i < r.code.length; i++) if (r.code[i] === CODE_ADMITTED) xs.push(at(i));
  return xs.sort((a, b) => a - b);
}

/** worst rolling 1 s by scheduled, send and reply time: how much the choice of clock matters. */
export function worstBy(r: Replay) {
  return {
    scheduled: worstRolling(
      admittedTimes(r, (i) => r.sched[i]!),
      1000,
    ),
    sent: worstRolling(
      admittedTimes(r, (i) => r.sent[i]!),
      1000,
    ),
    replied: worstRolling(
      admittedTimes(r, (i) => r.replied[i]!),
      1000,
    ),
  };
}

export function lagStats(r: Replay) {
  const lag: number[] = [];
  const lat: number[] = [];
  for (let i = 0; i < r.code.length; i++) {
    if (Number.isNaN(r.sent[i]!)) continue;
    lag.push(r.sent[i]! - r.sched[i]!);
    if (!Number.isNaN(r.replied[i]!)) lat.push(r.replied[i]! - r.sent[i]!);
  }
  return {
    send_lag_ms: {
      p50: round(quantile(lag, 0.5), 2),
      p99: round(quantile(lag, 0.99), 2),
      max: round(Math.max(0, ...lag), 2),
    },
    latency_ms: {
      p50: round(quantile(lat, 0.5), 2),
      p99: round(quantile(lat, 0.99), 2),
      max: round(Math.max(0, ...lat), 2),
    },
    max_in_flight: r.maxQueued,
  };
}

/**
 * Why the figures may not be what they seem: requests not sent on time, replies (so decisions)
 * far behind the sends, or replicas not ticking at their gossip interval (CPU-starved).
 */
export function overloaded(
  lag: ReturnType<typeof lagStats>,
  sustainedPct?: number,
  hostBusyPct?: number,
): string | undefined {
  const why: string[] = [];
  if (hostBusyPct !== undefined && hostBusyPct > 90) why.push(`host CPU ${hostBusyPct} % busy (> 90)`);
  if (lag.send_lag_ms.p99 > 20) why.push(`send lag p99 ${lag.send_lag_ms.p99} ms (> 20)`);
  if (lag.latency_ms.p99 > 50)
    why.push(`reply latency p99 ${lag.latency_ms.p99} ms (> 50: decisions happen well after the send times)`);
  if (sustainedPct !== undefined && sustainedPct < 80)
    why.push(`gossip ticks at ${sustainedPct} % of 1000/g (CPU-starved replicas)`);
  if (why.length === 0) return undefined;
  return `${why.join('; ')}; host load ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores`;
}

export function counts(r: Replay, filter?: (i: number) => boolean) {
  const c = { sent: 0, admitted: 0, denied: 0, errors: 0, skipped: 0, global: 0, fallback: 0, local: 0 };
  for (let i = 0; i < r.code.length; i++) {
    if (filter && !filter(i)) continue;
    const k = r.code[i];
    if (k === CODE_SKIPPED) c.skipped++;
    else c.sent++;
    if (k === CODE_ADMITTED) c.admitted++;
    else if (k === CODE_DENIED) c.denied++;
    else if (k === CODE_ERROR) c.errors++;
    const m = r.mode[i]!;
    if (m < MODES.length) c[MODES[m]!]++;
  }
  return c;
}

/** "reason × count, ..." for requests that got no decision ('' when none). */
export function describeErrors(r: Replay): string {
  return [...r.errorReasons.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([why, n]) => `${why} x ${n}`)
    .join('; ');
}

/**
 * Where the worst rolling 1 s (by decision time) lies and what made it: its start (ms since the
 * replay start), the admissions in it, and those by replica (`label`, default targetKey) and by
 * decision mode.
 */
export function worstWindow(
  r: Replay,
  label: (via: number) => string = (v) => r.targets[v] ?? '?',
  widthMs = 1000,
) {
  const idx: number[] = [];
  for (let i = 0; i < r.code.length; i++) if (r.code[i] === CODE_ADMITTED) idx.push(i);
  const at = idx.map((i) => decisionTime(r, i));
  const order = at.map((_, j) => j).sort((a, b) => at[a]! - at[b]!);
  let best = 0;
  let bestFrom = 0;
  let j = 0;
  for (let i = 0; i < order.length; i++) {
    const end = at[order[i]!]! + widthMs;
    if (j < i) j = i;
    while (j < order.length && at[order[j]!]! < end) j++;
    if (j - i > best) {
      best = j - i;
      bestFrom = i;
    }
  }
  const byReplica: Record<string, number> = {};
  const byMode: Record<string, number> = {};
  for (let q = bestFrom; q < bestFrom + best; q++) {
    const i = idx[order[q]!]!;
    const rep = label(r.via[i]!);
    byReplica[rep] = (byReplica[rep] ?? 0) + 1;
    const m = MODES[r.mode[i]!] ?? '?';
    byMode[m] = (byMode[m] ?? 0) + 1;
  }
  const fromMs = best > 0 ? at[order[bestFrom]!]! : Number.NaN;
  return { fromMs: round(fromMs, 0), admitted: best, byReplica, byMode };
}

/** Admitted per `binMs` (by decision time) for each replica (`label`, default targetKey): replica -> counts. */
export function admittedPerBinByReplica(
  r: Replay,
  binMs: number,
  label: (via: number) => string = (v) => r.targets[v] ?? '?',
): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (let i = 0; i < r.code.length; i++) {
    if (r.code[i] !== CODE_ADMITTED) continue;
    const rep = label(r.via[i]!);
    const b = Math.max(0, Math.floor(decisionTime(r, i) / binMs));
    let xs = out[rep];
    if (xs === undefined) {
      xs = [];
      out[rep] = xs;
    }
    while (xs.length <= b) xs.push(0);
    xs[b]!++;
  }
  return out;
}
