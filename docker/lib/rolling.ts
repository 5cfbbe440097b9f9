/**
 * The rolling-replacement drill (issue 28): the Kubernetes topology in the Docker mesh. Every
 * replica finds the others through one DNS name (the compose service `node`, as a headless
 * Service with publishNotReadyAddresses gives), and every replica is replaced in turn while
 * the trace runs, as a rolling update with maxSurge 1 and maxUnavailable 0 does:
 *
 *   for each replica: start a new one (compose --scale N+1), wait for its /readyz, route its
 *   trace node's requests to it, then `docker stop` the old one (SIGTERM: /readyz fails, the
 *   in-flight requests finish, the farewell), then remove it.
 *
 * Checks: worst rolling 1 s within the bound (L + 2 %; the CI behaviour profile's L + 20 %),
 * no request without a decision, every new replica ready within 30 s of its start, every
 * replica replaced, and the replacements done while the trace sent (all of them; in CI at
 * least one, since a starved host can take longer than the trace).
 */
import { round } from '../../src/sim/metrics.js';
import type { Trace } from '../../src/sim/trace.js';
import { BOUND, CI, sleep } from './config.js';
import { compose, docker } from './exec.js';
import { ctlAgent, httpCall, type Target } from './http.js';
import {
  admittedPerBinByReplica,
  admittedTimes,
  counts,
  describeErrors,
  lagStats,
  type ReplayHooks,
  replay,
  worstBy,
  worstWindow,
} from './replay.js';
import { inspectReplica, listReplicas, type Replica } from './replicas.js';
import { check, type DrillOutcome, liveRow } from './report.js';
import { state } from './state.js';

/** A new replica must answer /readyz 200 within this of `compose up` returning, ms. */
export const READY_BOUND_MS = 30_000;

/** ms until /readyz answers 200 (NaN: not within `ms`), and the body of that answer (its view of the mesh). */
async function readyWithin(target: Target, ms: number): Promise<{ ms: number; body: string }> {
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    const h = await httpCall(target, 'GET', '/readyz', ctlAgent, 1000).catch(() => undefined);
    if (h?.status === 200) return { ms: performance.now() - t0, body: h.body };
    await sleep(50);
  }
  return { ms: Number.NaN, body: '' };
}

export async function rollingDrill(trace: Trace): Promise<DrillOutcome> {
  const n = state.replicas.length;
  const route: Target[] = state.replicas.map((r) => r.target);
  const readyMs: number[] = [];
  const stopMs: number[] = [];
  const replaced: string[] = [];
  /** Per replacement, ms since the replay start: surge asked, new replica ready (routed to), old stopped. */
  const marks: { surge: number; routed: number; stopped: number; readyView: string }[] = [];
  // by Target object: a new replica may get the address of one removed before it
  const names = new Map<Target, string>(state.replicas.map((r) => [r.target, r.name]));
  let doneAt = Number.NaN;
  /** Replacements finished while the trace still sent (ms since the replay start). */
  const doneTimes: number[] = [];
  let start = 0;
  const since = () => performance.now() - start;
  const roll = async (t0: number) => {
    start = t0;
    for (let k = 0; k < n; k++) {
      const old = state.replicas[k]!;
      const before = new Set((await listReplicas()).map((r) => r.id));
      const surge = since();
      // surge: one more replica; compose keeps the running ones (--no-recreate)
      await compose(['up', '-d', '--no-build', '--no-recreate', '--scale', `node=${n + 1}`, 'node'], 120_000);
      const added = (await listReplicas()).filter((r) => !before.has(r.id));
      if (added.length !== 1) throw new Error(`rolling: expected one new replica, got ${added.length}`);
      const fresh: Replica = await inspectReplica(added[0]!.id);
      names.set(fresh.target, fresh.name);
      const ready = await readyWithin(fresh.target, READY_BOUND_MS);
      readyMs.push(ready.ms);
      // the balancer: new requests of this trace node go to the new replica from now on
      route[k] = fresh.target;
      const routed = since();
      const s0 = performance.now();
      // SIGTERM; the daemon drains (readiness off, in-flight requests finish, farewell), then exits
      await docker(['stop', '-t', '15', old.id], 60_000);
      stopMs.push(performance.now() - s0);
      marks.push({ surge, routed, stopped: since(), readyView: ready.body });
      await docker(['rm', '-f', old.id], 30_000, false);
      // its keep-alive sockets are dead: a later replica that takes its address starts afresh
      hooks.abort?.(old.target);
      state.replicas[k] = fresh;
      replaced.push(`${old.name}->${fresh.name}`);
      doneTimes.push(since());
    }
    doneAt = since();
  };
  const hooks: ReplayHooks = {
    route: (node) => route[node],
    events: [{ atMs: Math.round(trace.t[trace.t.length - 1]! * 0.05), run: roll }],
  };
  const r = await replay(trace, 'drill-rolling', hooks);
  const row = liveRow(trace, r, Number.NaN, Number.NaN, `rolling replacement of ${n} replicas`);
  const c = counts(r);
  const traceEnd = trace.t[trace.t.length - 1]!;
  const underTraffic = doneTimes.filter((t) => t <= traceEnd).length;
  // admitted per second (by decision time), to set beside the replacement times
  const perSecond: number[] = [];
  for (const t of admittedTimes(r)) {
    const s = Math.max(0, Math.floor(t / 1000));
    while (perSecond.length <= s) perSecond.push(0);
    perSecond[s]!++;
  }
  const slowestReady = Math.max(...readyMs.map((x) => (Number.isNaN(x) ? Number.POSITIVE_INFINITY : x)));
  // where the worst second is, and who admitted in it (replica names instead of addresses)
  const label = (v: number) => names.get(r.targetRefs[v]!) ?? r.targets[v] ?? '?';
  const ww = worstWindow(r, label);
  const per250 = admittedPerBinByReplica(r, 250, label);
  const checks = [
    check('worst 1 s over the drill', row.worst_1s, `<= ${BOUND}`, row.worst_1s <= BOUND),
    check('requests that got no decision', c.errors, '0', c.errors === 0),
    check(
      'slowest new replica ready (/readyz 200, s after start)',
      round(slowestReady / 1000, 2),
      `<= ${READY_BOUND_MS / 1000}`,
      slowestReady <= READY_BOUND_MS,
    ),
    check('replicas replaced', replaced.length, `${n}`, replaced.length === n),
    // behaviour, not speed: on a starved host a replacement takes longer than the trace allows;
    // at least one must happen under traffic (CI), every one of them otherwise
    CI
      ? check('replacements done while the trace sent', underTraffic, '>= 1', underTraffic >= 1)
      : check('replacements done while the trace sent', underTraffic, `${n}`, underTraffic === n),
  ];
  return {
    name: `rolling replacement of all ${n} replicas (surge 1, SIGTERM drain), one DNS name`,
    row: {
      ...row,
      source: 'docker',
      drill: 'rolling',
      replaced,
      ready_ms: readyMs.map((x) => round(x, 0)),
      stop_ms: stopMs.map((x) => round(x, 0)),
      rolling_done_ms: round(doneAt, 0),
      replaced_at_ms: doneTimes.map((x) => round(x, 0)),
      admitted_per_second: perSecond,
      worst_1s_by: worstBy(r),
      worst_1s_at: ww,
      replacements_ms: marks.map((m) => ({
        surge: round(m.surge, 0),
        routed: round(m.routed, 0),
        stopped: round(m.stopped, 0),
      })),
      ready_views: marks.map((m) => m.readyView),
      admitted_per_250ms_by_replica: per250,
      // each replica's clock minus the driver's, ms (decision times were put on the driver's)
      clock_offsets_ms: Object.fromEntries(
        r.clocks.map((c, v) => [label(v), `${c.offsetMs} ±${round(c.spreadMs / 2, 1)}`]),
      ),
      requests: c,
      no_decision: describeErrors(r),
      ...lagStats(r),
    },
    checks,
  };
}
