import { type StatsListener, unwatchFile, watchFile } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
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
  ['config.http.headersTimeoutMs', (c) => c.http.headersTimeoutMs],
  ['config.http.requestTimeoutMs', (c) => c.http.requestTimeoutMs],
  ['config.mesh.listen', (c) => c.mesh.listen],
  ['config.mesh.bootstrap', (c) => c.mesh.bootstrap],
  ['config.mesh.gossipIntervalMs', (c) => c.mesh.gossipIntervalMs],
  ['config.mesh.expectedDelayMs', (c) => c.mesh.expectedDelayMs],
  ['config.mesh.keyFile', (c) => c.mesh.keyFile],
  ['config.mesh.keyFile (its contents)', (c) => c.mesh.privateKey],
  ['config.mesh.pskFile', (c) => c.mesh.pskFile],
  ['config.mesh.pskFile (its contents)', (c) => c.mesh.psk],
  ['config.mesh.insecure', (c) => c.mesh.insecure ?? false],
  ['config.mesh.injectDelayMs', (c) => c.mesh.injectDelayMs],
  ['config.mesh.injectLoss', (c) => c.mesh.injectLoss],
  ['config.stats.hotKeys', (c) => c.stats.hotKeys],
  ['config.grpc', (c) => c.grpc !== undefined],
  ['config.grpc.host', (c) => c.grpc?.host],
  ['config.grpc.port', (c) => c.grpc?.port],
  ['config.grpc.maxMessageBytes', (c) => c.grpc?.maxMessageBytes],
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

/** The files a config was read from, to watch: the config file, the policy file, the Envoy files. */
export function configFiles(config: DaemonConfig): string[] {
  const out: string[] = [];
  if (config.configFile !== undefined) out.push(config.configFile);
  if (config.policyFile !== undefined) out.push(config.policyFile);
  for (const f of config.envoy?.files ?? []) out.push(f);
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

/** How often a watched file's metadata is read, ms (a change takes effect within this + the debounce). */
export const WATCH_INTERVAL_MS = 250;
/** Changes closer than this are one reload (an editor writes a file in several steps). */
export const WATCH_DEBOUNCE_MS = 100;

/**
 * Watches files by polling their metadata (mtime, size, inode), which also
 * sees a file replaced by a rename (how editors and config management write
 * files) where an inotify watch on the old inode would not. Calls `onChange`
 * once per burst of changes. `set` replaces the watched files.
 */
export class FileWatcher {
  private files: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly listener: StatsListener = (curr, prev) => {
    if (curr.mtimeMs === prev.mtimeMs && curr.size === prev.size && curr.ino === prev.ino) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.onChange();
    }, WATCH_DEBOUNCE_MS);
    this.timer.unref();
  };

  constructor(
    private readonly onChange: () => void,
    private readonly intervalMs = WATCH_INTERVAL_MS,
  ) {}

  set(files: readonly string[]): void {
    const next = [...new Set(files)];
    for (const f of this.files) if (!next.includes(f)) unwatchFile(f, this.listener);
    for (const f of next)
      if (!this.files.includes(f))
        watchFile(f, { interval: this.intervalMs, persistent: false }, this.listener);
    this.files = next;
  }

  close(): void {
    this.set([]);
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
