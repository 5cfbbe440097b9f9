/**
 * The unseen-span bound (docs/scale.md, "The unseen span"; src/sim/span-bound.ts): the fewest
 * false denials ANY rule whose nodes decide alone, send only at their ticks and never pass L can
 * make, in expectation, on `bench:two-sided`'s global key at 0.9 L (L = 1,000 per 1 s, 900/s
 * evenly spaced, nodes drawn uniformly, 10 s), in the meshes of its 0.9 L rows: the default
 * (spread ticks, g = 100 ms) and spread ticks at g = 50 and 25 ms, and aligned ticks (every node
 * at once: the schedule of the aligned rounds since removed); d = 10 ms, ticks up to 2 ms late.
 *
 * The bound is an expectation over the draws of the nodes: λ is picked on the draw
 * bench:two-sided ran (seed 11), then the bound at that λ is taken on DRAWS other draws and their
 * mean printed, with their least and greatest (the Riemann sum over T on a grid shifted by each
 * draw). Beside it: the same allowed L + 1 % (slack 10), the mean headroom and unseen arrivals,
 * and the rule's false denials as bench/results/two-sided.json has them (seed 11's draw).
 *
 *   npm run bench:span-bound [-- --nodes 8,32,64] [--meshes default,aligned,g50,g25] [--draws 6]
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Prng } from '../src/sim/prng.js';
import { type SpanMesh, spanBound } from '../src/sim/span-bound.js';
import { addKey, emptyArrivals, steadyKey } from '../src/sim/two-sided.js';
import { printTable } from './table.js';

const L = 1_000;
const W = 1_000;
const RATE = 900;
const END = 10_000;
const D = 10;
const LATE = 2;

interface MeshDef {
  name: string;
  /** The row of two-sided.json with the rule's figures on this mesh (none: no such mesh runs). */
  row?: string;
  mesh(n: number): SpanMesh;
}

const MESHES: Record<string, MeshDef> = {
  default: {
    name: 'default: spread, g = 100',
    row: '0.9L',
    mesh: (n) => ({ nodes: n, gossipIntervalMs: 100, delayMs: D, tickLateMs: LATE }),
  },
  // the schedule of the aligned rounds since removed (every node at k·g − d): the bound only
  aligned: {
    name: 'aligned ticks, g = 100',
    mesh: (n) => ({
      nodes: n,
      gossipIntervalMs: 100,
      delayMs: D,
      tickLateMs: LATE,
      phases: new Array(n).fill(100 - D),
    }),
  },
  g50: {
    name: 'spread, g = 50',
    row: '0.9L, g = 50, broadcast',
    mesh: (n) => ({ nodes: n, gossipIntervalMs: 50, delayMs: D, tickLateMs: LATE }),
  },
  g25: {
    name: 'spread, g = 25',
    row: '0.9L, g = 25, broadcast',
    mesh: (n) => ({ nodes: n, gossipIntervalMs: 25, delayMs: D, tickLateMs: LATE }),
  },
};

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const nodeCounts = (arg('--nodes') ?? '2,3,8,32,64').split(',').map(Number);
const meshNames = (arg('--meshes') ?? 'default,g50,g25,aligned').split(',');
for (const m of meshNames)
  if (!(m in MESHES)) throw new Error(`unknown mesh ${m}: one of ${Object.keys(MESHES)}`);
const DRAWS = Number(arg('--draws') ?? 6);

interface Saved {
  row: string;
  nodes: number;
  limiter: string;
  false_denials_pct: number;
}
const here = dirname(fileURLToPath(import.meta.url));
const saved = (JSON.parse(readFileSync(join(here, 'results', 'two-sided.json'), 'utf8')) as { rows: Saved[] })
  .rows;
const measured = (row: string, n: number) =>
  saved.find((r) => r.row === row && r.nodes === n && r.limiter === 'default')?.false_denials_pct;

function arrivals(n: number, seed: number) {
  const a = emptyArrivals();
  steadyKey(a, addKey(a, 'global'), RATE, 0, END, n, new Prng(seed));
  return a;
}

const pct = (x: number) => (x * 100).toFixed(3);
const rows: (string | number)[][] = [];
const t0 = performance.now();
for (const m of meshNames) {
  const def = MESHES[m]!;
  for (const n of nodeCounts) {
    const mesh = def.mesh(n);
    // from one window and one span after the traffic's start (the window is full of it) to its end,
    // on a 1 ms grid shifted by the draw
    const span = (seed: number) => ({
      limit: L,
      windowMs: W,
      fromMs: W + mesh.gossipIntervalMs + D + LATE + ((seed * 0.618034) % 1),
      toMs: END,
      stepMs: 1,
    });
    const a = arrivals(n, 11);
    const pick = spanBound(a.t, a.node, mesh, span(11));
    const pickSlack = spanBound(a.t, a.node, mesh, { ...span(11), slack: L / 100 });
    const strict: number[] = [];
    const slack: number[] = [];
    let h = 0;
    let unseen = 0;
    for (let seed = 12; seed < 12 + DRAWS; seed++) {
      const b = arrivals(n, seed);
      const s = spanBound(b.t, b.node, mesh, { ...span(seed), lambdas: [pick.lambda] });
      strict.push(s.fraction);
      slack.push(
        spanBound(b.t, b.node, mesh, { ...span(seed), slack: L / 100, lambdas: [pickSlack.lambda] }).fraction,
      );
      h += s.meanHeadroom / DRAWS;
      unseen += s.meanUnseen / DRAWS;
    }
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    const rule = def.row === undefined ? undefined : measured(def.row, n);
    rows.push([
      def.name,
      n,
      pick.lambda,
      pct(mean(strict)),
      `${pct(Math.min(...strict))}-${pct(Math.max(...strict))}`,
      `${pct(mean(slack))} (${pct(Math.min(...slack))}-${pct(Math.max(...slack))})`,
      h.toFixed(1),
      unseen.toFixed(1),
      rule === undefined ? '-' : rule.toFixed(2),
    ]);
  }
}
console.log(
  `global key at 0.9 L: L = ${L} per ${W} ms, ${RATE}/s evenly spaced over ${END / 1000} s, nodes drawn uniformly; d = ${D} ms, ticks up to ${LATE} ms late; ` +
    `λ picked on seed 11 (bench:two-sided's draw), the bound the mean over seeds 12-${11 + DRAWS} at that λ`,
);
printTable(
  ['mesh', 'N', 'λ', 'bound %', 'min-max %', 'at L+1% % (min-max)', 'mean H', 'unseen', 'rule %'],
  rows,
);
console.log(`(${((performance.now() - t0) / 1000).toFixed(0)} s)`);
