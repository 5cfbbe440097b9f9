/**
 * Where the host's CPU goes during a run: all cores (/proc/stat), each container (cgroup v1
 * cpuacct or cgroup v2 cpu.stat: every process in it, health checks included), the kernel's
 * interrupt work, and the busiest host processes outside the containers by name (dockerd,
 * containerd-shim, the load driver, anything else running). Linux only; elsewhere the figures
 * are NaN and nothing fails.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

const HZ = 100; // USER_HZ: /proc/*/stat and /proc/stat count in 1/100 s on Linux

/** One reading of the host's CPU counters. */
export interface CpuSample {
  at: number;
  /** /proc/stat jiffies, all cores: busy (not idle or iowait), irq + softirq, total. */
  busy: number;
  irq: number;
  total: number;
  /** CPU seconds per container id (full id). */
  containers: Map<string, number>;
  /** CPU jiffies per host process outside containers: pid -> [comm, jiffies]. */
  procs: Map<number, [string, number]>;
}

function readNum(path: string): number | undefined {
  try {
    const n = Number(readFileSync(path, 'utf8').trim());
    return Number.isFinite(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** A container's CPU seconds so far, from its cgroup (v1 cpuacct, else v2 cpu.stat). */
function containerSeconds(id: string): number | undefined {
  const v1 = readNum(`/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`);
  if (v1 !== undefined) return v1 / 1e9;
  for (const dir of [`/sys/fs/cgroup/system.slice/docker-${id}.scope`, `/sys/fs/cgroup/docker/${id}`]) {
    try {
      const m = /usage_usec (\d+)/.exec(readFileSync(`${dir}/cpu.stat`, 'utf8'));
      if (m) return Number(m[1]) / 1e6;
    } catch {
      // not this layout
    }
  }
  return undefined;
}

function inContainer(pid: string): boolean {
  try {
    return /docker/.test(readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
  } catch {
    return true; // gone: not ours to count
  }
}

/** Reads the counters now; `containerIds` are full container ids. */
export function sampleCpu(containerIds: readonly string[]): CpuSample {
  const s: CpuSample = {
    at: performance.now(),
    busy: Number.NaN,
    irq: Number.NaN,
    total: Number.NaN,
    containers: new Map(),
    procs: new Map(),
  };
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    s.total = f.reduce((a, b) => a + b, 0);
    s.busy = s.total - (f[3] ?? 0) - (f[4] ?? 0);
    s.irq = (f[5] ?? 0) + (f[6] ?? 0);
  } catch {
    return s;
  }
  for (const id of containerIds) {
    const v = containerSeconds(id);
    if (v !== undefined) s.containers.set(id, v);
  }
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return s;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const rest = stat.slice(close + 2).split(' ');
      const jiffies = Number(rest[11]) + Number(rest[12]); // utime + stime
      if (jiffies > 0 && !inContainer(pid)) s.procs.set(Number(pid), [comm, jiffies]);
    } catch {
      // exited between readdir and read
    }
  }
  return s;
}

/** What the host's CPU did between two samples, in % of all cores. */
export interface CpuBreakdown {
  /** % of all cores busy. */
  host_busy_pct: number;
  /** Interrupt and softirq work (network stack), % of all cores. */
  kernel_irq_pct: number;
  /** All containers together, and each, % of ONE core (like top). */
  containers_pct_of_host: number;
  per_container_pct_core: Record<string, number>;
  /** Host processes outside containers by name, % of all cores, busiest first. */
  host_procs_pct_of_host: Record<string, number>;
}

const r1 = (x: number) => Math.round(x * 10) / 10;

/** The breakdown between `a` and `b`; `names` maps container ids to the names to print. */
export function cpuBreakdown(a: CpuSample, b: CpuSample, names: ReadonlyMap<string, string>): CpuBreakdown {
  const cores = cpus().length;
  const wallS = (b.at - a.at) / 1000;
  const dt = b.total - a.total;
  const per: Record<string, number> = {};
  let containers = 0;
  for (const [id, v1] of b.containers) {
    const v0 = a.containers.get(id);
    if (v0 === undefined) continue;
    const pct = ((v1 - v0) / wallS) * 100;
    containers += pct;
    per[names.get(id) ?? id.slice(0, 12)] = r1(pct);
  }
  const byComm = new Map<string, number>();
  for (const [pid, [comm, j1]] of b.procs) {
    const j0 = a.procs.get(pid)?.[1] ?? 0;
    if (j1 > j0) byComm.set(comm, (byComm.get(comm) ?? 0) + (j1 - j0));
  }
  const procs = [...byComm.entries()]
    .map(([comm, j]) => [comm, (j / HZ / wallS / cores) * 100] as const)
    .filter(([, pct]) => pct >= 0.5)
    .sort((x, y) => y[1] - x[1])
    .slice(0, 8);
  return {
    host_busy_pct: r1(((b.busy - a.busy) / Math.max(1, dt)) * 100),
    kernel_irq_pct: r1(((b.irq - a.irq) / Math.max(1, dt)) * 100),
    containers_pct_of_host: r1(containers / cores),
    per_container_pct_core: per,
    host_procs_pct_of_host: Object.fromEntries(procs.map(([c, p]) => [c, r1(p)])),
  };
}

/** One line for the console. */
export function describeCpu(c: CpuBreakdown): string {
  const procs = Object.entries(c.host_procs_pct_of_host)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return (
    `host CPU: ${c.host_busy_pct} % of ${cpus().length} cores busy = containers ${c.containers_pct_of_host} % ` +
    `+ kernel irq ${c.kernel_irq_pct} % + host processes (%, by name): ${procs || 'none over 0.5'}`
  );
}
