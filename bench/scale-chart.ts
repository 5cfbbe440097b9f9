/**
 * bench/results/scale.svg from bench/results/scale.json: messages and bytes received per node per
 * second against N (log-log), one line per gossip design, the nodes series.
 *
 *   npx tsx bench/scale-chart.ts
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScaleRow } from './scale.js';

const here = dirname(fileURLToPath(import.meta.url));
const rows: ScaleRow[] = JSON.parse(readFileSync(resolve(here, 'results/scale.json'), 'utf8')).rows;
const nodes = rows.filter((r) => r.series === 'nodes');
const designs = [...new Set(nodes.map((r) => r.design))];
const COLORS = ['#c0392b', '#2471a3', '#1e8449'];
const W = 420;
const H = 300;
const M = { l: 60, r: 20, t: 30, b: 45 };

function panel(
  x0: number,
  field: 'msgs_in_per_s_node' | 'bytes_in_per_s_node',
  title: string,
  target?: number,
): string {
  const xs = nodes.map((r) => r.nodes);
  const ys = nodes.map((r) => r[field]).filter((v) => v > 0);
  const [x1, x2] = [Math.log10(Math.min(...xs)), Math.log10(Math.max(...xs))];
  const [y1, y2] = [Math.floor(Math.log10(Math.min(...ys))), Math.ceil(Math.log10(Math.max(...ys)))];
  const px = (n: number) => x0 + M.l + ((Math.log10(n) - x1) / (x2 - x1 || 1)) * (W - M.l - M.r);
  const py = (v: number) => M.t + (1 - (Math.log10(v) - y1) / (y2 - y1 || 1)) * (H - M.t - M.b);
  let s = `<text x="${x0 + W / 2}" y="18" text-anchor="middle" font-size="13">${title}</text>`;
  for (let e = y1; e <= y2; e++) {
    const y = py(10 ** e);
    s += `<line x1="${x0 + M.l}" x2="${x0 + W - M.r}" y1="${y}" y2="${y}" stroke="#ddd"/>`;
    s += `<text x="${x0 + M.l - 6}" y="${y + 4}" text-anchor="end" font-size="11">1e${e}</text>`;
  }
  for (const n of [...new Set(xs)]) {
    s += `<text x="${px(n)}" y="${H - M.b + 16}" text-anchor="middle" font-size="11">${n}</text>`;
  }
  s += `<text x="${x0 + W / 2}" y="${H - 8}" text-anchor="middle" font-size="11">nodes (N)</text>`;
  if (target !== undefined) {
    const y = py(target);
    s += `<line x1="${x0 + M.l}" x2="${x0 + W - M.r}" y1="${y}" y2="${y}" stroke="#888" stroke-dasharray="4 3"/>`;
    s += `<text x="${x0 + W - M.r}" y="${y - 4}" text-anchor="end" font-size="10" fill="#555">target ${target}</text>`;
  }
  designs.forEach((d, i) => {
    const pts = nodes
      .filter((r) => r.design === d)
      .sort((a, b) => a.nodes - b.nodes)
      .map((r) => `${px(r.nodes).toFixed(1)},${py(r[field]).toFixed(1)}`);
    s += `<polyline fill="none" stroke="${COLORS[i]}" stroke-width="2" points="${pts.join(' ')}"/>`;
    for (const pt of pts) {
      const [cx, cy] = pt.split(',');
      s += `<circle cx="${cx}" cy="${cy}" r="2.5" fill="${COLORS[i]}"/>`;
    }
    s += `<text x="${x0 + M.l + 8}" y="${M.t + 14 + 14 * i}" font-size="11" fill="${COLORS[i]}">${d}</text>`;
  });
  return s;
}

const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${H}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
${panel(0, 'msgs_in_per_s_node', 'messages in per node per s (g = 100 ms)', 50)}
${panel(W, 'bytes_in_per_s_node', 'bytes in per node per s')}
</svg>
`;
writeFileSync(resolve(here, 'results/scale.svg'), svg);
console.log('wrote bench/results/scale.svg');
