/**
 * The rollout drill (issue 12): a rolling change of one policy's definition on
 * 4 real node processes under steady load on two policies, `steady` (never
 * changes) and `changing` (its limit changes), every request checked against
 * both on one key.
 *
 *   restart  the nodes restart one by one (graceful stop, then a new process
 *            with the same key and port and the new policies). While a node is
 *            down its share of the load goes to the next node (a load balancer
 *            draining it); it serves its own share again a fixed time later.
 *   reload   the nodes replace their policies in place one by one (the child's
 *            'reload' op: limiter.replacePolicies, what the daemon's reload calls).
 *
 * Bounds: `steady`'s worst rolling 1 s <= L + 2 % throughout; `changing`'s <=
 * max(old L, new L) + 2 %; every request decided on both policies.
 */
import type { PolicySpec } from '../src/types.js';
import { liveTrace } from './accuracy.js';
import { check, type DrillResult } from './drills.js';
import { type DecisionRecord, Mesh, NodeProc, readDecisions, sleep } from './harness.js';
import type { RunReport, RunSpec } from './protocol.js';
import { round, worstRollingIn } from './replay.js';

const STEADY: PolicySpec = {
  name: 'steady',
  limit: 1000,
  windowMs: 1000,
  buckets: 50,
  overAdmission: 'controlled',
  fallback: true,
};
const CHANGING_A: PolicySpec = { ...STEADY, name: 'changing', limit: 600 };
const CHANGING_B: PolicySpec = { ...CHANGING_A, limit: 900 };
const NODES = 4;

/** Largest count in an aligned bin of `w` ms. */
function worstBin(admitted: number[], w: number): number {
  const bins = new Map<number, number>();
  let best = 0;
  for (const t of admitted) {
    const b = Math.floor(t / w);
    const c = (bins.get(b) ?? 0) + 1;
    bins.set(b, c);
    if (c > best) best = c;
  }
  return best;
}

/** Admitted per second (aligned) of a sorted list of times, as a compact string. */
function perSecond(admitted: number[], endMs: number): string {
  const out: number[] = [];
  for (let s = 0; s < endMs; s += 1000) out.push(admitted.filter((t) => t >= s && t < s + 1000).length);
  return out.join(' ');
}

export interface RolloutOptions {
  mode: 'restart' | 'reload';
  g: number;
  d: number;
  /** The change: from → to (default 600 → 900 for restart, 900 → 600 for reload: both directions run). */
  from?: PolicySpec;
  to?: PolicySpec;
}

export async function rolloutDrill(opts: RolloutOptions): Promise<DrillResult> {
  const { mode, g, d } = opts;
  const from = opts.from ?? (mode === 'restart' ? CHANGING_A : CHANGING_B);
  const to = opts.to ?? (mode === 'restart' ? CHANGING_B : CHANGING_A);
  // Change times (ms after start) and, for restart, how long a node is out of the balancer.
  const firstAt = 3000;
  const spacing = mode === 'restart' ? 8000 : 3000;
  const outMs = 6000;
  const changeAt = Array.from({ length: NODES }, (_, i) => firstAt + spacing * i);
  const endMs = changeAt[NODES - 1]! + (mode === 'restart' ? outMs : 0) + 4000;
  const trace = liveTrace(NODES, endMs / 1000);
  const n = trace.t.length;

  // Who serves request k: its home node, or (restart) the next node while the home node is out.
  const assigned: number[][][] = Array.from({ length: NODES }, () => [[], []]);
  for (let k = 0; k < n; k++) {
    const t = trace.t[k]!;
    const h = trace.node[k]!;
    let a = h;
    if (mode === 'restart' && t >= changeAt[h]! && t < changeAt[h]! + outMs) a = (h + 1) % NODES;
    const inc = mode === 'restart' && t >= changeAt[a]! ? 1 : 0;
    assigned[a]![inc]!.push(t);
  }

  const mesh = await Mesh.start({
    nodes: NODES,
    policies: [STEADY, from],
    gossipIntervalMs: g,
    injectDelayMs: d,
  });
  const files = (i: number, inc: number) => ({
    steady: `${mesh.decisionFile(i, inc)}.steady`,
    changing: `${mesh.decisionFile(i, inc)}.changing`,
  });
  const spec = (i: number, inc: number, startAt: number): RunSpec => ({
    startAt,
    times: assigned[i]![inc]!,
    policy: STEADY.name,
    key: 'global',
    decisionFile: files(i, inc).steady,
    also: [{ policy: from.name, decisionFile: files(i, inc).changing }],
  });
  const changedAt: number[] = [];
  const reports: RunReport[] = [];
  try {
    await mesh.waitForPeers(30_000);
    const startAt = Date.now() + 1500;
    const runs: Promise<RunReport>[] = [];
    for (let i = 0; i < NODES; i++) {
      const r = mesh.procs[i]!.run(spec(i, 0, startAt), endMs + 60_000);
      r.catch(() => {});
      runs.push(r);
    }
    for (let i = 0; i < NODES; i++) {
      await sleep(Math.max(0, startAt + changeAt[i]! - Date.now()));
      if (mode === 'reload') {
        await mesh.procs[i]!.reload([STEADY, to]);
        changedAt.push(Date.now() - startAt);
        continue;
      }
      // restart: its first incarnation has served its last request before changeAt (its run resolves)
      const old = mesh.procs[i]!;
      reports.push(await runs[i]!);
      await old.stop();
      const fresh = new NodeProc({ ...old.cfg, policies: [STEADY, to] }, () => {});
      mesh.procs[i] = fresh;
      await fresh.start(30_000);
      changedAt.push(Date.now() - startAt);
      const r = fresh.run(spec(i, 1, startAt), endMs + 60_000);
      r.catch(() => {});
      runs[i] = r;
    }
    const settled = await Promise.allSettled(runs);
    for (const s of settled) if (s.status === 'fulfilled') reports.push(s.value);
    await sleep(50);
    const read = (which: 'steady' | 'changing') => {
      const all: DecisionRecord[] = [];
      for (let i = 0; i < NODES; i++)
        for (const inc of [0, 1]) all.push(...readDecisions(files(i, inc)[which]));
      return all;
    };
    return summarize(read('steady'), read('changing'));
  } finally {
    await mesh.close().catch(() => {});
  }

  function summarize(steady: DecisionRecord[], changing: DecisionRecord[]): DrillResult {
    const admitted = (ds: DecisionRecord[]) =>
      ds
        .filter((x) => x.allowed)
        .map((x) => x.t)
        .sort((a, b) => a - b);
    const aS = admitted(steady);
    const aC = admitted(changing);
    const worstS = worstRollingIn(aS, -1000, endMs + 1000);
    const worstC = worstRollingIn(aC, -1000, endMs + 1000);
    const first = changedAt[0] ?? 0;
    const last = changedAt[NODES - 1] ?? 0;
    const worstSDuring = worstRollingIn(aS, first - 1000, last + 1000);
    const worstCDuring = worstRollingIn(aC, first - 1000, last + 1000);
    const boundS = Math.round(STEADY.limit * 1.02);
    const boundC = Math.round(Math.max(from.limit, to.limit) * 1.02);
    const undecidedS = n - steady.length;
    const undecidedC = n - changing.length;
    const skipped = reports.reduce((x, r) => x + r.skipped, 0);
    // after the last change settles: the new limit in force everywhere
    const tail = aC.filter((t) => t >= endMs - 2000 && t < endMs - 1000).length;
    const checks = [
      check('steady: worst 1 s over the drill', worstS, `<= L + 2 % = ${boundS}`, worstS <= boundS),
      check(
        'changing: worst 1 s over the drill',
        worstC,
        `<= max(${from.limit}, ${to.limit}) + 2 % = ${boundC}`,
        worstC <= boundC,
      ),
      check(
        'requests undecided (steady + changing)',
        undecidedS + undecidedC,
        '0',
        undecidedS + undecidedC === 0,
      ),
      check('requests skipped by a node not serving yet', skipped, '0', skipped === 0),
      check(
        `changing: admitted in the last full second (new limit ${to.limit} in force)`,
        tail,
        `>= 0.9 × ${to.limit} and <= ${Math.round(to.limit * 1.02)}`,
        tail >= 0.9 * to.limit && tail <= to.limit * 1.02,
      ),
    ];
    const modes = (ds: DecisionRecord[]) => {
      const m: Record<string, number> = {};
      for (const x of ds) m[x.mode] = (m[x.mode] ?? 0) + 1;
      return m;
    };
    return {
      drill:
        mode === 'restart'
          ? `rollout, restart (4 nodes restart one by one: changing ${from.limit} -> ${to.limit}, steady ${STEADY.limit} unchanged; headline figures: steady)`
          : `rollout, reload in place (4 nodes one by one: changing ${from.limit} -> ${to.limit}, steady ${STEADY.limit} unchanged; headline figures: steady)`,
      g_ms: g,
      d_ms: d,
      // the headline figures are steady's (the changing policy's are in the checks and details)
      admitted: aS.length,
      worst_1s: worstS,
      worst_100ms: worstBin(aS, 100),
      checks,
      details: {
        requests: n,
        changed_at_ms: changedAt.map((x) => round(x, 0)),
        steady_admitted: aS.length,
        changing_admitted: aC.length,
        changing_worst_100ms: worstBin(aC, 100),
        steady_worst_1s_during_rollout: worstSDuring,
        changing_worst_1s_during_rollout: worstCDuring,
        steady_per_s: perSecond(aS, endMs),
        changing_per_s: perSecond(aC, endMs),
        steady_modes: modes(steady),
        changing_modes: modes(changing),
      },
    };
  }
}
