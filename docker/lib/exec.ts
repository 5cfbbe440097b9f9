/** Child processes: bounded command runs, docker and compose. */
import { type ChildProcess, spawn } from 'node:child_process';
import { D, G, HERE, IMAGE, PROJECT, ROOT } from './config.js';

/** Children this script started and has not seen exit (killed by pid on the way out). */
export const children = new Set<ChildProcess>();

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command, bounded by `timeoutMs` (then SIGKILL); `inherit` streams its output. */
export function run(
  cmd: string,
  args: string[],
  opts: { timeoutMs: number; cwd?: string; env?: NodeJS.ProcessEnv; inherit?: boolean; check?: boolean },
): Promise<RunResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd ?? ROOT,
      env: opts.env ?? process.env,
      stdio: opts.inherit ? ['ignore', 'inherit', 'inherit'] : ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      if (stdout.length < 1e6) stdout += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      if (stderr.length < 1e6) stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      children.delete(child);
      reject(new Error(`${cmd}: ${err.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      const r = { code: code ?? (signal ? 128 : 1), stdout, stderr };
      if (opts.check !== false && r.code !== 0) {
        const tail = `${stdout}\n${stderr}`.trim().split('\n').slice(-15).join('\n');
        reject(
          new Error(
            `${cmd} ${args.join(' ')} exited ${signal ?? r.code}${signal === 'SIGKILL' ? ` (timeout ${opts.timeoutMs} ms?)` : ''}\n${tail}`,
          ),
        );
      } else resolvePromise(r);
    });
  });
}

export const docker = (args: string[], timeoutMs = 30_000, check = true) =>
  run('docker', args, { timeoutMs, check });

export let composeCmd: string[] = [];
export async function detectCompose(): Promise<void> {
  const v2 = await run('docker', ['compose', 'version'], { timeoutMs: 10_000, check: false }).catch(
    () => undefined,
  );
  composeCmd = v2?.code === 0 ? ['docker', 'compose'] : ['docker-compose'];
}

export const composeEnv: NodeJS.ProcessEnv = {
  ...process.env,
  RATEMESH_IMAGE: IMAGE,
  RATEMESH_GOSSIP_MS: String(G),
  RATEMESH_INJECT_DELAY_MS: String(D),
  RATEMESH_NODE_CONFIG: './tmp/mesh-node.yaml',
  RATEMESH_BUILD_CONTEXT: './tmp/ctx',
  RATEMESH_LOG_LEVEL: 'warn',
};

export function compose(
  args: string[],
  timeoutMs: number,
  inherit = false,
  check = true,
): Promise<RunResult> {
  const [cmd, ...pre] = composeCmd;
  return run(cmd!, [...pre, '-p', PROJECT, '-f', 'compose.yml', ...args], {
    cwd: HERE,
    env: composeEnv,
    timeoutMs,
    inherit,
    check,
  });
}
