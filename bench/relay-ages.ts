/**
 * A model of the simulator's relay (docs/scale.md, "Relay"): how old one message is when it
 * first reaches each node, against the D the engine expects ({@link dataDelayMs} of
 * {@link expectedRelayHops}). The origin sends at its tick to f random peers; each node that
 * first hears it forwards it at its own next tick (ticks spread evenly over g) to f random
 * peers; a link takes d. No loss, no engine: ages and how many nodes never hear it.
 *
 *   npx tsx bench/relay-ages.ts [--fanout 4] [--trials 100]
 */
import { dataDelayMs, expectedRelayHops } from '../src/decision/constants.js';
import { EventQueue } from '../src/sim/event-queue.js';
import { Prng } from '../src/sim/prng.js';

const G = 100;
const D = 10;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

function ages(
  n: number,
  f: number,
  trials: number,
  prng: Prng,
): { ages: number[]; missed: number; of: number } {
  const out: number[] = [];
  let missed = 0;
  for (let tr = 0; tr < trials; tr++) {
    const phase = (i: number) => (i * G) / n;
    const first = new Float64Array(n).fill(Number.POSITIVE_INFINITY);
    const forwarded = new Uint8Array(n);
    const origin = Math.floor(prng.next() * n);
    const t0 = phase(origin);
    first[origin] = t0;
    const q = new EventQueue();
    const forward = (i: number, t: number): void => {
      if (forwarded[i]) return;
      forwarded[i] = 1;
      const picked: number[] = [];
      while (picked.length < Math.min(f, n - 1)) {
        let to = Math.floor(prng.next() * (n - 1));
        if (to >= i) to++;
        if (!picked.includes(to)) picked.push(to);
      }
      for (const to of picked) {
        const at = t + D;
        if (at >= first[to]!) continue;
        first[to] = at;
        // its next tick after the arrival
        const next = phase(to) + (Math.floor((at - phase(to)) / G) + 1) * G;
        q.push(next, () => forward(to, next));
      }
    };
    q.push(t0, () => forward(origin, t0));
    while (q.size > 0) q.pop()();
    for (let i = 0; i < n; i++) {
      if (i === origin) continue;
      if (first[i] === Number.POSITIVE_INFINITY) missed++;
      else out.push(first[i]! - t0);
    }
  }
  out.sort((a, b) => a - b);
  return { ages: out, missed, of: trials * (n - 1) };
}

const f = arg('fanout', 4);
const trials = arg('trials', 100);
const prng = new Prng(1);
const q = (xs: number[], p: number) => Math.round(xs[Math.floor(p * (xs.length - 1))]!);
console.log('    N   hops   D ms   p99 ms   p99.9 ms   max ms   miss');
for (const n of [8, 16, 32, 64, 128, 256, 512, 1024]) {
  const r = ages(n, f, trials, prng);
  const hops = expectedRelayHops(n, f);
  console.log(
    [
      String(n).padStart(5),
      String(hops).padStart(6),
      String(dataDelayMs(G, D, hops)).padStart(6),
      String(q(r.ages, 0.99)).padStart(8),
      String(q(r.ages, 0.999)).padStart(10),
      String(q(r.ages, 1)).padStart(8),
      `${((100 * r.missed) / r.of).toFixed(1)} %`.padStart(8),
    ].join(' '),
  );
}
