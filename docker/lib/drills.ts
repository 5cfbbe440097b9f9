/** The kill and partition drills. */
import { round } from '../../src/sim/metrics.js';
import type { Cut } from '../../src/sim/simulator.js';
import type { Trace } from '../../src/sim/trace.js';
import { BOUND, CHECK_TIMEOUT_MS, CI, L, SEED, secs, sleep } from './config.js';
import { docker } from './exec.js';
import { ctlAgent, getJson, httpCall, type PeersBody, type StatsBody, type Target } from './http.js';
import {
  admittedTimes,
  CODE_ADMITTED,
  counts,
  decisionTime,
  describeErrors,
  lagStats,
  type Replay,
  type ReplayHooks,
  replay,
} from './replay.js';
import { inspectReplica, startRelay, stopRelay } from './replicas.js';
import { check, type DrillOutcome, liveRow, predicted } from './report.js';
import { state } from './state.js';

/** docker kill replica `k` at 20 % of the trace, docker start 1 s later; serve again once /healthz passes. */
export async function killDrill(trace: Trace, k: number): Promise<DrillOutcome> {
  const rep = state.replicas[k]!;
  const others = state.replicas.filter((r) => r.index !== k);
  const killAt = Math.round(trace.t.length * 0.5 * 0.2);
  const startAt = killAt + 1000;
  const before = await getJson<PeersBody>(rep.target, '/v1/peers');
  const peerId = before?.peerId ?? '';
  let down = false;
  let target: Target = rep.target;
  const marks: Record<string, number> = {};
  let restartedPeerId = '';
  let sync: StatsBody['mesh']['sync'] | undefined;
  let start = 0;
  const since = () => performance.now() - start;
  const watch = async () => {
    // Others see the killed member stale (fall back: its share reserved), then everyone N-1 live.
    const deadline = performance.now() + 60_000;
    while (performance.now() < deadline) {
      const bodies = await Promise.all(others.map((o) => getJson<PeersBody>(o.target, '/v1/peers', 1000)));
      const t = since();
      if (marks.kill_cmd !== undefined && marks.others_see_stale === undefined) {
        const allSee = bodies.every((b) => {
          const p = b?.peers.find((x) => x.id === peerId);
          return b !== undefined && (p === undefined || p.stale);
        });
        if (allSee) marks.others_see_stale = t;
      }
      if (marks.serving !== undefined) {
        const mine = await getJson<PeersBody>(target, '/v1/peers', 1000);
        if (
          mine?.live === state.replicas.length - 1 &&
          bodies.every((b) => b?.live === state.replicas.length - 1)
        ) {
          marks.all_live = since();
          return;
        }
      }
      await sleep(50);
    }
  };
  let watcher: Promise<void> | undefined;
  const hooks: ReplayHooks = {
    route: (node) => (node === k ? (down ? undefined : target) : state.replicas[node]!.target),
    events: [
      {
        atMs: killAt,
        run: async (t0) => {
          start = t0;
          down = true;
          watcher = watch();
          marks.kill_cmd = since();
          await docker(['kill', rep.id], 30_000);
          marks.killed = since();
          // What was in flight to it is lost with it: fail it now instead of waiting for the timeout.
          hooks.abort?.(target);
          await sleep(Math.max(0, startAt - since()));
          marks.start_cmd = since();
          await docker(['start', rep.id], 60_000);
          marks.started = since();
          const fresh = await inspectReplica(rep.id);
          Object.assign(rep, fresh);
          target = rep.target;
          // Serve again once its /healthz passes (a balancer's health check), bounded.
          const deadline = performance.now() + 60_000;
          while (performance.now() < deadline) {
            const h = await httpCall(target, 'GET', '/healthz', ctlAgent, 1000).catch(() => undefined);
            if (h?.status === 200) break;
            await sleep(50);
          }
          marks.serving = since();
          down = false;
          const p = await getJson<PeersBody>(target, '/v1/peers');
          restartedPeerId = p?.peerId ?? '';
          await watcher;
          sync = (await getJson<StatsBody>(target, '/v1/stats'))?.mesh.sync;
        },
      },
    ],
  };
  const r = await replay(trace, 'drill-kill', hooks);
  await watcher;
  const row = liveRow(trace, r, Number.NaN, Number.NaN, `node${k} killed ${secs(killAt)}-${secs(startAt)}s`);
  const servingT = marks.serving ?? Number.NaN;
  const adm = admittedTimes(r);
  const firstSecond = adm.filter((t) => t >= servingT && t < servingT + 1000).length;
  const after = counts(r, (i) => trace.node[i] === k && decisionTime(r, i) >= servingT);
  const restartedAdmits = after.admitted;
  // CI: "serves again" is behaviour (it decides checks), not speed: on a starved machine the
  // restart can outlast the trace, so a replica with no trace decisions gets one check after it.
  let restartedDecisions = after.admitted + after.denied;
  let servedBy = 'trace requests decided';
  if (CI && restartedDecisions === 0) {
    const res = await httpCall(
      target,
      'POST',
      '/v1/check',
      ctlAgent,
      CHECK_TIMEOUT_MS,
      Buffer.from(JSON.stringify({ policy: SEED.name, key: 'drill-kill-after', cost: 1 })),
    ).catch(() => undefined);
    if (res?.status === 200 || res?.status === 429) restartedDecisions = 1;
    servedBy = 'a check after the trace (the restart outlasted the trace)';
  }
  const c = counts(r);
  const fallbackMs = (marks.others_see_stale ?? Number.NaN) - (marks.kill_cmd ?? Number.NaN);
  // Sent to the killed replica before docker kill returned and never answered: lost with it.
  const killedAt = marks.killed ?? Number.POSITIVE_INFINITY;
  const lostWithKill = counts(r, (i) => trace.node[i] === k && r.sent[i]! < killedAt).errors;
  const otherErrors = c.errors - lostWithKill;
  const errPct = round((c.errors / Math.max(1, c.sent)) * 100, 2);
  const checks = [
    check('worst 1 s over the drill', row.worst_1s, `<= ${BOUND}`, row.worst_1s <= BOUND),
    CI
      ? check(
          `requests that got no decision, besides the ${lostWithKill} in flight to the killed replica`,
          otherErrors,
          '0',
          otherErrors === 0,
        )
      : check(
          'requests that got no decision (errors %, incl. in flight at the kill)',
          errPct,
          '<= 2',
          errPct <= 2,
        ),
    check(
      'admitted in the first second after it serves again',
      firstSecond,
      `<= ${BOUND}`,
      firstSecond <= BOUND,
    ),
    check(
      'restarted replica pulled state through sync',
      sync?.pullsOk ?? 0,
      '>= 1',
      (sync?.pullsOk ?? 0) >= 1,
    ),
    check(
      'restarted replica kept its peer id',
      restartedPeerId === peerId ? 'yes' : 'no',
      'yes',
      restartedPeerId === peerId,
    ),
    CI
      ? check(
          `restarted replica decides again (${servedBy})`,
          restartedDecisions,
          '> 0',
          restartedDecisions > 0,
        )
      : check('restarted replica admitted again', restartedAdmits, '> 0', restartedAdmits > 0),
    check(
      'others marked it stale (ms after docker kill was issued)',
      round(fallbackMs, 0),
      'observed',
      Number.isFinite(fallbackMs),
    ),
    check(
      'mesh back to N-1 live everywhere (ms after docker start)',
      round((marks.all_live ?? Number.NaN) - (marks.start_cmd ?? 0), 0),
      'observed within 60 s',
      marks.all_live !== undefined,
    ),
  ];
  return {
    name: `kill (docker kill ${rep.name} at ${secs(killAt)} s, docker start 1 s later)`,
    row: {
      ...row,
      source: 'docker',
      drill: 'kill',
      replica: rep.name,
      kill_at_ms: killAt,
      docker_kill_returned_ms: round((marks.killed ?? Number.NaN) - (marks.kill_cmd ?? Number.NaN), 0),
      fall_back_ms: round(fallbackMs, 0),
      start_cmd_ms: round(marks.start_cmd ?? Number.NaN, 0),
      docker_start_returned_ms: round((marks.started ?? Number.NaN) - (marks.start_cmd ?? Number.NaN), 0),
      serving_again_ms: round((marks.serving ?? Number.NaN) - (marks.start_cmd ?? Number.NaN), 0),
      recover_all_live_ms: round((marks.all_live ?? Number.NaN) - (marks.start_cmd ?? Number.NaN), 0),
      first_second_admitted: firstSecond,
      ...timeline(r, trace, k),
      restarted_sync: sync,
      requests: c,
      no_decision: describeErrors(r),
      ...lagStats(r),
    },
    checks,
  };
}

/** docker network disconnect replica `k` for 3 s at 20 % of the trace, then reconnect with --alias node. */
export async function partitionDrill(trace: Trace, k: number): Promise<DrillOutcome> {
  const rep = state.replicas[k]!;
  state.relay = await startRelay(rep);
  const via: Target = { socketPath: state.relay.socketPath };
  const cutAt = Math.round(trace.t.length * 0.5 * 0.2);
  const cutMs = 3000;
  const marks: Record<string, number> = {};
  const polls: { t: number; live: number; fallback: boolean }[] = [];
  let start = 0;
  const since = () => performance.now() - start;
  let stopPolling = false;
  // Its own view through the relay, every 50 ms, from the cut until it is back (bounded).
  const poll = async () => {
    const deadline = performance.now() + cutMs + 60_000;
    while (!stopPolling && performance.now() < deadline) {
      const b = await getJson<PeersBody>(via, '/v1/peers', 1000);
      if (b) {
        const t = since();
        polls.push({ t, live: b.live, fallback: b.fallback });
        if (marks.cut !== undefined && b.fallback && marks.view_fallback === undefined)
          marks.view_fallback = t;
        if (marks.healed !== undefined && !b.fallback && marks.view_global === undefined)
          marks.view_global = t;
        if (
          marks.healed !== undefined &&
          b.live === state.replicas.length - 1 &&
          marks.view_all_live === undefined
        ) {
          marks.view_all_live = t;
          return;
        }
      }
      await sleep(50);
    }
  };
  let poller: Promise<void> | undefined;
  const r = await replay(trace, 'drill-partition', {
    route: (node) => (node === k ? via : state.replicas[node]!.target),
    events: [
      {
        atMs: cutAt,
        run: async (t0) => {
          start = t0;
          poller = poll();
          await docker(['network', 'disconnect', rep.network, rep.id], 30_000);
          marks.cut = since();
          await sleep(Math.max(0, marks.cut + cutMs - since()));
          marks.heal_cmd = since();
          await docker(['network', 'connect', '--alias', 'node', rep.network, rep.id], 30_000);
          marks.healed = since();
        },
      },
    ],
  });
  await poller;
  stopPolling = true;
  stopRelay(state.relay);
  state.relay = undefined;
  Object.assign(rep, await inspectReplica(rep.id));

  // Decisions of the cut replica, by send time relative to the drill clock (the cut event).
  const rel = (i: number) => decisionTime(r, i);
  const mine: number[] = [];
  for (let i = 0; i < r.code.length; i++) if (trace.node[i] === k && !Number.isNaN(r.sent[i]!)) mine.push(i);
  const firstFallback = mine.find((i) => rel(i) >= marks.cut! && r.mode[i] === 1);
  const firstGlobalAfter = mine.find((i) => rel(i) >= marks.healed! && r.mode[i] === 0);
  const fallbackMs = firstFallback === undefined ? Number.NaN : rel(firstFallback) - marks.cut!;
  // Back to global: its first global decision after the reconnect, or (the trace over) its view.
  const recoverMs =
    firstGlobalAfter !== undefined
      ? rel(firstGlobalAfter) - marks.healed!
      : (marks.view_global ?? Number.NaN) - marks.healed!;
  const recoverBy = firstGlobalAfter !== undefined ? 'decision mode' : 'its /v1/peers (trace over)';
  const inCut = (i: number) => rel(i) >= marks.cut! + 200 && rel(i) < marks.heal_cmd!;
  const cutCounts = counts(r, (i) => trace.node[i] === k && inCut(i));
  const cutSecs = (marks.heal_cmd! - marks.cut! - 200) / 1000;
  const cut: Cut = {
    node: k,
    fromMs: Math.round(marks.cut!),
    toMs: Math.round(marks.healed!),
  };
  const pred = predicted(trace, cut);
  const row = liveRow(trace, r, Number.NaN, Number.NaN, `node${k} ${secs(cut.fromMs)}-${secs(cut.toMs)}s`);
  const share = L / state.replicas.length;
  const c = counts(r);
  const errPct = round((c.errors / Math.max(1, c.sent)) * 100, 2);
  const checks = [
    check('worst 1 s over the drill', row.worst_1s, `<= ${BOUND}`, row.worst_1s <= BOUND),
    CI
      ? check('requests that got no decision', c.errors, '0', c.errors === 0)
      : check('requests that got no decision (errors %)', errPct, '<= 2', errPct <= 2),
    check(
      'cut replica fell back to L/N (decision mode fallback), ms after disconnect',
      round(fallbackMs, 0),
      'observed',
      Number.isFinite(fallbackMs),
    ),
    check(
      'cut replica admitted per second while cut',
      round(cutCounts.admitted / cutSecs, 0),
      `<= L/N = ${share} (+${CI ? 10 : 2} %)`,
      cutCounts.admitted / cutSecs <= share * (CI ? 1.1 : 1.02),
    ),
    check(
      `back to global after reconnect (by ${recoverBy}), ms`,
      round(recoverMs, 0),
      'observed',
      Number.isFinite(recoverMs),
    ),
  ];
  return {
    name: `partition (docker network disconnect ${rep.name} for ${cutMs / 1000} s at ${secs(cutAt)} s)`,
    row: {
      ...row,
      source: 'docker',
      drill: 'partition',
      replica: rep.name,
      cut_at_ms: cutAt,
      disconnect_returned_ms: round(marks.cut!, 0),
      fall_back_ms: round(fallbackMs, 0),
      view_fallback_ms: round((marks.view_fallback ?? Number.NaN) - marks.cut!, 0),
      reconnect_returned_ms: round(marks.healed! - marks.heal_cmd!, 0),
      recover_global_ms: round(recoverMs, 0),
      recover_all_live_ms: round((marks.view_all_live ?? Number.NaN) - marks.healed!, 0),
      cut_replica: cutCounts,
      ...timeline(r, trace, k),
      predicted_worst_1s: pred.worst_1s,
      predicted_admitted: pred.admitted,
      requests: c,
      no_decision: describeErrors(r),
      ...lagStats(r),
    },
    checks,
  };
}

/**
 * Where a drill's worst second was: its start (ms since the replay start, by decision time),
 * and admissions per 250 ms over the drill, all replicas and the drilled one.
 */
function timeline(r: Replay, trace: Trace, k: number) {
  const all = admittedTimes(r);
  let worst = 0;
  let worstAt = 0;
  for (let i = 0, j = 0; i < all.length; i++) {
    while (all[i]! - all[j]! >= 1000) j++;
    if (i - j + 1 > worst) {
      worst = i - j + 1;
      worstAt = all[j]!;
    }
  }
  const slots = Math.ceil((trace.t[trace.t.length - 1] ?? 0) / 250) + 8;
  const per = new Array<number>(slots).fill(0);
  const perK = new Array<number>(slots).fill(0);
  for (let i = 0; i < r.code.length; i++) {
    if (r.code[i] !== CODE_ADMITTED) continue;
    const s = Math.floor(decisionTime(r, i) / 250);
    if (s < 0 || s >= slots) continue;
    per[s]!++;
    if (trace.node[i] === k) perK[s]!++;
  }
  return { worst_1s_from_ms: Math.round(worstAt), admitted_per_250ms: per, drilled_admitted_per_250ms: perK };
}
