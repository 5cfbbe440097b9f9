/**
 * One node of the owner drill (mesh-test/owner-drill.ts): a real mesh node on loopback that
 * runs the checks its parent plans for it with `checkAsync` at their times, and reports each
 * decision (IPC). Exits when the parent goes away.
 */
import { Engine } from '../src/decision/engine.js';
import { createMeshLimiter } from '../src/mesh/mesh-limiter.js';
import type { Logger } from '../src/mesh/types.js';
import type { PolicySpec } from '../src/types.js';

export interface Op {
  /** Epoch ms the check is due. */
  at: number;
  key: string;
}

export interface Outcome {
  key: string;
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
}

export type ToChild = { cmd: 'run'; ops: Op[] } | { cmd: 'owner'; key: string } | { cmd: 'status' };
export type FromChild =
  | { ev: 'ready'; peerId: string }
  | { ev: 'status'; live: number }
  | { ev: 'owner'; key: string; owner: string }
  | { ev: 'done'; outcomes: Outcome[]; stats: unknown };

const [index, basePort, nodes, policyJson] = process.argv.slice(2);
const i = Number(index);
const base = Number(basePort);
const n = Number(nodes);
const policies = JSON.parse(policyJson!) as PolicySpec[];
const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };
let engine: Engine | undefined;
const limiter = createMeshLimiter({
  policies,
  listen: [`/ip4/127.0.0.1/tcp/${base + i}`],
  bootstrap: Array.from({ length: n }, (_, j) => j)
    .filter((j) => j !== i)
    .map((j) => `/ip4/127.0.0.1/tcp/${base + j}`),
  gossipIntervalMs: 100,
  discoveryIntervalMs: 500,
  logger: quiet,
  engineFactory: (init) => {
    engine = new Engine(init);
    return engine;
  },
});
const send = (m: FromChild): void => {
  if (process.connected) process.send?.(m);
};
process.on('disconnect', () => process.exit(0));

process.on('message', (m: ToChild) => {
  if (m.cmd === 'status') send({ ev: 'status', live: limiter.peers().filter((p) => !p.stale).length });
  else if (m.cmd === 'owner')
    send({ ev: 'owner', key: m.key, owner: engine?.remoteOwner('login', m.key) ?? limiter.peerId });
  else if (m.cmd === 'run') void run(m.ops);
});

async function run(ops: Op[]): Promise<void> {
  const outcomes: Outcome[] = [];
  const pending: Promise<void>[] = [];
  for (const op of ops.slice(0, 100_000)) {
    const wait = op.at - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t0 = performance.now();
    pending.push(
      limiter.checkAsync('login', op.key).then((d) => {
        outcomes.push({
          key: op.key,
          at: op.at,
          doneAt: Date.now(),
          allowed: d.allowed,
          rule: d.rule,
          decidedBy: d.owner?.decidedBy ?? 'none',
          reason: d.owner?.reason,
          owner: d.owner?.id,
          ms: performance.now() - t0,
        });
      }),
    );
  }
  await Promise.all(pending);
  send({ ev: 'done', outcomes, stats: limiter.stats().owner });
}

await limiter.start();
send({ ev: 'ready', peerId: limiter.peerId });
