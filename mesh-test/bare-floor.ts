/**
 * The round trip between idle processes on this machine, the floor under the owner drill's asks
 * (mesh-test/owner-drill.ts) without a mesh: 8 processes on loopback, each a plain `net` echo
 * server and a client with a persistent connection to every other; each pings (8 bytes, echoed)
 * a random other process at Poisson times (`--rate` a second) and, like the drill's attacker, at
 * the same 200 ms marks as every other process. Prints p50 / p99 / max of the round trips.
 *
 *   npx tsx mesh-test/bare-floor.ts [--rate 5] [--seconds 20]
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BareLink, serveEcho } from './bare-echo.js';

const N = 8;
const BASE = 47_000;

function child(i: number, rate: number, seconds: number): void {
  serveEcho(BASE + i);
  const trips: number[] = [];
  setTimeout(async () => {
    const links = Array.from({ length: N }, (_, j) => (j === i ? undefined : new BareLink(BASE + j)));
    await new Promise((r) => setTimeout(r, 500));
    const end = Date.now() + seconds * 1000;
    const ping = (): void => {
      let j = Math.floor(Math.random() * N);
      if (j === i) j = (j + 1) % N;
      void links[j]!.ping().then((ms) => {
        if (!Number.isNaN(ms)) trips.push(ms);
      });
    };
    const poisson = (): void => {
      if (Date.now() >= end) return;
      ping();
      setTimeout(poisson, (-Math.log(1 - Math.random()) * 1000) / rate);
    };
    const marks = (): void => {
      if (Date.now() >= end) return;
      ping();
      setTimeout(marks, 200 - (Date.now() % 200));
    };
    poisson();
    setTimeout(marks, 200 - (Date.now() % 200));
    setTimeout(() => process.send?.(trips), seconds * 1000 + 300);
  }, 1000);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { rate: { type: 'string', default: '5' }, seconds: { type: 'string', default: '20' } },
  });
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const self = fileURLToPath(import.meta.url);
  const kids = Array.from({ length: N }, (_, i) =>
    fork(self, ['--child', String(i), String(rate), String(seconds)], { execArgv: ['--import', 'tsx'] }),
  );
  const all: number[] = [];
  await Promise.all(
    kids.map(
      (k) =>
        new Promise<void>((resolve) =>
          k.once('message', (m: number[]) => {
            all.push(...m);
            k.kill();
            resolve();
          }),
        ),
    ),
  );
  all.sort((a, b) => a - b);
  const q = (p: number) => all[Math.min(all.length - 1, Math.floor(p * all.length))]!.toFixed(3);
  console.log(
    `bare TCP round trips between ${N} idle processes (${rate}/s each at Poisson times + every process at the same 200 ms marks, ${seconds} s): ` +
      `n ${all.length}, p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms`,
  );
}

if (process.argv[2] === '--child')
  child(Number(process.argv[3]), Number(process.argv[4]), Number(process.argv[5]));
else
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
