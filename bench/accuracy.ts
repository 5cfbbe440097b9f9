/**
 * The accuracy bench: the seed trace (shared/seeds/000) through the seed's three
 * baselines and through the production decision code on the simulator, naive
 * and controlled, over gossip delay, interval, loss and a cut node.
 *
 *   npm run bench:accuracy
 *
 * Prints one table, writes bench/results/accuracy.json and
 * bench/results/accuracy.svg (worst 1 s over-admission against delay).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gcraBound, runBaselines } from '../src/sim/baselines.js';
import { round, rowFigures, slidingLogAdmits } from '../src/sim/metrics.js';
import { type Cut, replayTrace } from '../src/sim/simulator.js';
import { seedTrace } from '../src/sim/trace.js';
import type { OverAdmission, PolicySpec } from '../src/types.js';
import { printTable } from './table.js';

export interface AccuracyRow {
  design: 'central' | 'static' | 'lease' | 'naive' | 'controlled';
  g_ms: number | null;
  d_ms: number | null;
  loss: number;
  cut: string | null;
  fallback: boolean | null;
  buckets: number | null;
  admitted: number;
  vs_gcra_bound: number;
  vs_window_bound: number;
  worst_1s: number;
  worst_100ms: number;
  calls_per_req: number;
  msgs_per_s_node: number;
  bytes_per_s_node: number;
}

const L = 1000;
const W = 1000;
const NODES = 8;
/** Buckets per window for the gossip rows: 20 ms buckets (k = 10 is shown once for comparison). */
export const BENCH_BUCKETS = 50;

const trace = seedTrace();
const seconds = (trace.t[trace.t.length - 1]! + 0.5) / 1000;
const gcra = gcraBound(trace);
const windowBound = slidingLogAdmits(trace.t, L, W).length;

function figures(admitted: number[]) {
  return rowFigures(admitted, gcra, windowBound);
}

export function gossipRow(
  design: OverAdmission,
  g: number,
  d: number,
  opts: { loss?: number; cut?: Cut; fallback?: boolean; buckets?: number } = {},
): AccuracyRow {
  const buckets = opts.buckets ?? BENCH_BUCKETS;
  const policy: PolicySpec = {
    name: 'seed',
    limit: L,
    windowMs: W,
    buckets,
    overAdmission: design,
    fallback: opts.fallback ?? true,
  };
  const r = replayTrace(
    trace,
    {
      nodes: NODES,
      policies: [policy],
      gossipIntervalMs: g,
      delayMs: d,
      loss: opts.loss ?? 0,
      cuts: opts.cut ? [opts.cut] : [],
      seed: 7,
    },
    'seed',
  );
  return {
    design,
    g_ms: g,
    d_ms: d,
    loss: opts.loss ?? 0,
    cut: opts.cut ? `node${opts.cut.node} ${opts.cut.fromMs / 1000}-${opts.cut.toMs / 1000}s` : null,
    fallback: opts.cut ? (opts.fallback ?? true) : null,
    buckets,
    ...figures(r.admitted),
    calls_per_req: 0,
    msgs_per_s_node: round(r.messages / NODES / seconds, 1),
    bytes_per_s_node: Math.round(r.bytes / NODES / seconds),
  };
}

export const DELAYS = [0, 1, 5, 10, 25, 50, 100, 250];

function main(): void {
  const rows: AccuracyRow[] = [];
  for (const b of runBaselines(trace, NODES)) {
    rows.push({
      design: b.design,
      g_ms: null,
      d_ms: null,
      loss: 0,
      cut: null,
      fallback: null,
      buckets: null,
      ...figures(b.admitted),
      calls_per_req: round(b.calls / trace.t.length, 3),
      msgs_per_s_node: 0,
      bytes_per_s_node: 0,
    });
  }
  for (const design of ['naive', 'controlled'] as const) {
    for (const d of DELAYS) rows.push(gossipRow(design, 10, d));
    for (const g of [5, 25, 50, 100, 250, 500, 1000]) rows.push(gossipRow(design, g, 10));
    for (const loss of [0.05, 0.2]) rows.push(gossipRow(design, 10, 10, { loss }));
    const cut = { node: 0, fromMs: 3000, toMs: 6000 };
    rows.push(gossipRow(design, 10, 10, { cut, fallback: true }));
    rows.push(gossipRow(design, 10, 10, { cut, fallback: false }));
    rows.push(gossipRow(design, 10, 10, { buckets: 10 }));
  }

  const header = [
    'design',
    'g ms',
    'd ms',
    'loss',
    'cut',
    'k',
    'admitted',
    'vs GCRA',
    'vs window',
    'worst 1s',
    'over L',
    'worst 100ms',
    'calls/req',
    'msgs/s/node',
    'B/s/node',
  ];
  const cells = rows.map((r) => [
    r.design,
    r.g_ms ?? '-',
    r.d_ms ?? '-',
    r.loss ? `${r.loss * 100}%` : '-',
    r.cut ? `${r.cut}${r.fallback ? ' +fallback' : ' no fallback'}` : '-',
    r.buckets ?? '-',
    r.admitted,
    r.vs_gcra_bound.toFixed(4),
    r.vs_window_bound.toFixed(4),
    r.worst_1s,
    `${(((r.worst_1s - L) / L) * 100).toFixed(1)}%`,
    r.worst_100ms,
    r.calls_per_req.toFixed(3),
    r.msgs_per_s_node,
    r.bytes_per_s_node,
  ]);
  console.log(
    `seed trace: ${trace.t.length} requests over ${seconds} s, ${NODES} nodes, L = ${L} per ${W} ms; ` +
      `GCRA bound ${gcra}, exact sliding-window-log bound ${windowBound}`,
  );
  printTable(header, cells);

  const here = dirname(fileURLToPath(import.meta.url));
  const out = join(here, 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'accuracy.json'), `${JSON.stringify(rows, null, 2)}\n`);
  writeFileSync(join(out, 'accuracy.svg'), chart(rows));
  console.log(
    `wrote ${join('bench', 'results', 'accuracy.json')} and ${join('bench', 'results', 'accuracy.svg')}`,
  );
}

/** Worst 1 s over-admission (% over L) against gossip delay, one line per design. */
function chart(rows: AccuracyRow[]): string {
  const w = 820;
  const h = 420;
  const m = { l: 60, r: 220, t: 40, b: 50 };
  const pw = w - m.l - m.r;
  const ph = h - m.t - m.b;
  const pct = (r: AccuracyRow) => ((r.worst_1s - L) / L) * 100;
  const series: { name: string; color: string; pts: [number, number][] }[] = [];
  const sweep = (design: string) =>
    rows.filter(
      (r) =>
        r.design === design && r.g_ms === 10 && r.loss === 0 && r.cut === null && r.buckets === BENCH_BUCKETS,
    );
  for (const [design, color] of [
    ['naive', '#d62728'],
    ['controlled', '#2ca02c'],
  ] as const) {
    series.push({
      name: `${design} gossip`,
      color,
      pts: sweep(design).map((r) => [DELAYS.indexOf(r.d_ms!), pct(r)]),
    });
  }
  for (const [design, label, color] of [
    ['central', 'central GCRA', '#1f77b4'],
    ['static', 'static L/N', '#9467bd'],
    ['lease', 'lease x20', '#ff7f0e'],
  ] as const) {
    const r = rows.find((x) => x.design === design)!;
    series.push({ name: `${label} (seed, burst 96)`, color, pts: DELAYS.map((_, i) => [i, pct(r)]) });
  }
  const all = series.flatMap((s) => s.pts.map((p) => p[1]));
  const ymax = Math.ceil(Math.max(5, ...all) / 5) * 5;
  const ymin = Math.floor(Math.min(0, ...all) / 5) * 5;
  const x = (i: number) => m.l + (i / (DELAYS.length - 1)) * pw;
  const y = (v: number) => m.t + ph - ((v - ymin) / (ymax - ymin)) * ph;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="sans-serif" font-size="12">`,
    `<rect width="${w}" height="${h}" fill="white"/>`,
    `<text x="${m.l}" y="22" font-size="14">Worst rolling 1 s, % over L, vs gossip delay (g = 10 ms, 8 nodes, seed trace)</text>`,
  );
  for (let v = ymin; v <= ymax; v += 5) {
    parts.push(
      `<line x1="${m.l}" x2="${m.l + pw}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${m.l - 8}" y="${y(v) + 4}" text-anchor="end">${v}%</text>`,
    );
  }
  DELAYS.forEach((d, i) => {
    parts.push(`<text x="${x(i)}" y="${m.t + ph + 18}" text-anchor="middle">${d}</text>`);
  });
  parts.push(`<text x="${m.l + pw / 2}" y="${h - 10}" text-anchor="middle">gossip delay d (ms)</text>`);
  parts.push(`<line x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${m.t + ph}" stroke="#333"/>`);
  parts.push(`<line x1="${m.l}" x2="${m.l + pw}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>`);
  series.forEach((s, si) => {
    const dash = s.name.includes('seed,') ? ' stroke-dasharray="5,4"' : '';
    parts.push(
      `<polyline fill="none" stroke="${s.color}" stroke-width="2"${dash} points="${s.pts.map(([i, v]) => `${x(i)},${y(v)}`).join(' ')}"/>`,
    );
    for (const [i, v] of s.pts)
      if (!dash) parts.push(`<circle cx="${x(i)}" cy="${y(v)}" r="3" fill="${s.color}"/>`);
    const ly = m.t + 10 + si * 20;
    parts.push(
      `<line x1="${m.l + pw + 12}" x2="${m.l + pw + 32}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`,
      `<text x="${m.l + pw + 38}" y="${ly + 4}">${s.name}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
