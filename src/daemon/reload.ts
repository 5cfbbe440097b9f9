import { readdirSync, statSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { configNames, GRPC_LIMIT_RANGES } from '../envoy/daemon-config.js';
import type { H2Limits } from '../envoy/h2.js';
import { isRateMeshError } from '../errors.js';
import type { PolicySpec } from '../types.js';
import type { DaemonConfig } from './config.js';

/** What a config reload did. */
export interface ReloadOutcome {
  ok: boolean;
  /** What set off the reload. */
  trigger: string;
  /** Unix time (ms) of the reload. */
  at: number;
  /** The policy-set version in force after it (the old one when refused). */
  version: string;
  /** By policy name: kept (same version, counts kept), changed (new version), added, removed. */
  policies?: { kept: string[]; changed: string[]; added: string[]; removed: string[] };
  /** Refused: the file and field at fault, and why. The old config keeps serving. */
  error?: { file: string | undefined; field: string | undefined; message: string };
}

/**
 * Settings that cannot change while the node runs (listen addresses, keys,
 * ports, the mesh's timing). A reload whose config changes one of them is
 * refused whole, naming the field: nothing of it is applied (so what is in
 * force is always exactly one config file's worth), and the operator restarts
 * the node to apply it. Everything else is reloaded: the policies (own and
 * policy file), the Envoy descriptor files and their options, the gRPC
 * response headers and unknown-domain answer, and the log level.
 */
const RESTART_ONLY: readonly [string, (c: DaemonConfig) => unknown][] = [
  ['config.http.host', (c) => c.http.host],
  ['config.http.port', (c) => c.http.port],
  ['config.http.maxBodyBytes', (c) => c.http.maxBodyBytes],
  ['config.http.drainTimeoutMs', (c) => c.http.drainTimeoutMs],
  ['config.http.shutdownDelayMs', (c) => c.http.shutdownDelayMs],
  ['config.http.headersTimeoutMs', (c) => c.http.headersTimeoutMs],
  ['config.http.requestTimeoutMs', (c) => c.http.requestTimeoutMs],
  ['config.mesh.listen', (c) => c.mesh.listen],
  ['config.mesh.bootstrap', (c) => c.mesh.bootstrap],
  ['config.mesh.gossipIntervalMs', (c) => c.mesh.gossipIntervalMs],
  ['config.mesh.expectedDelayMs', (c) => c.mesh.expectedDelayMs],
  ['config.mesh.fastGossipIntervalMs', (c) => c.mesh.fastGossipIntervalMs],
  ['config.mesh.keyFile', (c) => c.mesh.keyFile],
  ['config.mesh.keyFile (its contents)', (c) => c.mesh.privateKey],
  ['config.mesh.pskFile', (c) => c.mesh.pskFile],
  ['config.mesh.pskFile (its contents)', (c) => c.mesh.psk],
  ['config.mesh.insecure', (c) => c.mesh.insecure ?? false],
  ['config.mesh.injectDelayMs', (c) => c.mesh.injectDelayMs],
  ['config.mesh.injectLoss', (c) => c.mesh.injectLoss],
  ['config.mesh.snapshotFile', (c) => c.mesh.snapshotFile],
  ['config.stats.hotKeys', (c) => c.stats.hotKeys],
  ['config.grpc', (c) => c.grpc !== undefined],
  ['config.grpc.host', (c) => c.grpc?.host],
  ['config.grpc.port', (c) => c.grpc?.port],
  ['config.grpc.maxMessageBytes', (c) => c.grpc?.maxMessageBytes],
  ['config.grpc.limitOverrides', (c) => c.grpc?.limitOverrides],
  ['config.grpc.transport', (c) => c.grpc?.transport],
  ['config.grpc.maxConnections', (c) => c.grpc?.maxConnections],
  ['config.grpc.maxConcurrentStreams', (c) => c.grpc?.maxConcurrentStreams],
  ['config.grpc.requestTimeoutMs', (c) => c.grpc?.requestTimeoutMs],
  ...(Object.keys(GRPC_LIMIT_RANGES) as (keyof H2Limits)[]).map(
    (k): [string, (c: DaemonConfig) => unknown] => [`config.grpc.${k}`, (c) => c.grpc?.limits[k]],
  ),
];

/** The first restart-only setting that differs between two configs, or undefined. */
export function restartOnlyChange(old: DaemonConfig, next: DaemonConfig): string | undefined {
  for (const [field, get] of RESTART_ONLY) {
    if (!isDeepStrictEqual(get(old), get(next))) return field;
  }
  return undefined;
}

/** Every policy the limiter runs under a config: its own and its Envoy descriptors'. */
export function limiterPolicies(config: DaemonConfig): PolicySpec[] {
  return config.envoy === undefined ? config.policies : [...config.policies, ...config.envoy.config.policies];
}

/**
 * The files a config was read from, to watch: the config file, the policy file, the Envoy
 * files, and the Envoy folders (a file added to one is a change).
 */
export function configFiles(config: DaemonConfig): string[] {
  const out: string[] = [];
  if (config.configFile !== undefined) out.push(config.configFile);
  if (config.policyFile !== undefined) out.push(config.policyFile);
  for (const f of config.envoy?.files ?? []) out.push(f);
  for (const d of config.envoy?.dirs ?? []) out.push(d);
  return [...new Set(out)];
}

/**
 * A refused reload's error: the field, the reason, and the file it is in. The
 * loader's messages name the policy and Envoy files themselves; a field of the
 * config file (`config.…`) is in `configFile`.
 */
export function reloadError(
  err: unknown,
  configFile: string | undefined,
): { file: string | undefined; field: string | undefined; message: string } {
  if (isRateMeshError(err)) {
    const field = err.field;
    const named =
      /\(in ([^,)]+)/.exec(err.reason)?.[1] ?? /(\/[^\s:]+\.(?:ya?ml|json))/.exec(err.reason)?.[1];
    const file = named ?? (field?.startsWith('config') || field === '--config' ? configFile : undefined);
    return { file, field, message: err.reason };
  }
  return { file: configFile, field: undefined, message: err instanceof Error ? err.message : String(err) };
}

/** How often a watched file's metadata is read, ms (a change takes effect within this + the debounce, under a second). */
export const WATCH_INTERVAL_MS = 250;
/** Changes closer than this are one reload (an editor writes a file in several steps). */
export const WATCH_DEBOUNCE_MS = 100;

/**
 * What identifies a version of a file: its mtime, size and inode ('' when it cannot be read);
 * of a folder, the config files it holds (a file added, removed or renamed there is a change;
 * the files' contents are watched as files).
 */
function stamp(file: string): string {
  try {
    const st = statSync(file);
    if (st.isDirectory()) return `dir:${st.ino}:${configNames(readdirSync(file)).join('/')}`;
    return `${st.mtimeMs}:${st.size}:${st.ino}`;
  } catch {
    return '';
  }
}

/**
 * Watches files by polling their metadata (mtime, size, inode) every
 * `intervalMs`, which also sees a file replaced by a rename (how editors and
 * config management write files) where an inotify watch on the old inode
 * would not. Calls `onChange` once per burst of changes (debounced). `set`
 * replaces the watched files and takes their current state as the baseline.
 * The timer never holds the process open.
 */
export class FileWatcher {
  private stamps = new Map<string, string>();
  private poll: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;

  constructor(
    private readonly onChange: () => void,
    private readonly intervalMs = WATCH_INTERVAL_MS,
  ) {}

  set(files: readonly string[]): void {
    this.stamps = new Map([...new Set(files)].map((f) => [f, stamp(f)]));
    if (this.stamps.size === 0) {
      if (this.poll !== undefined) clearInterval(this.poll);
      this.poll = undefined;
      return;
    }
    if (this.poll === undefined) {
      this.poll = setInterval(() => this.check(), this.intervalMs);
      this.poll.unref();
    }
  }

  /**
   * Take the files' current state as the baseline and drop a pending change:
   * a reload that just read them (SIGHUP) leaves nothing for the watcher to do.
   */
  rebase(): void {
    for (const f of this.stamps.keys()) this.stamps.set(f, stamp(f));
    if (this.debounce !== undefined) clearTimeout(this.debounce);
    this.debounce = undefined;
  }

  private check(): void {
    let changed = false;
    for (const [f, was] of this.stamps) {
      const now = stamp(f);
      if (now !== was) {
        this.stamps.set(f, now);
        changed = true;
      }
    }
    if (!changed) return;
    if (this.debounce !== undefined) clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      this.onChange();
    }, WATCH_DEBOUNCE_MS);
    this.debounce.unref();
  }

  close(): void {
    this.set([]);
    if (this.debounce !== undefined) clearTimeout(this.debounce);
    this.debounce = undefined;
  }
}
