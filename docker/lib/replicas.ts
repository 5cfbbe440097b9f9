/** The replicas: inspect, list, wait for the mesh, and the relay the partition drill sends through. */
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HTTP_PORT, PROJECT, sleep } from './config.js';
import { children, docker } from './exec.js';
import { getJson, type PeersBody, type Target } from './http.js';

// ---------------------------------------------------------------- replicas

export interface Replica {
  /** 0-based trace node index (compose container number - 1). */
  index: number;
  id: string;
  /** Full container id (its cgroup's name). */
  fullId: string;
  name: string;
  network: string;
  ip: string;
  pid: number;
  target: Target;
}

export async function inspectReplica(id: string): Promise<Replica> {
  const r = await docker([
    'inspect',
    '-f',
    '{{index .Config.Labels "com.docker.compose.container-number"}} {{.Id}} {{.Name}} {{.State.Pid}} {{range $k, $v := .NetworkSettings.Networks}}{{$k}}={{$v.IPAddress}} {{end}}',
    id,
  ]);
  const [num, fullId, name, pid, ...nets] = r.stdout.trim().split(/\s+/);
  const [network = '', ip = ''] = (nets[0] ?? '').split('=');
  return {
    index: Number(num) - 1,
    id,
    fullId: fullId ?? '',
    name: (name ?? '').replace(/^\//, ''),
    network,
    ip,
    pid: Number(pid),
    target: { host: ip, port: HTTP_PORT },
  };
}

export async function listReplicas(): Promise<Replica[]> {
  const r = await docker([
    'ps',
    '-q',
    '--filter',
    `label=com.docker.compose.project=${PROJECT}`,
    '--filter',
    'label=com.docker.compose.service=node',
  ]);
  const ids = r.stdout.split('\n').filter(Boolean);
  const reps = await Promise.all(ids.map(inspectReplica));
  return reps.sort((a, b) => a.index - b.index);
}

/**
 * Polls every replica's /v1/peers until each has reported N-1 live peers at least once and
 * one round shows all of them at N-1 live together; bounded by `timeoutMs`.
 */
export async function waitForMesh(
  reps: Replica[],
  timeoutMs: number,
  since: number,
): Promise<{
  ok: boolean;
  firstFullMs: number[];
  allTogetherMs: number;
  lastLive: number[];
  answered: boolean[];
}> {
  const want = reps.length - 1;
  const firstFull = reps.map(() => Number.NaN);
  const lastLive = reps.map(() => -1);
  const answered = reps.map(() => false);
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const bodies = await Promise.all(reps.map((r) => getJson<PeersBody>(r.target, '/v1/peers', 1500)));
    const now = performance.now() - since;
    let together = true;
    bodies.forEach((b, i) => {
      lastLive[i] = b?.live ?? -1;
      if (b) answered[i] = true;
      if (b?.live === want) {
        if (Number.isNaN(firstFull[i]!)) firstFull[i] = now;
      } else together = false;
    });
    if (together && firstFull.every((x) => !Number.isNaN(x))) {
      return { ok: true, firstFullMs: firstFull, allTogetherMs: now, lastLive, answered };
    }
    await sleep(200);
  }
  return { ok: false, firstFullMs: firstFull, allTogetherMs: Number.NaN, lastLive, answered };
}

// ---------------------------------------------------------------- relay (partition drill)

export interface Relay {
  socketPath: string;
  child: ChildProcess;
}

/**
 * A TCP relay from a unix socket on the host to 127.0.0.1:8080 inside the replica's network
 * namespace (nsenter -n; the mount namespace stays the host's, so the socket is a host file).
 * It keeps working while the replica is disconnected from the compose network.
 */
export async function startRelay(rep: Replica): Promise<Relay> {
  const socketPath = join(tmpdir(), `ratemesh-relay-${process.pid}-${rep.index}.sock`);
  rmSync(socketPath, { force: true });
  const script = `
    const net = require('node:net');
    const srv = net.createServer((c) => {
      const u = net.connect(${HTTP_PORT}, '127.0.0.1');
      c.on('error', () => u.destroy()); u.on('error', () => c.destroy());
      c.pipe(u).pipe(c);
    });
    srv.listen(process.argv[1], () => console.log('relay ready'));
    process.stdin.on('end', () => process.exit(0)); process.stdin.resume();`;
  const child = spawn('nsenter', ['-t', String(rep.pid), '-n', process.execPath, '-e', script, socketPath], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let err = '';
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const ready = await new Promise<boolean>((res) => {
    const t = setTimeout(() => res(false), 10_000);
    child.stdout?.on('data', (c: Buffer) => {
      if (c.toString().includes('relay ready')) {
        clearTimeout(t);
        res(true);
      }
    });
    child.on('exit', () => {
      clearTimeout(t);
      res(false);
    });
  });
  if (!ready) {
    child.kill('SIGKILL');
    throw new Error(`relay into ${rep.name} did not start: ${err.trim().slice(0, 300)}`);
  }
  return { socketPath, child };
}

export function stopRelay(r: Relay | undefined): void {
  if (!r) return;
  r.child.stdin?.end();
  r.child.kill('SIGTERM');
  rmSync(r.socketPath, { force: true });
}
