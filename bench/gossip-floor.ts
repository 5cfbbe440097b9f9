/**
 * Gossip CPU beside its floor (issue 13, "cheap messages"): the same 8 node
 * processes, message sizes and rates over
 *
 *   floor      bare TCP + node:crypto Ed25519 (key objects reused) + the real engine
 *   gossipsub  the mesh with transport 'gossipsub' (every message signed and verified by gossipsub)
 *   direct     the mesh with transport 'direct' (src/mesh/direct-gossip.ts)
 *   tcp        (only when asked) the floor without signatures: sockets, timers and engine
 *   relay      (only when asked) 'direct' in relay mode, fanout 3: one batch a tick to 3 random
 *              peers, every relayed item origin-signed and verified; in/s/node counts the
 *              messages merged (items), frames read are in the JSON (direct.batchesIn)
 *
 * in one run, phase after phase (variants interleaved round by round, so
 * outside load spreads over all of them). Each phase starts 8 fresh processes
 * on 127.0.0.1, waits until every node sees the 7 others, warms up (V8's
 * compile threads inflate the first ~20 s), then measures CPU
 * (process.cpuUsage in each node: all its threads) and messages.
 * Gossip only: each node calls check() on one key every g ms and gossips
 * every g ms (one message per tick, to every peer).
 *
 *   npm run bench:gossip-floor -- [--rounds 2] [--g 100,1000] [--rounds-slow 1]
 *     [--warmup 20] [--measure 20] [--nodes 8] [--variants floor,gossipsub,direct]
 *     [--prof DIR]   (V8 CPU profiles of every node, --cpu-prof)
 *     [--node-args "--perf-basic-prof ..."]   (extra node flags for the node processes)
 *     [--psk]   (the mesh variants run under a pre-shared key, pnet, as off loopback)
 *     [--out FILE]   (default bench/results/gossip-floor.json)
 *
 * Prints one line per phase and a summary per (g, variant), and writes
 * bench/results/gossip-floor.json. g values after the first get
 * `--rounds-slow` rounds (idle upkeep, cheap to show once).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateKeyPair, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import { generateKey } from '@libp2p/pnet';
import type { PolicySpec } from '../src/types.js';
import type { ChildInit, FromChild, Report, ToChild, Variant } from './gossip-floor-child.js';
import { printTable } from './table.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '..');
const CHILD = join(HERE, 'gossip-floor-child.ts');
const OUT = join(HERE, 'results', 'gossip-floor.json');

/** The seed-trace policy (W = 1 s, k = 50): one key's window makes a 91-byte message. */
const POLICY: PolicySpec = {
  name: 'seed',
  limit: 1000,
  windowMs: 1000,
  buckets: 50,
  overAdmission: 'controlled',
  fallback: true,
};

interface Args {
  rounds: number;
  roundsSlow: number;
  g: number[];
  warmup: number;
  measure: number;
  nodes: number;
  variants: Variant[];
  prof: string | undefined;
  nodeArgs: string[];
  psk: boolean;
  /** Where the JSON goes (default bench/results/gossip-floor.json). */
  out: string;
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    rounds: 2,
    roundsSlow: 1,
    g: [100, 1000],
    warmup: 20,
    measure: 20,
    nodes: 8,
    variants: ['floor', 'gossipsub', 'direct'],
    prof: undefined,
    out: OUT,
    nodeArgs: [],
    psk: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    const num = (): number => {
      const x = Number(v);
      if (!Number.isFinite(x) || x <= 0) throw new Error(`${k} needs a positive number`);
      i++;
      return x;
    };
    if (k === '--rounds') a.rounds = Math.min(10, Math.round(num()));
    else if (k === '--rounds-slow') a.roundsSlow = Math.min(10, Math.round(num()));
    else if (k === '--warmup') a.warmup = num();
    else if (k === '--measure') a.measure = num();
    else if (k === '--nodes') a.nodes = Math.min(16, Math.max(2, Math.round(num())));
    else if (k === '--g') {
      a.g = String(v)
        .split(',')
        .map(Number)
        .filter((x) => Number.isFinite(x) && x >= 10);
      i++;
    } else if (k === '--variants') {
      a.variants = String(v)
        .split(',')
        .filter(
          (x): x is Variant =>
            x === 'floor' || x === 'tcp' || x === 'gossipsub' || x === 'direct' || x === 'relay',
        );
      i++;
    } else if (k === '--psk') a.psk = true;
    else if (k === '--node-args') {
      a.nodeArgs = String(v).split(' ').filter(Boolean);
      i++;
    } else if (k === '--out') {
      a.out = resolve(String(v));
      i++;
    } else if (k === '--prof') {
      a.prof = resolve(String(v));
      i++;
    } else throw new Error(`unknown argument ${k}`);
  }
  if (a.g.length === 0 || a.variants.length === 0) throw new Error('nothing to run');
  return a;
}

// ---- children: every one killed on the way out ----

const live = new Set<ChildProcess>();
function killAll(): void {
  for (const c of live) {
    try {
      c.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
  live.clear();
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(sig, () => {
    killAll();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function within<T>(what: string, ms: number, p: Promise<T>): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, rej) => {
    t = setTimeout(() => rej(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

class Child {
  readonly proc: ChildProcess;
  private waiters: Array<{ ev: FromChild['ev']; res: (m: FromChild) => void; rej: (e: Error) => void }> = [];
  exited = false;

  constructor(
    readonly index: number,
    prof: string | undefined,
    nodeArgs: string[],
  ) {
    const args = [...nodeArgs, ...(prof === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', prof])];
    this.proc = spawn(process.execPath, [...args, '--import', 'tsx', CHILD], {
      cwd: ROOT,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    live.add(this.proc);
    this.proc.on('message', (m: FromChild) => {
      if (m.ev === 'fatal') {
        for (const w of this.waiters) w.rej(new Error(`node ${index}: ${m.message}`));
        this.waiters = [];
        return;
      }
      const i = this.waiters.findIndex((w) => w.ev === m.ev);
      if (i >= 0) this.waiters.splice(i, 1)[0]!.res(m);
    });
    this.proc.on('exit', (code, signal) => {
      this.exited = true;
      live.delete(this.proc);
      for (const w of this.waiters) w.rej(new Error(`node ${index} exited (${signal ?? code})`));
      this.waiters = [];
    });
  }

  ask<E extends FromChild['ev']>(m: ToChild, ev: E, ms: number): Promise<Extract<FromChild, { ev: E }>> {
    const p = new Promise<FromChild>((res, rej) => {
      this.waiters.push({ ev, res, rej });
    });
    if (this.proc.connected) this.proc.send(m);
    return within(`node ${this.index} ${m.op}`, ms, p) as Promise<Extract<FromChild, { ev: E }>>;
  }

  /** Asks for a clean exit (so --cpu-prof writes its profile), SIGKILL after 5 s. */
  async stop(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise<void>((r) => this.proc.once('exit', () => r()));
    if (this.proc.connected) this.proc.send({ op: 'stop' } satisfies ToChild);
    await Promise.race([gone, sleep(5_000)]);
    if (!this.exited) this.proc.kill('SIGKILL');
    await Promise.race([gone, sleep(2_000)]);
  }
}

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Server>((res, rej) => {
          const s = createServer();
          s.once('error', rej);
          s.listen(0, '127.0.0.1', () => res(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

/** Busy and total jiffies of the whole machine (/proc/stat), to see load from outside the bench. */
function machineJiffies(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((s, x) => s + x, 0);
  const idle = f[3]! + f[4]!;
  return { busy: total - idle, total };
}

interface Phase {
  variant: Variant;
  g: number;
  round: number;
  /** Per node: % of one core. */
  cpuPct: number[];
  msgsInPerS: number[];
  msgsOutPerS: number[];
  bytesPerMsg: number;
  /** CPU per received message, all in (node CPU / messages received), µs. */
  usPerMsgIn: number;
  /** Sum over the nodes, % of one core. */
  totalPct: number;
  /** The machine's busy cores during the measurement minus the bench's nodes (other work). */
  otherCores: number;
  load: { before: number[]; after: number[] };
  /** Live peers per node when the phase started, when some node did not hear every other ('' when all did). */
  notLive: string;
  /** Counters summed over the nodes, measured interval only: drops, rejections, the transport's counters. */
  counters: Record<string, number>;
  details: object[];
}

/** Sums the nodes' counter growth by name. */
function sumCounters(details: object[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const d of details)
    for (const [k, v] of Object.entries(d)) if (typeof v === 'number') out[k] = (out[k] ?? 0) + v;
  return out;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
const f1 = (x: number): string => x.toFixed(1);
const f2 = (x: number): string => x.toFixed(2);
const la = (l: number[]): string => l.map((x) => x.toFixed(2)).join(' ');

async function runPhase(a: Args, variant: Variant, g: number, round: number): Promise<Phase> {
  const n = a.nodes;
  const keys = await Promise.all(
    Array.from({ length: n }, async () =>
      Buffer.from(privateKeyToProtobuf(await generateKeyPair('Ed25519'))).toString('hex'),
    ),
  );
  const ports = await freePorts(n);
  let psk: string | undefined;
  if (a.psk) {
    const k = new Uint8Array(95);
    generateKey(k);
    psk = Buffer.from(k).toString('hex');
  }
  const before = loadavg();
  const children = Array.from({ length: n }, (_, i) => new Child(i, a.prof, a.nodeArgs));
  try {
    await Promise.all(
      children.map((c, i) => {
        const init: ChildInit = { variant, index: i, g, keys, ports, policy: POLICY, key: 'k', psk };
        return c.ask({ op: 'init', init }, 'started', 60_000);
      }),
    );
    // every node hears the n - 1 others (bounded); after 60 s, knowing them is enough (a peer can
    // stay stale while its messages flow: the engine's clock-offset check), and the phase says so
    const deadline = Date.now() + 60_000;
    let notLive = '';
    for (;;) {
      const st = await Promise.all(children.map((c) => c.ask({ op: 'status' }, 'status', 10_000)));
      if (st.every((s) => s.peers >= n - 1)) break;
      if (Date.now() > deadline) {
        if (st.every((s) => s.known >= n - 1)) {
          notLive = st.map((s) => s.peers).join(',');
          console.error(
            `${variant} g=${g} round ${round}: live peers per node ${notLive} (all known); measuring anyway`,
          );
          for (const [i, s] of st.entries())
            if (s.peers < n - 1) console.error(`  node ${i}: ${JSON.stringify(s.detail)}`);
          break;
        }
        for (const [i, s] of st.entries())
          if (s.known < n - 1) console.error(`node ${i} knows ${s.known}: ${JSON.stringify(s.detail)}`);
        throw new Error(`${variant} g=${g}: peers known ${st.map((s) => s.known).join(',')} after 60 s`);
      }
      await sleep(250);
    }
    await sleep(a.warmup * 1000);
    const j0 = machineJiffies();
    await Promise.all(children.map((c) => c.ask({ op: 'mark' }, 'marked', 10_000)));
    await sleep(a.measure * 1000);
    const reports: Report[] = (
      await Promise.all(children.map((c) => c.ask({ op: 'report' }, 'report', 10_000)))
    ).map((r) => r.report);
    const j1 = machineJiffies();
    const cpuPct = reports.map((r) => ((r.cpuUserUs + r.cpuSystemUs) / 1000 / r.wallMs) * 100);
    const msgsInPerS = reports.map((r) => r.msgsIn / (r.wallMs / 1000));
    const msgsOutPerS = reports.map((r) => r.msgsOut / (r.wallMs / 1000));
    const cpuUs = reports.reduce((s, r) => s + r.cpuUserUs + r.cpuSystemUs, 0);
    const msgsIn = reports.reduce((s, r) => s + r.msgsIn, 0);
    const msgsOut = reports.reduce((s, r) => s + r.msgsOut, 0);
    const bytesOut = reports.reduce((s, r) => s + r.bytesOut, 0);
    const totalPct = cpuPct.reduce((s, x) => s + x, 0);
    const machineCores = ((j1.busy - j0.busy) / (j1.total - j0.total)) * cpus().length;
    return {
      variant,
      g,
      round,
      cpuPct,
      msgsInPerS,
      msgsOutPerS,
      bytesPerMsg: msgsOut > 0 ? bytesOut / msgsOut : 0,
      usPerMsgIn: msgsIn > 0 ? cpuUs / msgsIn : Number.NaN,
      totalPct,
      otherCores: Math.max(0, machineCores - totalPct / 100),
      load: { before, after: loadavg() },
      notLive,
      counters: sumCounters(reports.map((r) => r.detail)),
      details: reports.map((r) => r.detail),
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    killAll();
  }
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const loadStart = loadavg();
  console.log(
    `gossip floor: ${a.nodes} node processes per phase on 127.0.0.1, ${cpus().length} cores, ` +
      `g = ${a.g.join(', ')} ms, variants ${a.variants.join(', ')}, warm-up ${a.warmup} s, measured ${a.measure} s; ` +
      `rounds ${a.rounds} (g = ${a.g[0]}), ${a.roundsSlow} (other g)${a.psk ? ', mesh under a psk' : ''}; ` +
      `load average ${la(loadStart)}`,
  );
  if (a.prof !== undefined) mkdirSync(a.prof, { recursive: true });
  const phases: Phase[] = [];
  const header = [
    'g ms',
    'round',
    'variant',
    'cpu/node % (median)',
    'min-max',
    'in/s/node',
    'out/s/node',
    'B/msg',
    'µs/msg in',
    'total % (of 1 core)',
    'others (cores)',
    'load 1m',
  ];
  const phaseRow = (p: Phase): (string | number)[] => [
    p.g,
    p.round,
    p.variant,
    f2(median(p.cpuPct)),
    `${f2(Math.min(...p.cpuPct))}-${f2(Math.max(...p.cpuPct))}`,
    f1(mean(p.msgsInPerS)),
    f1(mean(p.msgsOutPerS)),
    Math.round(p.bytesPerMsg),
    Math.round(p.usPerMsgIn),
    f1(p.totalPct),
    f2(p.otherCores),
    `${f2(p.load.before[0]!)}→${f2(p.load.after[0]!)}`,
  ];
  for (const [gi, g] of a.g.entries()) {
    const rounds = gi === 0 ? a.rounds : a.roundsSlow;
    for (let r = 1; r <= rounds; r++) {
      for (const v of a.variants) {
        const p = await runPhase(a, v, g, r);
        phases.push(p);
        printTable(header, [phaseRow(p)]);
      }
    }
  }
  const loadEnd = loadavg();

  // summary: per (g, variant), medians over rounds; ratio to the floor of the same round
  console.log('');
  console.log(`summary (median over rounds; ratio = the variant's CPU per node / the floor's, same round)`);
  const sumHeader = [
    'g ms',
    'variant',
    'cpu/node %',
    'rounds',
    'µs/msg in',
    'in/s/node',
    'out/s/node',
    'total % of 1 core',
    '% of the 2 cores',
    'x floor',
    'x floor per round',
  ];
  const rows: (string | number)[][] = [];
  const summary: object[] = [];
  for (const g of a.g) {
    for (const v of a.variants) {
      const ps = phases.filter((p) => p.g === g && p.variant === v);
      if (ps.length === 0) continue;
      const perNode = ps.map((p) => median(p.cpuPct));
      const ratios = ps
        .map((p) => {
          const fl = phases.find((q) => q.g === g && q.round === p.round && q.variant === 'floor');
          return fl === undefined ? Number.NaN : median(p.cpuPct) / median(fl.cpuPct);
        })
        .filter((x) => Number.isFinite(x));
      const total = median(ps.map((p) => p.totalPct));
      const s = {
        g,
        variant: v,
        cpuPerNodePct: median(perNode),
        cpuPerNodePctRounds: perNode,
        usPerMsgIn: median(ps.map((p) => p.usPerMsgIn)),
        msgsInPerSPerNode: median(ps.map((p) => mean(p.msgsInPerS))),
        msgsOutPerSPerNode: median(ps.map((p) => mean(p.msgsOutPerS))),
        totalPctOfOneCore: total,
        pctOfAllCores: total / cpus().length,
        ratioToFloor: ratios.length > 0 ? median(ratios) : null,
        ratioToFloorRounds: ratios,
      };
      summary.push(s);
      rows.push([
        g,
        v,
        f2(s.cpuPerNodePct),
        perNode.map(f2).join(' '),
        Math.round(s.usPerMsgIn),
        f1(s.msgsInPerSPerNode),
        f1(s.msgsOutPerSPerNode),
        f1(total),
        f1(s.pctOfAllCores),
        s.ratioToFloor === null ? '-' : f2(s.ratioToFloor),
        ratios.map(f2).join(' '),
      ]);
    }
  }
  printTable(sumHeader, rows);
  console.log(`load average: before ${la(loadStart)}, after ${la(loadEnd)}`);

  mkdirSync(dirname(a.out), { recursive: true });
  writeFileSync(
    a.out,
    `${JSON.stringify(
      {
        bench: 'gossip-floor',
        psk: a.psk,
        nodes: a.nodes,
        cores: cpus().length,
        node: process.version,
        policy: POLICY,
        warmupS: a.warmup,
        measureS: a.measure,
        load: { before: loadStart, after: loadEnd },
        summary,
        phases: phases.map((p) => ({ ...p, details: undefined })),
      },
      null,
      2,
    )}\n`,
  );
  console.log(`wrote ${a.out}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    killAll();
    process.exit(1);
  },
);
