/**
 * The unseen-span bound (docs/scale.md, "The unseen span"): a lower bound on the expected
 * false denials of ANY rule whose nodes decide alone and never pass L, on given arrivals whose
 * nodes are drawn uniformly and independently, in a mesh where node i tells the others only in
 * messages sent at its ticks (φ_i + k·g, each up to `tickLateMs` late) that take at least d to
 * arrive, and sends nothing between ticks (no early publish: the default mesh makes none at
 * 0.9 L on 8 nodes and more, where a node's unsent counts stay under 5 % of L).
 *
 * The argument, at any time T:
 * - Let σ_i be the latest time that can be node i's last send at or before T − d (its last tick
 *   there, plus the lateness, capped at T − d). No message node i sent after σ_i reaches anyone
 *   by T, so nothing node i was offered in its **unseen span** (σ_i, T] can change what any other
 *   node does before T. Everything else (node j's arrivals up to σ_j, for every j) is the
 *   **prefix**: each node's decisions in its span depend on the prefix and its own span only.
 * - The rule never passes L on any arrivals: offer every node any arrivals at all in its span,
 *   independently. Node i then admits at most A_i (the most it admits in its span over all its
 *   possible span arrivals: a function of the prefix), and Σ A_i ≤ H_T = L − (what the prefix
 *   admitted in (T − W, T]).
 * - So node i denies at least (X_i − A_i)+ of its span's X_i arrivals, and given the prefix,
 *   E[Σ (X_i − A_i)+] ≥ F(H_T) = min over integer A with Σ A ≤ H_T. Each arrival of a span whose
 *   node the prefix does not name is at each node j with σ_j < t alike (the draw is uniform and
 *   independent), so X_i is a sum of independent Bernoulli draws; E[(X_i − a)+] is convex in a
 *   with steps −P(X_i > a), so F takes the H_T largest of those steps (greedy is exact).
 * - A rule can deny in the prefix to leave more headroom: the prefix admitted its arrivals in
 *   the window less D_w(T), its denials there, so its headroom is H⁰_T + D_w(T) with H⁰_T from
 *   the arrivals alone.
 * - A denial at s by node j is in j's span at T for T in [s, s + m): m = max(s, τ) + d − s, τ
 *   its first tick at or after s − lateness, so m < c = g + d − lateness. Then it is in the
 *   prefix, and in the window until s + W: for W − m. With α = λ/c and β = (1 − λ)/W (α ≥ β for
 *   λ ≥ c/(c + W)), each denial adds α·m + β·(W − m) ≤ α·c + β·(W − c) = K to
 *   ∫ [α·D_span(T) + β·D_w(T)] dT. So with D the denials in [from − W, to]:
 *   K·D ≥ ∫ [α·F(H⁰_T + D_w(T)) + β·D_w(T)] dT ≥ ∫ min over δ ≥ 0 of [α·F(H⁰_T + δ) + β·δ] dT,
 *   with K = λ + (1 − λ)(1 − c/W).
 *   Every term is a function of the arrivals and the schedule alone; the bound is taken for a
 *   given λ, as a fraction of the arrivals in [from − W, to] (all of which an exact limiter
 *   admits on traffic under L; where it denies some, subtract them).
 * - F is an expectation given the prefix, so the integral bounds E[D] in expectation over the
 *   draws of the nodes: one run's figure is an estimate of it (as is the Riemann sum over T).
 *   Pick λ on one draw and report the mean over others (bench/span-bound.ts), not the best λ on
 *   the draw reported (an upward bias).
 *
 * What it leaves out, in the rule's favour (so it stays a lower bound): a node's cap only over
 * its whole span at one T (not over every moment of it), denials counted once in the integral's
 * worst case, the prefix's denials free to fall where they help most.
 */

import { spreadPhaseMs } from './simulator.js';

/** The schedule of a mesh's messages. */
export interface SpanMesh {
  nodes: number;
  gossipIntervalMs: number;
  /** Least time a message takes to arrive, ms. */
  delayMs: number;
  /** A tick fires up to this late, ms. */
  tickLateMs: number;
  /** Each node's first tick, ms (default spread: i·g/N, as the simulator's spread rounds). */
  phases?: readonly number[];
}

export interface SpanBoundOptions {
  limit: number;
  windowMs: number;
  /** The bound is taken at T from `fromMs` to `toMs` every `stepMs` (a Riemann sum of the integral). */
  fromMs: number;
  toMs: number;
  stepMs: number;
  /** Units a rule is allowed past L (0: it never passes L). */
  slack?: number;
  /** λ values tried (`fraction` is the best: pick λ on one draw, then pass it alone for others). */
  lambdas?: readonly number[];
}

export interface SpanBound {
  /** Lower bound on the expected denials per arrival in [from − W, to], on these arrivals (the best λ tried). */
  fraction: number;
  lambda: number;
  /** Means over T: H⁰_T, and the arrivals expected in the nodes' unseen spans. */
  meanHeadroom: number;
  meanUnseen: number;
  samples: number;
}

const DEFAULT_LAMBDAS = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99];

/**
 * P(X ≥ a) for a = 1 … amax into `out[a − 1]`, X a sum of independent Bernoulli(ps[k]) for k
 * of `idx` (the Poisson-binomial law, by the recurrence over draws). `dist` is scratch of
 * amax + 1 (its last cell holds X ≥ amax).
 */
export function tailsOf(
  ps: ArrayLike<number>,
  idx: ArrayLike<number>,
  count: number,
  amax: number,
  dist: Float64Array,
  out: Float64Array,
): void {
  dist.fill(0, 0, amax + 1);
  dist[0] = 1;
  let top = 0;
  for (let k = 0; k < count; k++) {
    const p = ps[idx[k]!]!;
    const q = 1 - p;
    if (top < amax) top++;
    // the absorbing cell keeps X ≥ amax
    if (top === amax) dist[amax] = dist[amax]! + dist[amax - 1]! * p;
    for (let a = Math.min(top, amax - 1); a >= 1; a--) dist[a] = dist[a]! * q + dist[a - 1]! * p;
    dist[0] = dist[0]! * q;
  }
  let tail = 0;
  for (let a = amax; a >= 1; a--) {
    tail += dist[a]!;
    out[a - 1] = tail;
  }
}

/**
 * F(h) = min over integer caps summing to at most h of Σ E[(X_i − A_i)+], from every node's steps
 * P(X_i ≥ a) sorted descending (`steps`) and Σ E[X_i] (`mean`): the mean less the h largest steps.
 */
export function capLoss(steps: readonly number[], mean: number, h: number): number {
  let f = mean;
  const m = Math.min(h, steps.length);
  for (let k = 0; k < m; k++) f -= steps[k]!;
  return Math.max(0, f);
}

/** Each node's σ at T (−∞ before its first tick). */
function sigmas(mesh: SpanMesh, phases: readonly number[], t: number, out: Float64Array): void {
  const g = mesh.gossipIntervalMs;
  const sendBy = t - mesh.delayMs;
  for (let i = 0; i < mesh.nodes; i++) {
    const ph = phases[i]!;
    if (sendBy < ph) {
      out[i] = Number.NEGATIVE_INFINITY;
      continue;
    }
    const tick = ph + g * Math.floor((sendBy - ph) / g);
    out[i] = Math.min(sendBy, tick + mesh.tickLateMs);
  }
}

/** The unseen-span bound on arrivals `times` (ascending) at `nodes`, for `mesh` (module doc). */
export function spanBound(
  times: readonly number[],
  nodes: readonly number[],
  mesh: SpanMesh,
  opts: SpanBoundOptions,
): SpanBound {
  const n = mesh.nodes;
  const g = mesh.gossipIntervalMs;
  // the longest a denial stays in its node's span (module doc)
  const c = g + mesh.delayMs - mesh.tickLateMs;
  const w = opts.windowMs;
  if (!(g + mesh.delayMs + mesh.tickLateMs < w))
    throw new Error('the bound needs g + d + lateness under the window');
  if (times.length !== nodes.length) throw new Error('times and nodes differ in length');
  const phases = mesh.phases ?? Array.from({ length: n }, (_, i) => spreadPhaseMs(i, n, g));
  const lambdas = opts.lambdas ?? DEFAULT_LAMBDAS;
  // α ≥ β, which K's bound needs (module doc)
  for (const lam of lambdas)
    if (!(lam >= c / (c + w) && lam < 1)) throw new Error(`λ must be in [c/(c + W), 1), got ${lam}`);
  const cap = opts.limit + (opts.slack ?? 0);
  const sums = new Float64Array(lambdas.length);
  let headroomSum = 0;
  let unseenSum = 0;
  let samples = 0;

  const sigma = new Float64Array(n);
  const sorted = new Float64Array(n);
  const probs: number[] = [];
  const unseenT: number[] = [];
  const mine: number[] = [];
  const steps: number[] = [];
  const AMAX = 64;
  const dist = new Float64Array(AMAX + 1);
  const tails = new Float64Array(AMAX);
  let lo = 0; // first arrival after T − W
  let hi = 0; // first arrival after T

  for (let t = opts.fromMs; t <= opts.toMs; t += opts.stepMs) {
    sigmas(mesh, phases, t, sigma);
    sorted.set(sigma);
    sorted.sort();
    while (lo < times.length && times[lo]! <= t - w) lo++;
    while (hi < times.length && times[hi]! <= t) hi++;
    // the prefix's arrivals in the window, and the span arrivals the prefix does not place
    let revealed = 0;
    probs.length = 0;
    unseenT.length = 0;
    for (let k = lo; k < hi; k++) {
      const at = times[k]!;
      if (at <= sigma[nodes[k]!]!) {
        revealed++;
        continue;
      }
      // nodes whose span holds `at`: σ_j < at (a binary search over the sorted σ)
      let a = 0;
      let b = n;
      while (a < b) {
        const mid = (a + b) >> 1;
        if (sorted[mid]! < at) a = mid + 1;
        else b = mid;
      }
      probs.push(1 / a);
      unseenT.push(at);
    }
    const h = Math.max(0, Math.floor(cap - revealed));
    // every node's steps P(X_i ≥ a)
    steps.length = 0;
    let mean = 0;
    // the steps left out (under 1e-15 each), taken off F so that it only falls
    let dropped = 0;
    for (let i = 0; i < n; i++) {
      mine.length = 0;
      let m = 0;
      for (let k = 0; k < unseenT.length; k++) {
        if (unseenT[k]! > sigma[i]!) {
          mine.push(k);
          m += probs[k]!;
        }
      }
      if (mine.length === 0) continue;
      mean += m;
      // P(X ≥ m + 12√m + 12) is under 1e-15 for a sum of Bernoulli draws of mean m (Chernoff)
      const amax = Math.min(mine.length, AMAX, Math.ceil(m + 12 * Math.sqrt(m) + 12));
      tailsOf(probs, mine, mine.length, amax, dist, tails);
      for (let a = 0; a < amax; a++) {
        if (tails[a]! > 1e-15) steps.push(tails[a]!);
        else dropped += tails[a]!;
      }
      // beyond amax, each further step counted as the last: larger than it is, so F only falls
      // (the bound stays a lower bound)
      for (let a = amax; a < mine.length; a++) {
        if (tails[amax - 1]! > 1e-15) steps.push(tails[amax - 1]!);
        else dropped += tails[amax - 1]!;
      }
    }
    steps.sort((x, y) => y - x);
    const f0 = Math.max(0, capLoss(steps, mean, h) - dropped);
    for (let li = 0; li < lambdas.length; li++) {
      const lam = lambdas[li]!;
      // min over δ of λ·F(h + δ)/c + (1 − λ)·δ/W: F's steps fall, so buy while a step pays
      let v = (lam * f0) / c;
      for (let k = h; k < steps.length; k++) {
        const gain = (lam * steps[k]!) / c;
        const cost = (1 - lam) / w;
        if (gain <= cost) break;
        v += cost - gain;
      }
      sums[li] = sums[li]! + Math.max(0, v);
    }
    headroomSum += h;
    unseenSum += mean;
    samples++;
  }
  let arrivals = 0;
  for (const at of times) if (at >= opts.fromMs - w && at <= opts.toMs) arrivals++;
  // each λ's integral over K(λ), per arrival
  for (let li = 0; li < lambdas.length; li++) {
    const lam = lambdas[li]!;
    sums[li] = sums[li]! / (lam + (1 - lam) * (1 - c / w));
  }
  const per = (x: number) => (arrivals > 0 ? (x * opts.stepMs) / arrivals : 0);
  let best = 0;
  for (let li = 1; li < lambdas.length; li++) if (sums[li]! > sums[best]!) best = li;
  return {
    fraction: per(sums[best]!),
    lambda: lambdas[best]!,
    meanHeadroom: samples > 0 ? headroomSum / samples : 0,
    meanUnseen: samples > 0 ? unseenSum / samples : 0,
    samples,
  };
}
