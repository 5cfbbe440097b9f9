import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type EnvoyDaemonConfig,
  type GrpcDaemonConfig,
  type ListDir,
  parseEnvoySection,
  parseGrpcSection,
} from '../envoy/daemon-config.js';
import { GRPC_TRANSPORTS } from '../envoy/grpc-transport.js';
import { ErrorCodes, RateMeshError } from '../errors.js';
import type { PolicySpec } from '../types.js';
import {
  boolean,
  fail,
  finite,
  integer,
  numberText,
  objectOf,
  oneOf,
  shown,
  string,
  stringArray,
} from '../validate.js';
import {
  checkPolicies,
  loadPolicyFile,
  parseFile,
  readCapped,
  readPrivateKey,
  readPsk,
} from './config-files.js';

/** pino's level names, plus `silent`. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Defaults of the daemon's own settings (the mesh's defaults live with the mesh limiter). */
export const DAEMON_DEFAULTS = {
  httpHost: '127.0.0.1',
  httpPort: 8080,
  /** Largest `POST /v1/check` body, bytes. */
  maxBodyBytes: 16 * 1024,
  /** How long SIGTERM waits for in-flight requests before closing their sockets, ms. */
  drainTimeoutMs: 10_000,
  /**
   * How long SIGTERM keeps serving with `/readyz` failing before the listener closes, ms:
   * the time a load balancer (Kubernetes endpoints) takes to stop routing here. 0: close at once.
   */
  shutdownDelayMs: 0,
  /** A client must send its request headers within this, ms (else 408 and the socket closes). */
  headersTimeoutMs: 5_000,
  /** ... and its whole request within this, ms (else 408). */
  requestTimeoutMs: 10_000,
  /** Keys tracked by the hottest-keys table of `GET /v1/stats`. */
  hotKeys: 128,
  logLevel: 'info' as LogLevel,
} as const;

export { MAX_CONFIG_BYTES } from './config-files.js';

const MAX_ADDRS = 256;

/** The daemon's validated configuration; every field filled or deliberately absent. */
export interface DaemonConfig {
  /** The config file read, absolute; undefined when none was given. */
  configFile: string | undefined;
  /** The policy file read (`policyFile` or `--policy-file`), absolute; undefined when none. */
  policyFile?: string | undefined;
  http: {
    host: string;
    port: number;
    maxBodyBytes: number;
    drainTimeoutMs: number;
    /** Absent: DAEMON_DEFAULTS.shutdownDelayMs. */
    shutdownDelayMs?: number;
    /** Absent: DAEMON_DEFAULTS.headersTimeoutMs. */
    headersTimeoutMs?: number;
    /** Absent: DAEMON_DEFAULTS.requestTimeoutMs. */
    requestTimeoutMs?: number;
  };
  mesh: {
    /** libp2p listen multiaddrs; the mesh limiter's default when absent. */
    listen: string[] | undefined;
    bootstrap: string[];
    gossipIntervalMs: number | undefined;
    expectedDelayMs: number | undefined;
    /** The tick interval while a key is tight: 'auto', 0 (off) or ms (MeshOptions.fastGossipIntervalMs). */
    fastGossipIntervalMs?: number | 'auto';
    /** Absolute path of a protobuf-encoded libp2p private key (`ratemesh keygen`). */
    keyFile: string | undefined;
    /** Absolute path of a libp2p pnet swarm key (`ratemesh psk`). */
    pskFile: string | undefined;
    injectDelayMs: number | undefined;
    injectLoss: number | undefined;
    /** Contents of keyFile, checked to decode as a libp2p private key. */
    privateKey: Uint8Array | undefined;
    /** Contents of pskFile, checked to be a pnet v1 swarm key. */
    psk: Uint8Array | undefined;
    /** Run without a psk on non-loopback addresses (logged as a warning); absent: false. */
    insecure?: boolean;
    /** Absolute path of the windows' snapshot (written on stop, restored at start); absent: off. */
    snapshotFile?: string;
  };
  log: { level: LogLevel };
  stats: { hotKeys: number };
  /** Validated by the policy compiler at load time, so a bad policy never fails later. */
  policies: PolicySpec[];
  /** envoyproxy/ratelimit descriptor config files (`envoy`); their policies are added to `policies` for the limiter. */
  envoy?: EnvoyDaemonConfig | undefined;
  /** The Envoy RLS v3 gRPC server (`grpc`); off when absent. */
  grpc?: GrpcDaemonConfig | undefined;
}

/**
 * Command-line flags of `ratemesh node`, each with its environment fallback.
 * Precedence: flag, then environment variable, then config file, then default.
 */
export const NODE_FLAGS = {
  config: { env: 'RATEMESH_CONFIG', arg: '<file>', help: 'YAML or JSON config file' },
  listen: {
    env: 'RATEMESH_LISTEN',
    arg: '<multiaddr>',
    help: 'libp2p listen address (repeatable, or a comma list)',
  },
  bootstrap: {
    env: 'RATEMESH_BOOTSTRAP',
    arg: '<addr>',
    help: 'peer multiaddr or dns:<name>:<port> (repeatable, or a comma list)',
  },
  http: { env: 'RATEMESH_HTTP', arg: '<host:port>', help: 'check API address; port 0 picks a free port' },
  'gossip-ms': { env: 'RATEMESH_GOSSIP_MS', arg: '<ms>', help: 'gossip interval' },
  'policy-file': { env: 'RATEMESH_POLICY_FILE', arg: '<file>', help: 'YAML or JSON list of policies' },
  'log-level': { env: 'RATEMESH_LOG_LEVEL', arg: '<level>', help: LOG_LEVELS.join('|') },
  'key-file': { env: 'RATEMESH_KEY_FILE', arg: '<file>', help: 'libp2p private key (ratemesh keygen)' },
  'psk-file': { env: 'RATEMESH_PSK_FILE', arg: '<file>', help: 'pnet swarm key (ratemesh psk)' },
  'snapshot-file': {
    env: 'RATEMESH_SNAPSHOT_FILE',
    arg: '<file>',
    help: "keep this node's windows across restarts (a lone node's limits survive one)",
  },
  insecure: {
    env: 'RATEMESH_INSECURE',
    arg: '<true|false>',
    help: 'run on non-loopback addresses without a psk (anyone who reaches the port can join)',
  },
  'shutdown-delay-ms': {
    env: 'RATEMESH_SHUTDOWN_DELAY_MS',
    arg: '<ms>',
    help: 'on SIGTERM, serve this long with /readyz failing before closing (Kubernetes: 5000)',
  },
  'drain-timeout-ms': {
    env: 'RATEMESH_DRAIN_TIMEOUT_MS',
    arg: '<ms>',
    help: 'on SIGTERM, wait this long for in-flight requests before closing their connections',
  },
  'grpc-transport': {
    env: 'RATEMESH_GRPC_TRANSPORT',
    arg: '<transport>',
    help: "the Envoy RLS server's HTTP/2 (grpc.transport): ratemesh (its own) or node:http2 (the fallback)",
  },
  'inject-delay-ms': {
    env: 'RATEMESH_INJECT_DELAY_MS',
    arg: '<ms>',
    help: 'EXPERIMENTS ONLY: hold received gossip this long',
  },
  'inject-loss': {
    env: 'RATEMESH_INJECT_LOSS',
    arg: '<0..1>',
    help: 'EXPERIMENTS ONLY: drop this fraction of received gossip',
  },
} as const;
type FlagName = keyof typeof NODE_FLAGS;
const REPEATABLE: readonly FlagName[] = ['listen', 'bootstrap'];

/** Where the loader reads from; injectable for tests. */
export interface ConfigSources {
  argv: readonly string[];
  env?: Readonly<Record<string, string | undefined>>;
  cwd?: string;
  readFile?: (path: string) => Buffer;
  /** Lists a folder named in `envoy.files` (undefined when not a folder). */
  listDir?: ListDir;
}

/** The flags of `ratemesh node` as given (strings), plus `help`. Throws CONFIG_INVALID naming a bad flag. */
export function parseNodeArgs(argv: readonly string[]): {
  help: boolean;
  values: Partial<Record<FlagName, string[]>>;
} {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const name of Object.keys(NODE_FLAGS)) options[name] = { type: 'string', multiple: true };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false });
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    throw new RateMeshError(ErrorCodes.CONFIG_INVALID, `${msg} (see ratemesh node --help)`, 'argv');
  }
  const values: Partial<Record<FlagName, string[]>> = {};
  for (const name of Object.keys(NODE_FLAGS) as FlagName[]) {
    const v = parsed.values[name];
    if (v === undefined) continue;
    const list = (v as string[]).flatMap((s) => (REPEATABLE.includes(name) ? splitList(s) : [s]));
    if (!REPEATABLE.includes(name) && list.length > 1) {
      throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'given more than once', `--${name}`);
    }
    values[name] = list;
  }
  return { help: parsed.values.help === true, values };
}

function splitList(s: string): string[] {
  return s
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
}

/**
 * Loads the daemon configuration: the config file (`--config` or
 * `RATEMESH_CONFIG`; optional when policies come from `--policy-file`), then
 * environment variables, then flags, each layer overriding the one before.
 * Everything is validated; the first problem throws a RateMeshError
 * (`ERR_CONFIG_INVALID`, or the policy compiler's code) whose field names
 * where it came from: `config.http.port`, `--http`, `RATEMESH_GOSSIP_MS`,
 * `config.policies[1].limit`.
 */
export function loadConfig(src: ConfigSources): DaemonConfig {
  const env = src.env ?? {};
  const cwd = src.cwd ?? process.cwd();
  const read = src.readFile ?? readCapped;
  const { values } = parseNodeArgs(src.argv);

  /** The flag's value, else the environment's, with the name to blame. */
  const pick = (name: FlagName): { value: string[]; path: string } | undefined => {
    const flag = values[name];
    if (flag !== undefined) return { value: flag, path: `--${name}` };
    const envName = NODE_FLAGS[name].env;
    const e = env[envName];
    if (e !== undefined && e.trim() !== '') {
      return { value: REPEATABLE.includes(name) ? splitList(e) : [e.trim()], path: envName };
    }
    return undefined;
  };

  const cfg: DaemonConfig = {
    configFile: undefined,
    http: {
      host: DAEMON_DEFAULTS.httpHost,
      port: DAEMON_DEFAULTS.httpPort,
      maxBodyBytes: DAEMON_DEFAULTS.maxBodyBytes,
      drainTimeoutMs: DAEMON_DEFAULTS.drainTimeoutMs,
    },
    mesh: {
      listen: undefined,
      bootstrap: [],
      gossipIntervalMs: undefined,
      expectedDelayMs: undefined,
      keyFile: undefined,
      pskFile: undefined,
      injectDelayMs: undefined,
      injectLoss: undefined,
      privateKey: undefined,
      psk: undefined,
    },
    log: { level: DAEMON_DEFAULTS.logLevel },
    stats: { hotKeys: DAEMON_DEFAULTS.hotKeys },
    policies: [],
  };

  const configArg = pick('config');
  let policiesFromFile = false;
  const keySource = { key: 'config.mesh.keyFile', psk: 'config.mesh.pskFile' };
  if (configArg !== undefined) {
    const file = resolve(cwd, configArg.value[0] ?? '');
    cfg.configFile = file;
    const raw = parseFile(read, file, configArg.path);
    policiesFromFile = applyConfigFile(cfg, raw, dirname(file), read, src.listDir);
  }

  // Environment and flags: each value validated under its own name.
  const listen = pick('listen');
  if (listen) cfg.mesh.listen = stringArray(listen.value, listen.path, MAX_ADDRS);
  const bootstrap = pick('bootstrap');
  if (bootstrap) cfg.mesh.bootstrap = stringArray(bootstrap.value, bootstrap.path, MAX_ADDRS);
  const http = pick('http');
  if (http) Object.assign(cfg.http, parseHostPort(http.value[0] ?? '', http.path));
  const gossip = pick('gossip-ms');
  if (gossip)
    cfg.mesh.gossipIntervalMs = gossipMs(numberText(gossip.value[0] ?? '', gossip.path), gossip.path);
  const level = pick('log-level');
  if (level) cfg.log.level = oneOf(level.value[0], level.path, LOG_LEVELS);
  const keyFile = pick('key-file');
  if (keyFile) {
    cfg.mesh.keyFile = resolve(cwd, string(keyFile.value[0], keyFile.path));
    keySource.key = keyFile.path;
  }
  const pskFile = pick('psk-file');
  if (pskFile) {
    cfg.mesh.pskFile = resolve(cwd, string(pskFile.value[0], pskFile.path));
    keySource.psk = pskFile.path;
  }
  const snapshotFile = pick('snapshot-file');
  if (snapshotFile) cfg.mesh.snapshotFile = resolve(cwd, string(snapshotFile.value[0], snapshotFile.path));
  const insecure = pick('insecure');
  if (insecure) cfg.mesh.insecure = oneOf(insecure.value[0], insecure.path, ['true', 'false']) === 'true';
  const shutdownDelay = pick('shutdown-delay-ms');
  if (shutdownDelay)
    cfg.http.shutdownDelayMs = integer(
      numberText(shutdownDelay.value[0] ?? '', shutdownDelay.path),
      shutdownDelay.path,
      0,
      600_000,
    );
  const drainTimeout = pick('drain-timeout-ms');
  if (drainTimeout)
    cfg.http.drainTimeoutMs = integer(
      numberText(drainTimeout.value[0] ?? '', drainTimeout.path),
      drainTimeout.path,
      0,
      600_000,
    );
  const transport = pick('grpc-transport');
  if (transport) {
    const t = oneOf(transport.value[0], transport.path, GRPC_TRANSPORTS);
    if (cfg.grpc !== undefined) cfg.grpc.transport = t;
    else if (transport.path === '--grpc-transport')
      fail(transport.path, 'needs the Envoy RLS server: a grpc section in the config file');
  }
  const delay = pick('inject-delay-ms');
  if (delay) cfg.mesh.injectDelayMs = injectDelay(numberText(delay.value[0] ?? '', delay.path), delay.path);
  const loss = pick('inject-loss');
  if (loss) cfg.mesh.injectLoss = injectLoss(numberText(loss.value[0] ?? '', loss.path), loss.path);
  const policyFile = pick('policy-file');
  if (policyFile) {
    const file = resolve(cwd, string(policyFile.value[0], policyFile.path));
    cfg.policies = loadPolicyFile(read, file, policyFile.path);
    cfg.policyFile = file;
    policiesFromFile = true;
  }

  if (cfg.mesh.keyFile !== undefined)
    cfg.mesh.privateKey = readPrivateKey(read, cfg.mesh.keyFile, keySource.key);
  if (cfg.mesh.pskFile !== undefined) cfg.mesh.psk = readPsk(read, cfg.mesh.pskFile, keySource.psk);

  if (cfg.envoy !== undefined) checkEnvoyPolicies(cfg, cfg.envoy);
  if (!policiesFromFile && cfg.envoy === undefined) {
    throw new RateMeshError(
      ErrorCodes.CONFIG_INVALID,
      configArg === undefined
        ? 'no policies: give --config <file> with a `policies` list, or --policy-file <file>'
        : 'no policies: the config file needs a `policies` list or a `policyFile`, or give --policy-file',
      configArg === undefined ? '--config' : 'config.policies',
    );
  }
  return cfg;
}

const TOP_FIELDS = ['http', 'mesh', 'log', 'stats', 'policies', 'policyFile', 'envoy', 'grpc'] as const;
/** The fields of `http` a config file takes (each restart-only: src/daemon/reload.ts). */
export const HTTP_FIELDS = [
  'host',
  'port',
  'maxBodyBytes',
  'drainTimeoutMs',
  'shutdownDelayMs',
  'headersTimeoutMs',
  'requestTimeoutMs',
] as const;
/** The fields of `mesh` a config file takes (each restart-only: src/daemon/reload.ts). */
export const MESH_FIELDS = [
  'listen',
  'bootstrap',
  'gossipIntervalMs',
  'expectedDelayMs',
  'fastGossipIntervalMs',
  'keyFile',
  'pskFile',
  'injectDelayMs',
  'injectLoss',
  'insecure',
  'snapshotFile',
] as const;

/** Validates the parsed config file into `cfg`; returns whether it supplied policies. */
function applyConfigFile(
  cfg: DaemonConfig,
  raw: unknown,
  baseDir: string,
  read: (p: string) => Buffer,
  listDir?: ListDir,
): boolean {
  const top = objectOf(raw ?? {}, 'config', TOP_FIELDS);
  if (top.envoy !== undefined) cfg.envoy = parseEnvoySection(top.envoy, baseDir, read, listDir);
  if (top.grpc !== undefined) cfg.grpc = parseGrpcSection(top.grpc);
  if (cfg.grpc !== undefined && cfg.envoy === undefined) {
    fail(
      'config.grpc',
      'the Envoy RLS server needs descriptors: add envoy.files (envoyproxy/ratelimit config files)',
    );
  }
  if (cfg.envoy !== undefined && cfg.grpc === undefined) {
    fail('config.envoy', 'envoy descriptors are served over gRPC only: add grpc.port');
  }
  if (top.http !== undefined) {
    const h = objectOf(top.http, 'config.http', HTTP_FIELDS);
    if (h.host !== undefined) cfg.http.host = host(h.host, 'config.http.host');
    if (h.port !== undefined) cfg.http.port = integer(h.port, 'config.http.port', 0, 65535);
    if (h.maxBodyBytes !== undefined) {
      cfg.http.maxBodyBytes = integer(h.maxBodyBytes, 'config.http.maxBodyBytes', 256, 1024 * 1024);
    }
    if (h.drainTimeoutMs !== undefined) {
      cfg.http.drainTimeoutMs = integer(h.drainTimeoutMs, 'config.http.drainTimeoutMs', 0, 600_000);
    }
    if (h.shutdownDelayMs !== undefined) {
      cfg.http.shutdownDelayMs = integer(h.shutdownDelayMs, 'config.http.shutdownDelayMs', 0, 600_000);
    }
    if (h.headersTimeoutMs !== undefined) {
      cfg.http.headersTimeoutMs = integer(h.headersTimeoutMs, 'config.http.headersTimeoutMs', 100, 600_000);
    }
    if (h.requestTimeoutMs !== undefined) {
      cfg.http.requestTimeoutMs = integer(h.requestTimeoutMs, 'config.http.requestTimeoutMs', 100, 600_000);
    }
    const headersMs = cfg.http.headersTimeoutMs ?? DAEMON_DEFAULTS.headersTimeoutMs;
    const requestMs = cfg.http.requestTimeoutMs ?? DAEMON_DEFAULTS.requestTimeoutMs;
    if (requestMs < headersMs)
      fail(
        'config.http.requestTimeoutMs',
        `must be at least headersTimeoutMs (${headersMs}) (got ${requestMs})`,
      );
  }
  if (top.mesh !== undefined) {
    const m = objectOf(top.mesh, 'config.mesh', MESH_FIELDS);
    if (m.listen !== undefined) cfg.mesh.listen = stringArray(m.listen, 'config.mesh.listen', MAX_ADDRS);
    if (m.insecure !== undefined) cfg.mesh.insecure = boolean(m.insecure, 'config.mesh.insecure');
    if (m.snapshotFile !== undefined)
      cfg.mesh.snapshotFile = resolve(baseDir, string(m.snapshotFile, 'config.mesh.snapshotFile'));
    if (m.bootstrap !== undefined) {
      cfg.mesh.bootstrap = stringArray(m.bootstrap, 'config.mesh.bootstrap', MAX_ADDRS);
    }
    if (m.gossipIntervalMs !== undefined) {
      cfg.mesh.gossipIntervalMs = gossipMs(m.gossipIntervalMs, 'config.mesh.gossipIntervalMs');
    }
    if (m.expectedDelayMs !== undefined) {
      cfg.mesh.expectedDelayMs = integer(m.expectedDelayMs, 'config.mesh.expectedDelayMs', 0, 60_000);
    }
    if (m.fastGossipIntervalMs !== undefined) {
      // 'auto', 0 or whole ms; the mesh checks it against gossipIntervalMs
      const f = m.fastGossipIntervalMs;
      if (f !== 'auto' && !(typeof f === 'number' && Number.isInteger(f) && f >= 0 && f <= 60_000))
        fail('config.mesh.fastGossipIntervalMs', `must be 'auto' or whole ms 0..60000 (got ${shown(f)})`);
      cfg.mesh.fastGossipIntervalMs = f;
    }
    if (m.keyFile !== undefined)
      cfg.mesh.keyFile = resolve(baseDir, string(m.keyFile, 'config.mesh.keyFile'));
    if (m.pskFile !== undefined)
      cfg.mesh.pskFile = resolve(baseDir, string(m.pskFile, 'config.mesh.pskFile'));
    if (m.injectDelayMs !== undefined) {
      cfg.mesh.injectDelayMs = injectDelay(m.injectDelayMs, 'config.mesh.injectDelayMs');
    }
    if (m.injectLoss !== undefined) cfg.mesh.injectLoss = injectLoss(m.injectLoss, 'config.mesh.injectLoss');
  }
  if (top.log !== undefined) {
    const l = objectOf(top.log, 'config.log', ['level']);
    if (l.level !== undefined) cfg.log.level = oneOf(l.level, 'config.log.level', LOG_LEVELS);
  }
  if (top.stats !== undefined) {
    const s = objectOf(top.stats, 'config.stats', ['hotKeys']);
    if (s.hotKeys !== undefined) cfg.stats.hotKeys = integer(s.hotKeys, 'config.stats.hotKeys', 1, 10_000);
  }
  if (top.policies !== undefined && top.policyFile !== undefined) {
    fail('config.policyFile', 'give either `policies` or `policyFile`, not both');
  }
  if (top.policies !== undefined) {
    cfg.policies = checkPolicies(top.policies, 'config.', cfg.configFile);
    return true;
  }
  if (top.policyFile !== undefined) {
    const file = resolve(baseDir, string(top.policyFile, 'config.policyFile'));
    cfg.policies = loadPolicyFile(read, file, 'config.policyFile');
    cfg.policyFile = file;
    return true;
  }
  return false;
}

/** The envoy descriptors' policies may not share a name with the config's own, and must compile. */
function checkEnvoyPolicies(cfg: DaemonConfig, envoy: EnvoyDaemonConfig): void {
  const own = new Set(cfg.policies.map((p) => p.name));
  for (const p of envoy.config.policies) {
    if (own.has(p.name)) {
      fail(
        'config.policies',
        `policy name ${p.name} is taken by a descriptor of envoy.files; rename the policy`,
      );
    }
  }
  if (envoy.config.policies.length > 0) checkPolicies([...envoy.config.policies], 'envoy.');
  else if (cfg.policies.length === 0) {
    fail(
      'config.envoy.files',
      'no descriptor counts anything (every rate_limit is unlimited or 0 per unit) and there are no policies; the limiter needs at least one',
    );
  }
}

/** Parses `host:port` or `[v6]:port`. */
export function parseHostPort(s: string, path: string): { host: string; port: number } {
  const m = /^\[([0-9A-Fa-f:.]+)\]:(\d{1,5})$/.exec(s) ?? /^([^\s:[\]/]+):(\d{1,5})$/.exec(s);
  if (!m) fail(path, `must be host:port or [ipv6]:port (got ${shown(s)})`);
  return { host: host(m[1], path), port: integer(Number(m[2]), path, 0, 65535) };
}

function host(v: unknown, path: string): string {
  const h = string(v, path, 253);
  if (/[\s/]/.test(h)) fail(path, `must be a host name or IP address (got ${shown(v)})`);
  return h;
}

function gossipMs(v: unknown, path: string): number {
  return integer(v, path, 1, 60_000);
}

function injectDelay(v: unknown, path: string): number {
  return finite(v, path, 0, 60_000);
}

function injectLoss(v: unknown, path: string): number {
  return finite(v, path, 0, 1);
}
