/**
 * One node of the owner drill (mesh-test/owner-drill.ts): a real mesh node on loopback that
 * runs the checks its parent plans for it with `checkAsync` at their times, and reports each
 * decision (IPC). Exits when the parent goes away.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createMeshLimiter } from '../src/mesh/mesh-limiter.js';
import type { Logger } from '../src/mesh/types.js';
import type { PolicySpec } from '../src/types.js';
import { BareLink, serveEcho } from './bare-echo.js';

export interface Op {
  /** Epoch ms the check is due. */
  at: number;
  key: string;
  /** 0: a look (asks the owner how much room the key has, spends nothing); default 1. */
  cost?: number;
}

export interface Outcome {
  key: string;
  cost: number;
  /** Epoch ms it was due, and when the decision came back. */
  at: number;
  doneAt: number;
  allowed: boolean;
  rule: string;
  decidedBy: string;
  reason: string | undefined;
  owner: string | undefined;
  /** checkAsync's own time, ms (the wait for the owner when asked). */
  ms: number;
  /**
   * The floor beside it: a bare TCP round trip (8 bytes echoed, no libp2p, no engine) to the
   * process of the key's owner, sent at the same moment as the check; absent when this node
   * owns the key or the owner's process is gone.
   */
  bareMs?: number;
}

export type ToChild =
  | { cmd: 'run'; ops: Op[]; ids?: string[] }
  | { cmd: 'owner'; key: string }
  | { cmd: 'status' };
export type FromChild =
  | { ev: 'ready'; peerId: string }
  | { ev: 'status'; live: number }
  | { ev: 'owner'; key: string; owner: string }
  | {
      ev: 'done';
      outcomes: Outcome[];
      stats: unknown;
      loopDelayMs: { p50: number; p99: number; max: number };
      /** This process's CPU over the run (user + system), % of one core. */
      cpuPct: number;
    };

const [index, basePort, nodes, policyJson] = process.argv.slice(2);
const i = Number(index);
const base = Number(basePort);
const n = Number(nodes);
const policies = JSON.parse(policyJson!) as PolicySpec[];
const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const limiter = createMeshLimiter({
  policies,
  listen: [`/ip4/127.0.0.1/tcp/${base + i}`],
  bootstrap: Array.from({ length: n }, (_, j) => j)
    .filter((j) => j !== i)
    .map((j) => `/ip4/127.0.0.1/tcp/${base + j}`),
  gossipIntervalMs: Number(process.env.OWNER_DRILL_GOSSIP_MS ?? 100),
  discoveryIntervalMs: 500,
  logger: quiet,
});
const send = (m: FromChild): void => {
  if (process.connected) process.send?.(m);
};
process.on('disconnect', () => process.exit(0));

process.on('message', (m: ToChild) => {
  if (m.cmd === 'status') send({ ev: 'status', live: limiter.peers().filter((p) => !p.stale).length });
  else if (m.cmd === 'owner')
    // the limiter's own view (explain names the owner of a key placed on one); the engine the
    // factory built last may be one of the start's warm-up engines, not the limiter's
    send({ ev: 'owner', key: m.key, owner: limiter.explain('login', m.key).owner ?? limiter.peerId });
  else if (m.cmd === 'run') void run(m.ops, m.ids ?? []);
});

/** The bare TCP echo each node serves (the floor under an ask: mesh-test/bare-echo.ts). */
const barePort = (j: number): number => base + 500 + j;
serveEcho(barePort(i));

async function run(ops: Op[], ids: string[]): Promise<void> {
  const links = new Map<number, BareLink>();
  for (let j = 0; j < ids.length; j++) if (j !== i) links.set(j, new BareLink(barePort(j)));
  // how late this process's event loop runs what is due (an ask waits for a turn here to be sent
  // and read, and for one at the owner to be answered): a floor under the asks' latency
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  const outcomes: Outcome[] = [];
  const pending: Promise<void>[] = [];
  for (const op of ops.slice(0, 100_000)) {
    const wait = op.at - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const owner = ids.length > 0 ? limiter.explain('login', op.key).owner : undefined;
    const t0 = performance.now();
    const cost = op.cost ?? 1;
    const check = limiter
      .checkAsync('login', op.key, cost)
      .then((d) => ({ d, ms: performance.now() - t0, doneAt: Date.now() }));
    const link = owner === undefined ? undefined : links.get(ids.indexOf(owner));
    const bare = link === undefined ? Promise.resolve(Number.NaN) : link.ping();
    pending.push(
      Promise.all([check, bare]).then(([{ d, ms, doneAt }, bareMs]) => {
        outcomes.push({
          key: op.key,
          cost,
          at: op.at,
          doneAt,
          allowed: d.allowed,
          rule: d.rule,
          decidedBy: d.owner?.decidedBy ?? 'none',
          reason: d.owner?.reason,
          owner: d.owner?.id,
          ms,
          ...(Number.isNaN(bareMs) ? {} : { bareMs }),
        });
      }),
    );
  }
  await Promise.all(pending);
  loop.disable();
  const cpu = process.cpuUsage(cpu0);
  const cpuPct = (100 * (cpu.user + cpu.system)) / 1000 / (performance.now() - wall0);
  // the histogram holds each turn's interval: the 1 ms resolution plus how late it ran
  const ms = (ns: number) => Math.max(0, Math.round(ns / 1e3) / 1e3 - 1);
  send({
    ev: 'done',
    outcomes,
    stats: limiter.stats().owner,
    loopDelayMs: { p50: ms(loop.percentile(50)), p99: ms(loop.percentile(99)), max: ms(loop.max) },
    cpuPct,
  });
}

await limiter.start();
send({ ev: 'ready', peerId: limiter.peerId });
