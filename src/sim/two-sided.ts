/**
 * Both errors of a limiter on the same arrivals (issue 26, `bench:two-sided`): the false
 * denials (what an exact sliding-window log admits that the limiter denied) and the
 * over-admission (the worst rolling window past L), with the traffic generators of the bench's
 * families and a runner that drives the production engine on the {@link Simulator}.
 */
import { fastGossipIntervalMs } from '../mesh/auto-relay.js';
import type { Decision, PolicySpec } from '../types.js';
import { localCeilingFlags, slidingLogAdmits, worstRolling } from './metrics.js';
import { Prng } from './prng.js';
import { type SimOptions, Simulator } from './simulator.js';

/**
 * Requests of one row, in order of arrival (times ascending; equal times keep their order):
 * request i arrives at `t[i]` ms at node `node[i]` on key `keys[key[i]]`, cost 1.
 */
export interface Arrivals {
  t: number[];
  node: number[];
  key: number[];
  keys: string[];
}

/** An empty set of arrivals to push into. */
export function emptyArrivals(): Arrivals {
  return { t: [], node: [], key: [], keys: [] };
}

/**
 * Which arrivals an exact sliding-window log of `limit` per `windowMs` admits
 * ({@link slidingLogAdmits}: admit at t when fewer than `limit` were admitted in (t − W, t]),
 * one flag per arrival. Among arrivals at the same time the admitted ones are the first
 * (once one is denied the log does not change until time moves), so the admitted times map
 * back to arrivals in order.
 */
export function exactFlags(times: readonly number[], limit: number, windowMs: number): Uint8Array {
  const admitted = slidingLogAdmits(times, limit, windowMs);
  const flags = new Uint8Array(times.length);
  let p = 0;
  for (let i = 0; i < times.length && p < admitted.length; i++) {
    if (admitted[p] === times[i]) {
      flags[i] = 1;
      p++;
    }
  }
  return flags;
}

/** False denials of a limiter against the exact one on the same arrivals. */
export interface FalseDenials {
  /** Arrivals the exact limiter admits. */
  exactAdmitted: number;
  /** Of those, the ones this limiter denied. */
  denied: number;
  /** denied / exactAdmitted (0 when the exact limiter admits none). */
  fraction: number;
}

/**
 * The false denials of `limiter` against `exact` (one flag per arrival, 1 = admitted): the
 * arrivals the exact limiter admits that `limiter` denied, as a fraction of what the exact one
 * admits. A denial the exact limiter also makes is not false; an admission it would not make
 * is over-admission, the other error (see {@link worstOverKeys}). Only arrivals where `only`
 * is set (if given) count: a key's first window, say.
 */
export function falseDenials(
  exact: ArrayLike<number>,
  limiter: ArrayLike<number>,
  only?: ArrayLike<number>,
): FalseDenials {
  if (exact.length !== limiter.length) throw new Error('falseDenials: flags of different arrivals');
  let exactAdmitted = 0;
  let denied = 0;
  for (let i = 0; i < exact.length; i++) {
    if (only !== undefined && !only[i]) continue;
    if (!exact[i]) continue;
    exactAdmitted++;
    if (!limiter[i]) denied++;
  }
  return { exactAdmitted, denied, fraction: exactAdmitted === 0 ? 0 : denied / exactAdmitted };
}

/** One flag per arrival: 1 when it falls in its key's first window, [first arrival, first + W). */
export function firstWindowFlags(a: Arrivals, windowMs: number): Uint8Array {
  const first = new Map<number, number>();
  const flags = new Uint8Array(a.t.length);
  for (let i = 0; i < a.t.length; i++) {
    const k = a.key[i]!;
    let f = first.get(k);
    if (f === undefined) {
      f = a.t[i]!;
      first.set(k, f);
    }
    if (a.t[i]! < f + windowMs) flags[i] = 1;
  }
  return flags;
}

/** The times of the flagged arrivals, per key (ascending, as the arrivals are). */
export function timesByKey(a: Arrivals, flags?: ArrayLike<number>): number[][] {
  const out: number[][] = a.keys.map(() => []);
  for (let i = 0; i < a.t.length; i++) if (flags === undefined || flags[i]) out[a.key[i]!]!.push(a.t[i]!);
  return out;
}

/**
 * The worst over keys of (the most admitted in any rolling [s, s + W)) − L: positive when some
 * window passed L (over-admission), negative when none reached it. -L with no key.
 */
export function worstOverKeys(
  admittedByKey: readonly (readonly number[])[],
  limit: number,
  windowMs: number,
): number {
  let worst = 0;
  for (const times of admittedByKey) {
    const w = worstRolling(times, windowMs);
    if (w > worst) worst = w;
  }
  return worst - limit;
}

/** Draws of the local ceiling ({@link localCeilingFlags}) averaged per row. */
export const CEILING_DRAWS = 5;

/**
 * The local ceiling's figures, the mean over `draws` draws ({@link localCeilingFlags}): what it
 * admits, summed over keys, and its false denials, the % of what the exact limiter admits on the
 * same arrivals that it denied: the fewest any limiter whose nodes decide alone and never pass L
 * can make (in expectation over the arrivals' nodes), where arrivals come at once or units are
 * fewer than nodes.
 */
export function localCeilingFigures(
  byKey: readonly (readonly number[])[],
  limit: number,
  windowMs: number,
  nodes: number,
  seed = 101,
  draws = CEILING_DRAWS,
): { admitted: number; falseDenialsPct: number } {
  const exact = byKey.map((times) => exactFlags(times, limit, windowMs));
  let sum = 0;
  let exactAdmitted = 0;
  let denied = 0;
  for (let d = 0; d < draws; d++) {
    const prng = new Prng(seed + d);
    byKey.forEach((times, k) => {
      if (times.length === 0) return;
      const flags = localCeilingFlags(times, limit, windowMs, nodes, prng);
      const f = falseDenials(exact[k]!, flags);
      for (const x of flags) sum += x;
      exactAdmitted += f.exactAdmitted;
      denied += f.denied;
    });
  }
  return { admitted: sum / draws, falseDenialsPct: pct(exactAdmitted === 0 ? 0 : denied / exactAdmitted) };
}

/**
 * What a row's limiter cost beyond its local decision: calls to other nodes, and the latency
 * they add. Local decisions cost neither; a design whose thin keys are decided by their owner
 * fills these in (the simulator then counts the calls, the decision carries the wait).
 */
export interface CostProbe {
  /** Calls to other nodes made by the simulator so far. */
  calls(sim: Simulator): number;
  /** Latency the decision added to its request, ms. */
  latencyMs(d: Decision): number;
}

/** Every decision local: no call, no added latency. */
export const LOCAL_DECISIONS: CostProbe = { calls: () => 0, latencyMs: () => 0 };

/** What a limiter decided on a run's arrivals, one entry per arrival. */
export interface LimiterRun {
  /** 1 = admitted. */
  admitted: Uint8Array;
  /** The denial's `rule`, as an index into `ruleNames` plus one (0: admitted). */
  rule: Uint8Array;
  ruleNames: string[];
  /** Calls to other nodes the request made, per the probe. */
  calls: Float64Array;
  /** Latency the decision added, ms, per the probe. */
  latencyMs: Float64Array;
  /** Gossip messages a node received a second (delivered over nodes and the arrivals' span); absent: not measured. */
  msgsIn?: number;
}

/**
 * Drive one {@link Simulator} (`opts`, with the one policy `policy`) through `arrivals` in
 * order: the decision on each arrival and what the probe counted for it.
 */
export function runSim(
  opts: Omit<SimOptions, 'policies'>,
  policy: PolicySpec,
  arrivals: Arrivals,
  probe: CostProbe = LOCAL_DECISIONS,
): LimiterRun {
  const sim = new Simulator({ ...opts, policies: [policy] });
  const n = arrivals.t.length;
  const run = newLimiterRun(n);
  const code = new Map<string, number>();
  let from = 0;
  for (let i = 0; i < n; i++) {
    sim.runUntil(arrivals.t[i]!);
    if (i === 0) from = sim.delivered;
    const before = probe.calls(sim);
    const d = sim.request(arrivals.node[i]!, policy.name, arrivals.keys[arrivals.key[i]!]!);
    run.calls[i] = probe.calls(sim) - before;
    run.latencyMs[i] = probe.latencyMs(d);
    recordOutcome(run, code, i, d);
  }
  const span = n > 1 ? (arrivals.t[n - 1]! - arrivals.t[0]!) / 1000 : 0;
  if (span > 0) run.msgsIn = Math.round((sim.delivered - from) / opts.nodes / span);
  return run;
}

/** An empty run over `n` arrivals. */
export function newLimiterRun(n: number): LimiterRun {
  return {
    admitted: new Uint8Array(n),
    rule: new Uint8Array(n),
    ruleNames: [],
    calls: new Float64Array(n),
    latencyMs: new Float64Array(n),
  };
}

/** Arrival `i`'s decision into `run`: admitted, or its denial's rule (coded through `code`). */
export function recordOutcome(run: LimiterRun, code: Map<string, number>, i: number, d: Decision): void {
  if (d.allowed) {
    run.admitted[i] = 1;
    return;
  }
  let c = code.get(d.rule);
  if (c === undefined) {
    run.ruleNames.push(d.rule);
    c = run.ruleNames.length;
    code.set(d.rule, c);
  }
  run.rule[i] = c;
}

/** The denials among the arrivals where `only` is set, by rule name. */
export function ruleHistogram(run: LimiterRun, only: ArrayLike<number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 0; i < run.rule.length; i++) {
    const c = run.rule[i]!;
    if (c === 0 || !only[i]) continue;
    const name = run.ruleNames[c - 1]!;
    out[name] = (out[name] ?? 0) + 1;
  }
  return out;
}

/** Every figure of one limiter on one row. */
export interface TwoSidedFigures {
  requests: number;
  admitted: number;
  exact: number;
  /** False denials, % of what the exact limiter admits. */
  false_denials_pct: number;
  /** The same over arrivals in their key's first window, and after it. */
  false_denials_first_w_pct: number;
  false_denials_after_pct: number;
  /** Worst over keys of the worst rolling window − L. */
  worst_window_minus_l: number;
  admitted_vs_exact: number;
  admitted_vs_ceiling: number;
  calls_per_request: number;
  added_latency_ms: number;
}

function pct(x: number): number {
  return Math.round(x * 1e5) / 1e3;
}

/** a / b to 4 places (1 for 0 / 0, Infinity for a / 0). */
export function ratio(a: number, b: number): number {
  return b === 0 ? (a === 0 ? 1 : Number.POSITIVE_INFINITY) : Math.round((a / b) * 1e4) / 1e4;
}

/**
 * The figures of a limiter that admitted `admitted` (one flag per arrival of `a`) over the
 * arrivals where `only` is set (a row's keys), against the exact limiter's flags `exact`, with
 * `firstW` marking arrivals in their key's first window ({@link firstWindowFlags}), `ceiling`
 * the local ceiling's admissions on those arrivals ({@link localCeilingFigures}), for a limit of
 * `limit` per `windowMs`; `calls` and `latencyMs` per arrival (absent: 0).
 */
export function figuresOf(
  a: Arrivals,
  admitted: Uint8Array,
  only: Uint8Array,
  exact: Uint8Array,
  firstW: Uint8Array,
  ceiling: number,
  limit: number,
  windowMs: number,
  calls?: Float64Array,
  latencyMs?: Float64Array,
): TwoSidedFigures {
  const n = a.t.length;
  let requests = 0;
  let adm = 0;
  let exactN = 0;
  let callsN = 0;
  let lat = 0;
  const first = new Uint8Array(n);
  const after = new Uint8Array(n);
  const masked = new Uint8Array(n);
  const rowKey = new Uint8Array(a.keys.length);
  for (let i = 0; i < n; i++) {
    if (!only[i]) continue;
    rowKey[a.key[i]!] = 1;
    requests++;
    adm += admitted[i]!;
    exactN += exact[i]!;
    callsN += calls?.[i] ?? 0;
    lat += latencyMs?.[i] ?? 0;
    if (firstW[i]) first[i] = 1;
    else after[i] = 1;
    if (admitted[i]) masked[i] = 1;
  }
  const byKey = timesByKey(a, masked).filter((_, k) => rowKey[k] === 1);
  return {
    requests,
    admitted: adm,
    exact: exactN,
    false_denials_pct: pct(falseDenials(exact, admitted, only).fraction),
    false_denials_first_w_pct: pct(falseDenials(exact, admitted, first).fraction),
    false_denials_after_pct: pct(falseDenials(exact, admitted, after).fraction),
    worst_window_minus_l: worstOverKeys(byKey, limit, windowMs),
    admitted_vs_exact: ratio(adm, exactN),
    admitted_vs_ceiling: ratio(adm, ceiling),
    calls_per_request: requests === 0 ? 0 : Math.round((callsN / requests) * 1e4) / 1e4,
    added_latency_ms: requests === 0 ? 0 : Math.round((lat / requests) * 1e3) / 1e3,
  };
}

/**
 * {@link figuresOf} for arrivals on one key (a limit of `limit` per `windowMs`): every arrival
 * counted, against the exact log on the same arrival times, the exact log as the ceiling.
 */
export function oneKeyFigures(
  a: Arrivals,
  admitted: Uint8Array,
  limit: number,
  windowMs: number,
): TwoSidedFigures {
  const exact = exactFlags(a.t, limit, windowMs);
  let exactN = 0;
  for (const x of exact) exactN += x;
  const all = new Uint8Array(a.t.length).fill(1);
  return figuresOf(a, admitted, all, exact, firstWindowFlags(a, windowMs), exactN, limit, windowMs);
}

// ---- traffic generators -------------------------------------------------------------------

/** Sort arrivals by time, keeping the order of equal times (a stable sort of the index). */
export function sortArrivals(a: Arrivals): Arrivals {
  const idx = a.t.map((_, i) => i);
  idx.sort((x, y) => a.t[x]! - a.t[y]! || x - y);
  return {
    t: idx.map((i) => a.t[i]!),
    node: idx.map((i) => a.node[i]!),
    key: idx.map((i) => a.key[i]!),
    keys: a.keys,
  };
}

/** Add a key; its index. */
export function addKey(a: Arrivals, name: string): number {
  a.keys.push(name);
  return a.keys.length - 1;
}

/** Add one arrival. */
export function push(a: Arrivals, t: number, node: number, key: number): void {
  a.t.push(t);
  a.node.push(node);
  a.key.push(key);
}

/**
 * Where the traffic of `bench:two-sided` (and of its live rows, `mesh:two-sided`) starts, ms after
 * the mesh: a service sends requests to a node once it is ready, and the default mesh forms
 * (every node hears every other, each naming them all) in 0.1 s on 2 to 64 nodes and 1.2 s on
 * 256 (relay). The cold-start family starts at 0.
 */
export const WARMUP_MS = 2_000;

/** A step of a global key's offered load: `rate` per second over [fromMs, toMs). */
export type RateSegment = [rate: number, fromMs: number, toMs: number];

/**
 * The global rows' arrivals (`bench:two-sided`'s global family and `mesh:two-sided`): one key,
 * `global`, offered at each segment's rate, evenly spaced, each request at a node drawn uniformly
 * from `nodes` (one draw sequence from `seed` over the segments, in order).
 */
export function globalKeyArrivals(nodes: number, segments: readonly RateSegment[], seed = 11): Arrivals {
  const a = emptyArrivals();
  const k = addKey(a, 'global');
  const prng = new Prng(seed);
  for (const [rate, from, to] of segments) steadyKey(a, k, rate, from, to, nodes, prng);
  return a;
}

/**
 * One key offered at `rate` per second, evenly spaced, over [fromMs, toMs), each request at a
 * node drawn uniformly from `nodes`.
 */
export function steadyKey(
  a: Arrivals,
  key: number,
  rate: number,
  fromMs: number,
  toMs: number,
  nodes: number,
  prng: Prng,
): void {
  const step = 1000 / rate;
  const n = Math.ceil((toMs - fromMs) / step);
  for (let i = 0; i < n; i++) {
    const t = fromMs + i * step;
    if (t >= toMs) break;
    push(a, t, Math.floor(prng.next() * nodes), key);
  }
}

/**
 * A client that sends `size` requests at once (same instant) every `everyMs`, from `fromMs`
 * until `toMs`, each at a node drawn uniformly, or round-robin from node `rrStart` when given.
 */
export function burstsKey(
  a: Arrivals,
  key: number,
  size: number,
  everyMs: number,
  fromMs: number,
  toMs: number,
  nodes: number,
  prng: Prng,
  spreadMs = 0,
  rrStart?: number,
): void {
  for (let b = 0; fromMs + b * everyMs < toMs; b++) {
    const t0 = fromMs + b * everyMs;
    for (let j = 0; j < size; j++) {
      const node = rrStart === undefined ? Math.floor(prng.next() * nodes) : (rrStart + j) % nodes;
      push(a, t0 + (spreadMs * j) / size, node, key);
    }
  }
}

/**
 * The simulated mesh of `nodes` nodes a user who sets nothing gets: the engine's and the mesh's
 * defaults, g = 100 ms and d = 10 ms, `relayFanout: 'auto'` (gossip straight to every member up
 * to 101 members, relay at fanout 4 above: src/mesh/auto-relay.ts), each node expecting every
 * member (a mesh node expects 1 + its bootstrap peers: here every other node), on timers and
 * links as a live machine's: each tick up to 2 ms late, each message up to 1 ms slower than d
 * (punctual timers would let ticks meet at the same instant, a tie no real mesh has). When the
 * mesh's defaults change with its size, change them here.
 */
export function defaultMesh(nodes: number, seed = 7): Omit<SimOptions, 'policies'> {
  const g = 100;
  const d = 10;
  return {
    nodes,
    gossipIntervalMs: g,
    delayMs: d,
    tickLateMs: 2,
    jitterMs: 1,
    seed,
    relay: 'auto',
    // the mesh's default: faster ticks while a key is tight, as broadcast's message budget allows
    fastGossipMs: fastGossipIntervalMs(nodes, g, d),
    // each node pulls every other's state at its start, as a mesh node does from each member it
    // connects to: their answers name it (the start gate, docs/decision-rule.md "Starting")
    syncAtStart: true,
    engine: { expectedMembers: nodes },
  };
}
