/**
 * The Docker mesh, end to end, from the host:
 *
 *   npm run docker:mesh -- [--nodes 8] [--delay-ms D] [--gossip-ms G] [--seconds 10]
 *                          [--drills kill,partition,rolling|none] [--skip-build] [--out file.json]
 *
 * 1. prepare  docker/prepare.sh (engine, compose, local base image when no registry)
 * 2. build    npm run build + docker/stage-app.mjs on the host, then `compose build` from a
 *             slim staged context (docker/tmp/ctx: Dockerfile, config, the staged app)
 * 3. up       `compose up -d --scale node=N` (project ratemesh-mesh), waits until every
 *             replica's GET /v1/peers shows N-1 live peers (bootstrap: dns:node:4001)
 * 4. replay   the seed trace (request i at i × 0.5 ms to its trace node's replica,
 *             node mod N) against the replicas' POST /v1/check over keep-alive agents;
 *             prints the simulator's row figures for the live run beside the simulator's
 *             prediction (bench/accuracy.ts gossipRow), per-replica figures and send lag
 * 5. drills   kill:      `docker kill` replica 1 (the 40 % node) at 20 % of the trace,
 *                        `docker start` it 1 s later; it rejoins through sync and serves
 *                        again once its /healthz passes (requests due while down are skipped)
 *             partition: `docker network disconnect` replica 1 for 3 s, then
 *                        `docker network connect --alias node`; its traffic reaches it
 *                        through a relay in its network namespace (nsenter), so its
 *                        decisions show the L/N fallback and the return to global
 *             rolling:   every replica replaced in turn (a new one via compose --scale N+1,
 *                        routed to once its /readyz passes, then `docker stop` of the old:
 *                        SIGTERM drain), on a trace of 10 s per replica (lib/rolling.ts)
 *             each asserts worst rolling 1 s <= 1,020 (L + 2 %) and reports the times to
 *             fall back and to recover
 * 6. results  docker/results/docker-accuracy.json: rows of bench/accuracy.ts's shape
 *             (AccuracyRow) plus extras; total time and image size
 *
 * The parts (docker/lib/): config.ts (command line, policy, bounds), exec.ts (docker and
 * compose runs), http.ts (calls to the replicas, /metrics), replicas.ts (inspect, wait for the
 * mesh, the partition relay), replay.ts (the live replay and what it recorded), report.ts
 * (trace, figures, prediction, rows, checks), drills.ts (kill, partition), cpu.ts (where the
 * host's CPU went), state.ts (what the run started, teardown). This file is the run's order.
 *
 * Everything started is removed at the end, on failure and on Ctrl-C (compose down).
 * Traffic goes only to this project's containers (and a unix socket on the host).
 * Every wait and loop is bounded. Exit code 0 only when every assertion held.
 */

import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { generateKey } from '@libp2p/pnet';
import type { AccuracyRow } from '../bench/accuracy.js';
import { printTable } from '../bench/table.js';
import { gcraBound } from '../src/sim/baselines.js';
import { round, slidingLogAdmits } from '../src/sim/metrics.js';
import {
  argv,
  BATCH_MS,
  BOUND,
  CI,
  D,
  DRILLS,
  elapsed,
  G,
  HERE,
  IMAGE,
  L,
  log,
  N,
  OUT,
  PROJECT,
  quantile,
  SCALE,
  SECONDS,
  SEED,
  secs,
  sleep,
  TMP,
  W,
  WARMUP_S,
} from './lib/config.js';
import { cpuBreakdown, describeCpu, sampleCpu } from './lib/cpu.js';
import { killDrill, partitionDrill } from './lib/drills.js';
import { compose, composeCmd, detectCompose, docker, run } from './lib/exec.js';
import { getJson, type StatsBody, scrape } from './lib/http.js';
import {
  counts,
  describeErrors,
  hasDecisionTimes,
  lagStats,
  overloaded,
  replay,
  worstBy,
} from './lib/replay.js';
import { listReplicas, waitForMesh } from './lib/replicas.js';
import {
  type Check,
  check,
  type DrillOutcome,
  dockerTrace,
  liveRow,
  mean,
  predicted,
  ROW_HEADER,
  rates,
  rowCells,
} from './lib/report.js';
import { rollingDrill } from './lib/rolling.js';
import { state, teardown } from './lib/state.js';

/** The rolling drill's trace: about 10 s per replica to replace (start, ready, drain), at most 60 s. */
const ROLLING_SECONDS = Math.min(60, Math.max(SECONDS, 10 * N));

// ---------------------------------------------------------------- main

async function main(): Promise<number> {
  const load0 = loadavg()[0]!;
  log(
    `nodes ${N}, gossip ${G} ms, injected delay ${D} ms, seed trace ${SECONDS} s, drills ${[...DRILLS].join(',') || 'none'}; ` +
      `host ${cpus().length} cores, load ${load0.toFixed(1)}`,
  );
  mkdirSync(TMP, { recursive: true });

  // 1. prepare
  if (!argv['skip-prepare']) {
    log('prepare: docker/prepare.sh');
    await run(join(HERE, 'prepare.sh'), [], { timeoutMs: 600_000, inherit: true });
  }
  await detectCompose();
  // A previous run interrupted hard may have left the project behind.
  state.upStarted = true;
  await compose(['down', '-v', '--remove-orphans', '--timeout', '5'], 90_000, false, false);

  // 2. build
  const tBuild = performance.now();
  if (argv['skip-build'] && (await docker(['image', 'inspect', IMAGE], 10_000, false)).code === 0) {
    log(`build skipped (--skip-build): using ${IMAGE}`);
  } else {
    log('build: npm run build + stage-app (host), then compose build from docker/tmp/ctx');
    await run(process.execPath, [join(HERE, 'stage-app.mjs'), '--build'], {
      timeoutMs: 300_000,
      inherit: true,
    });
    const ctx = join(TMP, 'ctx');
    rmSync(ctx, { recursive: true, force: true });
    mkdirSync(join(ctx, 'docker', 'config'), { recursive: true });
    mkdirSync(join(ctx, 'docker', 'tmp'), { recursive: true });
    await run('cp', [join(HERE, 'Dockerfile'), join(ctx, 'docker', 'Dockerfile')], { timeoutMs: 10_000 });
    await run('cp', [join(HERE, 'Dockerfile.dockerignore'), join(ctx, '.dockerignore')], {
      timeoutMs: 10_000,
    });
    await run('cp', [join(HERE, 'config', 'node.yaml'), join(ctx, 'docker', 'config', 'node.yaml')], {
      timeoutMs: 10_000,
    });
    await run('cp', ['-al', join(TMP, 'app'), join(ctx, 'docker', 'tmp', 'app')], { timeoutMs: 60_000 });
    const b = await compose(['build', 'node'], 600_000);
    if (!/Successfully (built|tagged)|naming to|writing image/i.test(b.stdout + b.stderr)) {
      log('compose build finished (no "Successfully built" line seen)');
    }
  }
  const buildMs = performance.now() - tBuild;
  const sizeB = Number((await docker(['image', 'inspect', '-f', '{{.Size}}', IMAGE])).stdout.trim());
  const imageMb = round(sizeB / 1e6, 1);
  log(`image ${IMAGE}: ${imageMb} MB (build step ${secs(buildMs)} s)`);

  // 3. up and wait for the mesh. The replicas listen on their network, so they share a psk
  // (docker/tmp/swarm.key, made once, mounted read-only in every replica).
  const pskFile = join(TMP, 'swarm.key');
  // (a compose run without it leaves a directory there: docker makes missing mount sources)
  if (!existsSync(pskFile) || !statSync(pskFile).isFile()) {
    rmSync(pskFile, { recursive: true, force: true });
    const key = new Uint8Array(95);
    generateKey(key);
    writeFileSync(pskFile, key, { mode: 0o644 });
    log(`made a psk for the replicas: ${relative(process.cwd(), pskFile)}`);
  }
  writeFileSync(
    join(TMP, 'mesh-node.yaml'),
    [
      '# Written by docker/mesh.ts for one run (mounted at /etc/ratemesh/config.yaml).',
      'http: { host: 0.0.0.0, port: 8080 }',
      'mesh:',
      '  listen: ["/ip4/0.0.0.0/tcp/4001"]',
      '  bootstrap: ["dns:node:4001"]',
      ...(D > 0 ? [`  expectedDelayMs: ${D}`] : []),
      'log: { level: warn }',
      'policies:',
      `  - { name: ${SEED.name}, limit: ${SEED.limit}, windowMs: ${SEED.windowMs}, buckets: ${SEED.buckets} }`,
      '',
    ].join('\n'),
  );
  // The load service's input (compose.load.yml mounts docker/tmp/trace at /trace).
  const trace = dockerTrace(N, SECONDS);
  mkdirSync(join(TMP, 'trace'), { recursive: true });
  writeFileSync(
    join(TMP, 'trace', 'seed.jsonl'),
    `${Array.from(trace.t, (t, i) => JSON.stringify({ t, node: trace.node[i] })).join('\n')}\n`,
  );

  const tUp = performance.now();
  log(`up: ${composeCmd.join(' ')} -p ${PROJECT} up -d --scale node=${N}`);
  await compose(['up', '-d', '--no-build', '--scale', `node=${N}`, 'node'], 180_000);
  const upReturnedMs = performance.now() - tUp;
  state.replicas = await listReplicas();
  if (state.replicas.length !== N) throw new Error(`expected ${N} replicas, found ${state.replicas.length}`);
  const formLimitMs = CI ? 120_000 : 60_000;
  const formed = await waitForMesh(state.replicas, formLimitMs, tUp);
  const formedMs = formed.ok ? formed.allTogetherMs : Number.POSITIVE_INFINITY;
  const lastFirstFull = Math.max(...formed.firstFullMs);
  log(
    formed.ok
      ? `mesh formed: every replica at ${N - 1} live peers ${secs(formedMs)} s after 'up' started ` +
          `(up returned after ${secs(upReturnedMs)} s; last replica's first full view at ${secs(lastFirstFull)} s)`
      : `FAIL  mesh NOT formed within ${formLimitMs / 1000} s (live peers per replica ${formed.lastLive.join('/')}); measuring anyway`,
  );
  if (!formed.answered.every(Boolean)) throw new Error('a replica never answered GET /v1/peers');

  // 4. replay the seed trace, after a warm-up on another key: fresh replicas run their HTTP and
  // decision code in V8's interpreter for the first seconds (measured here: decisions up to
  // 1.4 s behind their send times for ~3 s, then p99 10-30 ms), which is start-up, not the limiter
  if (WARMUP_S > 0) {
    log(`warm-up: the first ${WARMUP_S} s of the trace on key 'warmup' (not measured)`);
    const w = await replay(dockerTrace(N, WARMUP_S), 'warmup', {
      route: (node) => state.replicas[node]!.target,
    });
    const wl = lagStats(w);
    log(
      `warm-up done: reply latency p99 ${wl.latency_ms.p99} ms; waiting one window for its counts to leave`,
    );
    await sleep(W + 2 * G);
  }
  const before = await Promise.all(state.replicas.map((r) => scrape(r.target)));
  const cpu0 = sampleCpu(state.replicas.map((r) => r.fullId));
  const self0 = process.cpuUsage();
  const statsBefore = await Promise.all(state.replicas.map((r) => getJson<StatsBody>(r.target, '/v1/stats')));
  const loadBefore = loadavg()[0]!;
  log(
    `replay: ${trace.t.length} requests over ${SECONDS} s (${round(2000 * SCALE, 0)}/s) to ${N} replicas, ` +
      (BATCH_MS > 0
        ? `the ones due for a replica sent together every ${BATCH_MS} ms (POST /v1/check/batch)`
        : `one POST /v1/check each`),
  );
  const main = await replay(trace, 'main', { route: (node) => state.replicas[node]!.target });
  const cpuUse = cpuBreakdown(
    cpu0,
    sampleCpu(state.replicas.map((r) => r.fullId)),
    new Map(state.replicas.map((r) => [r.fullId, r.name])),
  );
  const after = await Promise.all(state.replicas.map((r) => scrape(r.target)));
  const statsAfter = await Promise.all(state.replicas.map((r) => getJson<StatsBody>(r.target, '/v1/stats')));
  const per = rates(before, after, main.durationMs);
  const row = liveRow(trace, main, mean(per.map((p) => p.msgs)), mean(per.map((p) => p.bytes)), null);
  const pred = predicted(trace);
  const lag = lagStats(main);
  const c = counts(main);
  const clocks = worstBy(main);
  const decidedAt = hasDecisionTimes(main);

  console.log('');
  console.log(
    `seed trace: ${trace.t.length} requests over ${SECONDS} s, ${N} Docker replicas, L = ${L} per ${W} ms (k = ${SEED.buckets}); ` +
      `GCRA bound ${gcraBound(trace, 1 / SCALE, Math.round(96 * SCALE))}, exact sliding-window-log bound ${slidingLogAdmits(trace.t, L, W).length}`,
  );
  printTable(ROW_HEADER, [rowCells('docker (live)', row), rowCells('simulator (predicted)', pred)]);
  console.log(
    `requests: ${c.sent} sent, ${c.admitted} admitted, ${c.denied} denied, ${c.errors} errors; modes global ${c.global} / fallback ${c.fallback} / local ${c.local}; ` +
      `worst 1s by ${decidedAt ? 'replica decision time' : 'send time'} ${row.worst_1s}, by scheduled ${clocks.scheduled}, sent ${clocks.sent}, replied ${clocks.replied}`,
  );
  if (main.errorReasons.size > 0) console.log(`no decision: ${describeErrors(main)}`);
  console.log(
    `replica clock - driver clock, ms (decision times put on the driver's): ${main.clocks.map((x) => `${x.offsetMs} ±${round(x.spreadMs / 2, 1)}`).join(', ')}`,
  );
  console.log(
    `send lag ms p50 ${lag.send_lag_ms.p50} p99 ${lag.send_lag_ms.p99} max ${lag.send_lag_ms.max}; ` +
      `reply latency ms p50 ${lag.latency_ms.p50} p99 ${lag.latency_ms.p99} max ${lag.latency_ms.max}; ` +
      `max in flight ${lag.max_in_flight}; host load ${loadBefore.toFixed(1)} -> ${loadavg()[0]!.toFixed(1)}`,
  );
  const selfCpu = process.cpuUsage(self0);
  const driverPct = round(
    ((selfCpu.user + selfCpu.system) / 1000 / main.durationMs / cpus().length) * 100,
    1,
  );
  console.log(`${describeCpu(cpuUse)}; of these this load driver: ${driverPct} %`);
  if (process.env.DEBUG_LAT) {
    for (let s = 0; s < SECONDS; s++) {
      const xs: number[] = [];
      for (let j = 0; j < main.code.length; j++)
        if (main.sched[j]! >= s * 1000 && main.sched[j]! < s * 1000 + 1000 && !Number.isNaN(main.decided[j]!))
          xs.push(main.decided[j]! - main.sent[j]!);
      console.log(
        `second ${s}: decide lag p50 ${round(quantile(xs, 0.5), 1)} p99 ${round(quantile(xs, 0.99), 1)} max ${round(Math.max(...xs), 1)}`,
      );
    }
  }
  const perRows = state.replicas.map((rep, i) => {
    const cc = counts(main, (j) => trace.node[j] === i);
    const s0 = statsBefore[i]?.mesh.gossip;
    const s1 = statsAfter[i]?.mesh.gossip;
    const ticks = s0 && s1 ? (s1.ticks - s0.ticks) / (main.durationMs / 1000) : Number.NaN;
    const replyMs: number[] = [];
    const decideMs: number[] = [];
    for (let j = 0; j < main.code.length; j++) {
      if (trace.node[j] !== i || Number.isNaN(main.sent[j]!)) continue;
      if (!Number.isNaN(main.replied[j]!)) replyMs.push(main.replied[j]! - main.sent[j]!);
      if (!Number.isNaN(main.decided[j]!)) decideMs.push(main.decided[j]! - main.sent[j]!);
    }
    return {
      replica: rep.name,
      ip: rep.ip,
      sent: cc.sent,
      admitted: cc.admitted,
      denied: cc.denied,
      errors: cc.errors,
      fallback: cc.fallback,
      msgs_out_s: round(per[i]!.msgs, 1),
      bytes_out_s: Math.round(per[i]!.bytes),
      ticks_s: round(ticks, 1),
      // reply: send to reply; decide: send to the replica's decidedAt (same kernel clock)
      reply_p99_ms: round(quantile(replyMs, 0.99), 1),
      decide_p99_ms: round(quantile(decideMs, 0.99), 1),
      cpu_pct: round(per[i]!.cpuPct, 1),
      cgroup_cpu_pct: cpuUse.per_container_pct_core[rep.name] ?? Number.NaN,
      loop_delay_p99_ms: round(per[i]!.loopP99Ms, 1),
      loop_delay_max_ms: round(per[i]!.loopMaxMs, 1),
      gc_ms: round(per[i]!.gcMs, 1),
    };
  });
  printTable(
    Object.keys(perRows[0]!),
    perRows.map((r) => Object.values(r)),
  );
  const tickRate = mean(perRows.map((r) => r.ticks_s));
  const sustainedPct = round((tickRate / (1000 / G)) * 100, 0);
  const overload = overloaded(lag, sustainedPct, cpuUse.host_busy_pct);
  console.log(
    `gossip ticks: ${round(tickRate, 1)}/s per replica of ${round(1000 / G, 1)}/s (${sustainedPct} % sustained)`,
  );
  console.log(
    overload
      ? `OVERLOADED  ${overload}: decisions and gossip ran late on a starved host; timing figures above measure the host, the checks below still hold the behaviour`
      : `not overloaded: host CPU ${cpuUse.host_busy_pct} % busy, reply latency p99 ${lag.latency_ms.p99} ms, send lag p99 ${lag.send_lag_ms.p99} ms, gossip ticks ${sustainedPct} %`,
  );
  const ok1 = row.worst_1s <= BOUND;
  // The benchmark holds formation to 15 s; CI checks that it forms (start-up speed is not behaviour).
  const formedOk = CI ? formed.ok : formedMs < 15_000;
  const formedBound = CI ? `< ${formLimitMs / 1000}` : '< 15';
  console.log(
    `${ok1 ? 'PASS' : 'FAIL'}  worst 1 s ${row.worst_1s} (bound ${BOUND}); ` +
      `${formedOk ? 'PASS' : 'FAIL'}  mesh formed in ${formed.ok ? secs(formedMs) : `> ${formLimitMs / 1000}`} s (target ${formedBound} s)`,
  );
  console.log('');

  const rows: (AccuracyRow & Record<string, unknown>)[] = [
    {
      ...row,
      source: 'docker',
      nodes: N,
      seconds: SECONDS,
      requests: c,
      decision_time_source: decidedAt ? 'replica decidedAt' : 'host send time',
      gossip_ticks_per_s_node: round(tickRate, 1),
      gossip_sustained_pct: sustainedPct,
      overloaded: overload ?? false,
      worst_1s_by: clocks,
      predicted_worst_1s: pred.worst_1s,
      predicted_admitted: pred.admitted,
      predicted_worst_100ms: pred.worst_100ms,
      predicted_msgs_per_s_node: pred.msgs_per_s_node,
      predicted_bytes_per_s_node: pred.bytes_per_s_node,
      ...lag,
      host_cpu: { ...cpuUse, driver_pct_of_host: driverPct },
      replicas: perRows,
      mesh_formed_ms: round(formedMs, 0),
      up_returned_ms: round(upReturnedMs, 0),
      image: IMAGE,
      image_mb: imageMb,
      host: { cores: cpus().length, load_before: round(loadBefore, 2), compose: composeCmd.join(' ') },
    },
  ];
  const errPct = round((c.errors / Math.max(1, c.sent)) * 100, 2);
  const checks: Check[] = [
    check('worst 1 s (seed trace)', row.worst_1s, `<= ${BOUND}`, ok1),
    // A run where replies time out measures nothing: it must not pass on a low worst 1 s.
    CI
      ? check('requests that got no decision', c.errors, '0', c.errors === 0)
      : check('requests that got no decision (errors %)', errPct, '<= 1', errPct <= 1),
    check('mesh formed (s after up)', secs(formedMs), formedBound, formedOk),
  ];

  // 5. drills (replica 1 = trace node 0, the 40 % node)
  const drills: DrillOutcome[] = [];
  for (const name of ['kill', 'partition', 'rolling'] as const) {
    if (!DRILLS.has(name)) continue;
    const again = await waitForMesh(state.replicas, 60_000, performance.now());
    if (!again.ok)
      log(
        `WARNING  mesh not whole before the ${name} drill (live ${again.lastLive.join('/')}); running it anyway`,
      );
    log(`drill ${name}`);
    if (name === 'partition' && (process.getuid?.() !== 0 || !existsSync('/usr/bin/nsenter'))) {
      const why = process.getuid?.() !== 0 ? 'not root' : 'no nsenter';
      console.log(
        `FAIL  partition drill not run: ${why} (its traffic goes through a relay made with nsenter)`,
      );
      checks.push(check('partition drill ran', why, 'ran', false));
      continue;
    }
    const d =
      name === 'kill'
        ? await killDrill(trace, 0)
        : name === 'partition'
          ? await partitionDrill(trace, 0)
          : await rollingDrill(dockerTrace(N, ROLLING_SECONDS));
    drills.push(d);
    const ok = d.checks.every((x) => x.ok);
    console.log(
      `${ok ? 'PASS' : 'FAIL'}  ${d.name}: admitted ${d.row.admitted}, worst 1s ${d.row.worst_1s}, worst 100ms ${d.row.worst_100ms}`,
    );
    for (const x of d.checks)
      console.log(`   ${x.ok ? 'ok ' : 'BAD'}  ${x.what}: ${x.value} (bound ${x.bound})`);
    const { requests, send_lag_ms } = d.row;
    const timing = Object.fromEntries(
      Object.entries(d.row).filter(([key]) => key.endsWith('_ms') && typeof d.row[key] === 'number'),
    );
    console.log(`        times ${JSON.stringify(timing)}`);
    console.log(`        requests ${JSON.stringify(requests)} send lag ${JSON.stringify(send_lag_ms)}`);
    if (d.row.no_decision) console.log(`        no decision: ${d.row.no_decision}`);
    if (Array.isArray(d.row.ready_ms))
      console.log(
        `        ready after start ms ${JSON.stringify(d.row.ready_ms)}, docker stop (drain) ms ${JSON.stringify(d.row.stop_ms)}, replaced ${JSON.stringify(d.row.replaced)} at ms ${JSON.stringify(d.row.replaced_at_ms)}\n        admitted per second ${JSON.stringify(d.row.admitted_per_second)}; worst 1 s by clock ${JSON.stringify(d.row.worst_1s_by)}`,
      );
    if (d.row.worst_1s_at !== undefined) {
      const ww = d.row.worst_1s_at as { fromMs: number };
      console.log(
        `        worst 1 s from ms ${ww.fromMs}: ${JSON.stringify(d.row.worst_1s_at)}\n` +
          `        replacements (ms: surge asked, new one routed to, old one stopped) ${JSON.stringify(d.row.replacements_ms)}`,
      );
      // admitted per 250 ms by replica, from 2 s before the worst second to 1 s after it
      const b0 = Math.max(0, Math.floor(ww.fromMs / 250) - 8);
      const per = d.row.admitted_per_250ms_by_replica as Record<string, number[]>;
      for (const [name, xs] of Object.entries(per))
        console.log(
          `        admitted per 250 ms from ${b0 * 250} ms, ${name}: ${xs.slice(b0, b0 + 16).join(' ')}`,
        );
      for (const v of d.row.ready_views as string[]) console.log(`        /readyz when first 200: ${v}`);
      console.log(
        `        replica clock - driver clock, ms (decision times put on the driver's): ${JSON.stringify(d.row.clock_offsets_ms)}`,
      );
    }
    if (Array.isArray(d.row.admitted_per_250ms))
      console.log(
        `        admitted per 250 ms (all | drilled replica): ${(d.row.admitted_per_250ms as number[]).join(' ')} | ${(d.row.drilled_admitted_per_250ms as number[]).join(' ')}`,
      );
    const dl = d.row as unknown as ReturnType<typeof lagStats>;
    const ov = overloaded(dl);
    console.log(
      ov
        ? `OVERLOADED  ${ov}`
        : `not overloaded: reply latency p99 ${dl.latency_ms.p99} ms, send lag p99 ${dl.send_lag_ms.p99} ms`,
    );
    d.row.overloaded = ov ?? false;
    rows.push(d.row);
    checks.push(...d.checks);
  }

  const totalMs = elapsed();
  rows[0]!.total_s = secs(totalMs);
  rows[0]!.checks = checks;
  mkdirSync(dirname(OUT), { recursive: true });
  writeFileSync(OUT, `${JSON.stringify(rows, null, 2)}\n`);
  log(`wrote ${relative(process.cwd(), OUT)}`);
  await teardown('done');
  const failed = checks.filter((x) => !x.ok);
  console.log(
    `${failed.length === 0 ? 'PASS' : `FAIL (${failed.map((x) => x.what).join('; ')})`}: total ${secs(elapsed())} s, image ${IMAGE} ${imageMb} MB`,
  );
  return failed.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    console.error(`[docker:mesh] FAILED: ${err instanceof Error ? err.message : String(err)}`);
    await teardown('failure');
    process.exit(1);
  },
);
