/**
 * Fault drills on real node processes, each with asserted bounds:
 *
 *   restart  kill -9 of the 40 % node at 3 s, restarted with the same key file and
 *            port; it rejoins through sync; worst 1 s (whole drill, and the first
 *            second after it serves again) <= L + 2 %
 *   cut      the 40 % node cut off from all gossip (in and out) for 3 s: it falls
 *            back to L/N within 3g + 2d and returns to global once healed
 *   rogue    a member publishing malformed and inflated gossip on the real topic
 *            for 3 s: dropped and capped, counted by reason; worst 1 s <= L + 2 %
 *
 *   churn    fresh peer ids through 4 nodes, then the seed trace (mesh-test/field-drills.ts)
 *   flood    1,000,000 distinct keys at one daemon beside a hot and a 5-per-minute key
 *   rollout  4 nodes under steady load on two policies; one policy's limit changes: the nodes
 *            restart one by one with the new config (rollout-restart), and separately replace
 *            their policies in place one by one (rollout-reload); the unchanged policy's worst
 *            1 s <= L + 2 %, the changed one's <= max(old L, new L) + 2 %, nothing undecided
 *            (mesh-test/rollout-drill.ts)
 *
 *   npm run mesh:drills -- [--gossip-ms 100] [--delay-ms 10] [--seconds 10]
 *                          [--only restart,restart-ungated,cut,rogue,churn,flood,rollout] [--churn-ids 300] [--flood-keys 1000000]
 *
 * Exits non-zero when a bound fails. Writes mesh-test/results/drills.json.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Trace } from '../src/sim/trace.js';
import { liveTrace } from './accuracy.js';
import { churnDrill, keyFloodDrill } from './field-drills.js';
import {
  type DecisionRecord,
  ensureDir,
  Mesh,
  NodeProc,
  ROOT,
  SEED_POLICY,
  sleep,
  within,
} from './harness.js';
import type { RunReport } from './protocol.js';
import { figures, replayLive, round, sum, worstRollingIn } from './replay.js';
import { rolloutDrill } from './rollout-drill.js';
import { skewDrill } from './skew-drill.js';

const L = SEED_POLICY.limit;
const BOUND = Math.round(L * 1.02);

export interface Check {
  what: string;
  value: number | string;
  bound: string;
  ok: boolean;
}

export interface DrillResult {
  drill: string;
  g_ms: number;
  d_ms: number;
  admitted: number;
  worst_1s: number;
  worst_100ms: number;
  checks: Check[];
  details: Record<string, unknown>;
}

export function check(what: string, value: number | string, bound: string, ok: boolean): Check {
  return { what, value, bound, ok };
}

function sumRecords(rs: RunReport[], f: (r: RunReport) => Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rs) for (const [k, v] of Object.entries(f(r))) out[k] = (out[k] ?? 0) + v;
  return out;
}

async function startMesh(trace: Trace, g: number, d: number, rogue = false): Promise<Mesh> {
  const mesh = await Mesh.start({
    nodes: trace.nodes,
    policies: [SEED_POLICY],
    gossipIntervalMs: g,
    injectDelayMs: d,
    rogue,
  });
  try {
    await mesh.waitForPeers(30_000);
  } catch (err) {
    await mesh.close();
    throw err;
  }
  return mesh;
}

/** kill -9 node 0 at `killAtMs`, restart it (same key file, same port) and let it serve again. */
export async function restartDrill(
  trace: Trace,
  g: number,
  d: number,
  opts: { killAtMs?: number; gate?: boolean } = {},
): Promise<DrillResult> {
  const killAt = opts.killAtMs ?? 3000;
  const gate = opts.gate ?? true;
  const mesh = await startMesh(trace, g, d);
  let restartedAt = Number.NaN;
  let killedAt = Number.NaN;
  let newReport: RunReport | undefined;
  try {
    const out = await replayLive(mesh, trace, {
      policy: SEED_POLICY.name,
      during: async (startAt, runs) => {
        await sleep(Math.max(0, startAt + killAt - Date.now()));
        const old = mesh.procs[0]!;
        old.kill();
        killedAt = Date.now() - startAt;
        await old.waitExit(5_000);
        const fresh = new NodeProc(old.cfg, () => {});
        mesh.procs[0] = fresh;
        await fresh.start(30_000);
        restartedAt = Date.now() - startAt;
        const share = trace.t.filter((_, i) => trace.node[i] === 0);
        const p = fresh.run(
          {
            startAt,
            times: Array.from(share),
            policy: SEED_POLICY.name,
            key: 'global',
            decisionFile: mesh.decisionFile(0, 1),
            gateOnLivePeer: gate,
          },
          60_000,
        );
        p.then(
          (r) => {
            newReport = r;
          },
          () => {},
        );
        runs.push(p);
      },
    });
    const f = figures(trace, out.admitted, L, SEED_POLICY.windowMs);
    const serving = newReport?.servingFrom ?? Number.NaN;
    const firstSecond = out.admitted.filter((t) => t >= serving && t < serving + 1000).length;
    const firstSecondNode0 = out.decisions[0]!.filter(
      (x) => x.allowed && x.t >= serving && x.t < serving + 1000,
    ).length;
    const worstAroundRestart = worstRollingIn(out.admitted, serving - 1000, serving + 1000);
    // Where it went: admitted per 250 ms from 1 s before the kill to 2 s after serving again, restarted node vs the rest.
    const slices: string[] = [];
    const node0 = out.decisions[0]!.filter((x) => x.allowed).map((x) => x.t);
    for (let s = Math.floor((killedAt - 1000) / 250) * 250; s < serving + 2000; s += 250) {
      const inSlice = (t: number) => t >= s && t < s + 250;
      const all = out.admitted.filter(inSlice).length;
      const own = node0.filter(inSlice).length;
      slices.push(`${s}:${own}+${all - own}`);
    }
    const checks = [
      check('worst 1 s over the drill', f.worst_1s, `<= ${BOUND}`, f.worst_1s <= BOUND),
      check(
        'admitted in the first second after the restarted node serves',
        firstSecond,
        `<= ${BOUND}`,
        firstSecond <= BOUND,
      ),
      check(
        'worst rolling 1 s starting within 1 s of the restart',
        worstAroundRestart,
        `<= ${BOUND}`,
        worstAroundRestart <= BOUND,
      ),
      check(
        'restarted node pulled state through sync',
        newReport?.sync.pullsOk ?? 0,
        '>= 1',
        (newReport?.sync.pullsOk ?? 0) >= 1,
      ),
      check('restarted node served again', newReport?.served ?? 0, '> 0', (newReport?.served ?? 0) > 0),
    ];
    return {
      drill: gate ? 'restart (kill -9, serve once /healthz would pass)' : 'restart (kill -9, serve at once)',
      g_ms: g,
      d_ms: d,
      ...pick(f),
      checks,
      details: {
        killed_at_ms: round(killedAt, 0),
        process_up_at_ms: round(restartedAt, 0),
        serving_from_ms: round(serving, 0),
        first_second_admitted_all: firstSecond,
        first_second_admitted_restarted: firstSecondNode0,
        restarted_sync: newReport?.sync,
        restarted_mode_counts: newReport?.engine.byMode,
        skipped_while_down: newReport?.skipped,
        admitted_per_250ms_restarted_plus_rest: slices.join(' '),
      },
    };
  } finally {
    await mesh.close();
  }
}

export function pick(f: ReturnType<typeof figures>) {
  return { admitted: f.admitted, worst_1s: f.worst_1s, worst_100ms: f.worst_100ms };
}

/** Node 0 cut off from all gossip during [fromMs, toMs). */
export async function cutDrill(
  trace: Trace,
  g: number,
  d: number,
  fromMs = 3000,
  toMs = 6000,
): Promise<DrillResult> {
  const mesh = await startMesh(trace, g, d);
  try {
    const out = await replayLive(mesh, trace, {
      policy: SEED_POLICY.name,
      extra: (i) => (i === 0 ? { isolate: { fromMs, toMs } } : {}),
    });
    const f = figures(trace, out.admitted, L, SEED_POLICY.windowMs);
    const rep = out.reports.find((r) => r.index === 0)!;
    const on = rep.isolation!.onAt;
    const off = rep.isolation!.offAt;
    const staleAfter = 3 * g + 2 * d;
    const ds: DecisionRecord[] = out.decisions[0]!;
    const firstFallback = ds.find((x) => x.t >= on && x.mode === 'fallback');
    const firstAfterBound = ds.find((x) => x.t >= on + staleAfter);
    // The bound, at the resolution of this node's requests (the first decision due after it).
    const fallbackBound =
      staleAfter + Math.max(0, (firstAfterBound?.t ?? on + staleAfter) - (on + staleAfter)) + 2;
    const fallbackAfter = firstFallback ? firstFallback.t - on : Number.POSITIVE_INFINITY;
    const notFallbackWhileCut = ds.filter(
      (x) => x.t >= on + fallbackBound && x.t < off && x.mode !== 'fallback',
    ).length;
    const firstGlobal = ds.find((x) => x.t >= off && x.mode === 'global');
    const globalAfter = firstGlobal ? firstGlobal.t - off : Number.POSITIVE_INFINITY;
    const fallbackAfterHeal = ds.filter(
      (x) => x.t >= (firstGlobal?.t ?? off) && x.mode === 'fallback',
    ).length;
    const admittedCut = ds.filter((x) => x.allowed && x.t >= on + fallbackBound && x.t < off).length;
    const cutSecs = (off - on - fallbackBound) / 1000;
    const checks = [
      check(
        'cut node falls back to L/N after (ms)',
        round(fallbackAfter, 1),
        `<= 3g+2d = ${staleAfter} (+ request spacing: ${round(fallbackBound, 1)})`,
        fallbackAfter <= fallbackBound,
      ),
      check(
        'decisions not in fallback while cut (after the bound)',
        notFallbackWhileCut,
        '0',
        notFallbackWhileCut === 0,
      ),
      check(
        'returns to global after heal (ms)',
        round(globalAfter, 1),
        `<= 3g+2d = ${staleAfter}`,
        globalAfter <= staleAfter,
      ),
      check('fallback decisions after returning to global', fallbackAfterHeal, '0', fallbackAfterHeal === 0),
      check(
        'cut node admitted per second while cut',
        round(admittedCut / cutSecs, 0),
        `<= L/N = ${L / trace.nodes} (+2 %)`,
        admittedCut / cutSecs <= (L / trace.nodes) * 1.02,
      ),
      check('worst 1 s over the drill', f.worst_1s, `<= ${BOUND}`, f.worst_1s <= BOUND),
    ];
    return {
      drill: `cut (node 0 isolated ${fromMs / 1000}-${toMs / 1000} s)`,
      g_ms: g,
      d_ms: d,
      ...pick(f),
      checks,
      details: {
        isolation_on_ms: round(on, 1),
        isolation_off_ms: round(off, 1),
        node0_drops: rep.drops,
        node0_modes: rep.engine.byMode,
      },
    };
  } finally {
    await mesh.close();
  }
}

/** A rogue member publishing malformed and inflated gossip during [fromMs, toMs). */
export async function rogueDrill(
  trace: Trace,
  g: number,
  d: number,
  fromMs = 3000,
  toMs = 6000,
): Promise<DrillResult> {
  const mesh = await startMesh(trace, g, d, true);
  try {
    const rogueIdx = trace.nodes;
    const out = await replayLive(mesh, trace, {
      policy: SEED_POLICY.name,
      extra: (i) => (i === rogueIdx ? { rogue: { fromMs, toMs } } : {}),
    });
    const f = figures(trace, out.admitted, L, SEED_POLICY.windowMs);
    const honest = out.reports.filter((r) => r.index < rogueIdx);
    const rogue = out.reports.find((r) => r.index === rogueIdx);
    const dropped = sumRecords(honest, (r) => r.engine.dropped);
    const meshDrops = sumRecords(honest, (r) => r.drops);
    const capped = honest.map((r) => r.engine.capped);
    const sent = rogue?.rogue?.sent ?? {};
    const malformedSent = sum(
      Object.entries(sent)
        .filter(([k]) => k !== 'inflated')
        .map(([, v]) => v),
    );
    const droppedTotal = sum(Object.values(dropped));
    const everyNodeDropped = honest.every((r) => sum(Object.values(r.engine.dropped)) > 0);
    const during = out.admitted.filter((t) => t >= fromMs && t < toMs).length;
    const after = out.admitted.filter((t) => t >= toMs + 1000 && t < toMs + 2000).length;
    const checks = [
      check(
        'malformed messages dropped (all honest nodes, by reason)',
        droppedTotal,
        `> 0 on every node (rogue sent ${malformedSent})`,
        everyNodeDropped && droppedTotal > 0,
      ),
      check(
        'inflated messages capped (per honest node, min)',
        Math.min(...capped),
        '> 0 on every node',
        capped.every((c) => c > 0),
      ),
      check('worst 1 s over the drill', f.worst_1s, `<= ${BOUND}`, f.worst_1s <= BOUND),
    ];
    return {
      drill: `rogue member (malformed + inflated gossip ${fromMs / 1000}-${toMs / 1000} s)`,
      g_ms: g,
      d_ms: d,
      ...pick(f),
      checks,
      details: {
        rogue_sent: sent,
        honest_engine_dropped_by_reason: dropped,
        honest_mesh_drops: meshDrops,
        honest_capped: capped,
        admitted_during_rogue: during,
        admitted_second_after_rogue_plus_1s: after,
      },
    };
  } finally {
    await mesh.close();
  }
}

export function printDrill(r: DrillResult): void {
  const ok = r.checks.every((c) => c.ok);
  console.log(
    `${ok ? 'PASS' : 'FAIL'}  ${r.drill}  g=${r.g_ms} d=${r.d_ms}: admitted ${r.admitted}, worst 1s ${r.worst_1s}, worst 100ms ${r.worst_100ms}`,
  );
  for (const c of r.checks)
    console.log(`   ${c.ok ? 'ok ' : 'BAD'}  ${c.what}: ${c.value} (bound ${c.bound})`);
  console.log(`        ${JSON.stringify(r.details)}`);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'gossip-ms': { type: 'string', default: '100' },
      'delay-ms': { type: 'string', default: '10' },
      seconds: { type: 'string', default: '10' },
      only: { type: 'string', default: 'restart,restart-ungated,cut,rogue,churn,flood,skew,rollout' },
      'churn-ids': { type: 'string', default: '300' },
      'flood-keys': { type: 'string', default: '1000000' },
    },
  });
  const g = Number(values['gossip-ms']);
  const d = Number(values['delay-ms']);
  const seconds = Number(values.seconds);
  if (!(g >= 1 && g <= 1000 && d >= 0 && d <= 1000 && seconds >= 8 && seconds <= 40))
    throw new Error('--gossip-ms 1..1000, --delay-ms 0..1000, --seconds 8..60');
  const trace = liveTrace(8, seconds);
  const only = new Set(values.only.split(','));
  console.log(
    `fault drills: 8 node processes on 127.0.0.1 (churn and rollout: 4), seed trace ${seconds} s (rollout: its own length), g = ${g} ms, injected d = ${d} ms`,
  );
  const results: DrillResult[] = [];
  const run = async (name: string, f: () => Promise<DrillResult>, group?: string) => {
    if (!only.has(name) && (group === undefined || !only.has(group))) return;
    const r = await within(`drill ${name}`, 600_000, f());
    printDrill(r);
    results.push(r);
  };
  // The restart drill runs twice as long: a restart (process start, join, sync) takes seconds on a busy box.
  const long = liveTrace(8, Math.max(seconds, 20));
  await run('restart', () => restartDrill(long, g, d, { gate: true, killAtMs: 2000 }));
  await run('restart-ungated', () => restartDrill(long, g, d, { gate: false, killAtMs: 2000 }));
  await run('cut', () => cutDrill(trace, g, d));
  await run('rogue', () => rogueDrill(trace, g, d));
  // Field drills (issue 11): fresh peer ids through 4 nodes, then the seed trace on them; a key flood.
  const churnIds = Number(values['churn-ids']);
  await run('churn', () => churnDrill(liveTrace(4, seconds), g, d, { churnIds }));
  await run('flood', () => keyFloodDrill({ keys: Number(values['flood-keys']) }));
  // The busiest node's clock off by ±250 ms (offsets estimated and applied) and ±2 s (past maxClockOffsetMs: stale, L/N).
  for (const skew of [-250, 250, -2000, 2000])
    await run(`skew${skew}`, () => skewDrill(trace, g, d, skew), 'skew');
  // Issue 12: a rolling change of one policy's limit, by restarts and by reloads in place.
  await run('rollout-restart', () => rolloutDrill({ mode: 'restart', g, d }), 'rollout');
  await run('rollout-reload', () => rolloutDrill({ mode: 'reload', g, d }), 'rollout');
  const outDir = join(ROOT, 'mesh-test', 'results');
  ensureDir(outDir);
  writeFileSync(join(outDir, 'drills.json'), `${JSON.stringify(results, null, 2)}\n`);
  console.log('wrote mesh-test/results/drills.json');
  if (results.some((r) => !r.checks.every((c) => c.ok))) process.exitCode = 1;
}

if (process.argv[1]?.endsWith('drills.ts')) {
  main().then(
    () => process.exit(),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
