import type { AddressInfo } from 'node:net';
import { type Clock, systemClock } from '../clock.js';
import { ignoredOnNodeHttp2, rlsServerOptions } from '../envoy/daemon-config.js';
import type { RlsServer } from '../envoy/grpc-server.js';
import type { LimitOverrides } from '../envoy/overrides.js';
import type { RlsService } from '../envoy/service.js';
import { ErrorCodes, isRateMeshError, RateMeshError } from '../errors.js';
import type { Logger, MeshLimiter, MeshLimiterOptions } from '../mesh/types.js';
import { DAEMON_DEFAULTS, type DaemonConfig } from './config.js';
import { HotKeys } from './hot-keys.js';
import { DaemonMetrics } from './metrics.js';
import {
  configFiles,
  FileWatcher,
  limiterPolicies,
  type ReloadOutcome,
  reloadError,
  restartOnlyChange,
} from './reload.js';
import { createCheckServer } from './server.js';

/** Builds the limiter the daemon runs; the real mesh limiter unless a test injects another. */
export type LimiterFactory = (options: MeshLimiterOptions) => MeshLimiter | Promise<MeshLimiter>;

export interface DaemonOptions {
  config: DaemonConfig;
  /** The daemon's own log (HTTP, lifecycle). */
  logger: Logger;
  /** Handed to the mesh limiter; `logger` when absent. */
  meshLogger?: Logger;
  createLimiter?: LimiterFactory;
  clock?: Clock;
  /**
   * Reads the config again (the CLI: the same flags, environment and files);
   * {@link Daemon.reload} uses it. Without it a reload is refused.
   */
  load?: () => DaemonConfig;
  /**
   * Watch the config file, the policy file and the Envoy descriptor files, and
   * reload when one changes. Default: true when `load` is given.
   */
  watch?: boolean;
  /** How long `/readyz` waits at start to join the mesh, ms (server.ts JOIN_TIMEOUT_MS, 10 s). */
  joinTimeoutMs?: number;
}

/** A running daemon. */
export interface Daemon {
  readonly limiter: MeshLimiter;
  readonly metrics: DaemonMetrics;
  /** The bound HTTP address (the real port when the config asked for 0). */
  readonly http: { host: string; port: number; url: string };
  /** The Envoy RLS v3 gRPC server's bound address; undefined when `grpc` is not configured. */
  readonly grpc: { host: string; port: number } | undefined;
  /** The config in force (replaced by a successful reload). */
  readonly config: DaemonConfig;
  /**
   * Reads the config again and applies it (SIGHUP, a watched file changed):
   * a valid one is in force when this returns, connections untouched, the
   * counts of unchanged policies kept; an invalid one, or one changing a
   * setting that needs a restart, is refused with the file and field, and the
   * old config keeps serving. Synchronous: no check sees half a config.
   */
  reload(trigger?: string): ReloadOutcome;
  /** The last reload, if any. */
  readonly lastReload: ReloadOutcome | undefined;
  /**
   * Drains and stops: `/readyz` fails at once (and gRPC health turns NOT_SERVING), requests
   * are still served for `http.shutdownDelayMs`, then the listeners close, in-flight
   * requests finish (their sockets are closed after `http.drainTimeoutMs`), and the limiter
   * stops with its farewell. Idempotent.
   */
  stop(): Promise<void>;
}

/** The mesh limiter options a config stands for. */
export function limiterOptions(config: DaemonConfig, logger: Logger, clock?: Clock): MeshLimiterOptions {
  const m = config.mesh;
  const opts: MeshLimiterOptions = { policies: limiterPolicies(config), bootstrap: m.bootstrap, logger };
  if (m.listen !== undefined) opts.listen = m.listen;
  if (m.privateKey !== undefined) opts.privateKey = m.privateKey;
  if (m.psk !== undefined) opts.psk = m.psk;
  if (m.insecure !== undefined) opts.insecure = m.insecure;
  if (m.snapshotFile !== undefined) opts.snapshotFile = m.snapshotFile;
  if (m.gossipIntervalMs !== undefined) opts.gossipIntervalMs = m.gossipIntervalMs;
  if (m.expectedDelayMs !== undefined) opts.expectedDelayMs = m.expectedDelayMs;
  if (m.fastGossipIntervalMs !== undefined) opts.fastGossipIntervalMs = m.fastGossipIntervalMs;
  if (m.injectDelayMs !== undefined && m.injectDelayMs > 0) opts.injectDelayMs = m.injectDelayMs;
  if (m.injectLoss !== undefined && m.injectLoss > 0) opts.injectLoss = m.injectLoss;
  if (clock !== undefined) opts.clock = clock;
  return opts;
}

async function realLimiter(options: MeshLimiterOptions): Promise<MeshLimiter> {
  const { createMeshLimiter } = await import('../mesh/mesh-limiter.js');
  return createMeshLimiter(options);
}

/**
 * Starts a daemon: builds and starts the mesh limiter, then serves the HTTP
 * API. Logs one `ratemesh node started` line with `http` (URL), `peerId` and
 * `multiaddrs`, for scripts to scrape. On failure nothing is left running.
 */
export async function startDaemon(options: DaemonOptions): Promise<Daemon> {
  const { config, logger } = options;
  const clock = options.clock ?? systemClock;
  const create = options.createLimiter ?? realLimiter;

  if (config.mesh.injectDelayMs || config.mesh.injectLoss) {
    logger.warn(
      { injectDelayMs: config.mesh.injectDelayMs ?? 0, injectLoss: config.mesh.injectLoss ?? 0 },
      'EXPERIMENT KNOBS ON: received gossip is delayed and/or dropped on purpose; never run this in production',
    );
  }

  let limiter: MeshLimiter;
  try {
    limiter = await create(limiterOptions(config, options.meshLogger ?? logger, options.clock));
  } catch (err) {
    // The mesh validates its options at construction; name them as the config does.
    if (isRateMeshError(err, ErrorCodes.CONFIG_INVALID) && err.field !== undefined) {
      const message = err.reason;
      throw new RateMeshError(err.code, message, `mesh.${err.field}`);
    }
    throw err;
  }
  try {
    await limiter.start();
  } catch (err) {
    await limiter.stop().catch(() => {});
    throw err;
  }

  const metrics = new DaemonMetrics(limiter);
  metrics.configFile = config.configFile ?? '';
  let current = config;
  let lastReload: ReloadOutcome | undefined;
  const reloads = { ok: 0, failed: 0 };
  const hotKeys = new HotKeys(config.stats.hotKeys, clock);
  const { server, state } = createCheckServer({
    limiter,
    metrics,
    hotKeys,
    logger,
    maxBodyBytes: config.http.maxBodyBytes,
    headersTimeoutMs: config.http.headersTimeoutMs ?? DAEMON_DEFAULTS.headersTimeoutMs,
    requestTimeoutMs: config.http.requestTimeoutMs ?? DAEMON_DEFAULTS.requestTimeoutMs,
    standalone: config.mesh.bootstrap.length === 0,
    ...(options.joinTimeoutMs === undefined ? {} : { joinTimeoutMs: options.joinTimeoutMs }),
    limits: () => limitsBody(current, limiter, reloads, lastReload),
  });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.http.port, config.http.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await limiter.stop().catch(() => {});
    const e = err as NodeJS.ErrnoException;
    throw new Error(`cannot listen on ${config.http.host}:${config.http.port}: ${e.code ?? e.message}`);
  }
  server.on('error', (err) => logger.error({ err: { message: err.message } }, 'http server error'));

  let rls: RlsServer | undefined;
  let service: RlsService | undefined;
  let overrides: LimitOverrides | undefined;
  if (config.grpc !== undefined && config.envoy !== undefined) {
    // Loaded only when Envoy is configured: a daemon without `grpc` never reads the RLS code.
    const [{ startRlsServer }, { rlsCallCounter }, { RlsService }, { LimitOverrides }] = await Promise.all([
      import('../envoy/grpc-server.js'),
      import('../envoy/metrics.js'),
      import('../envoy/service.js'),
      import('../envoy/overrides.js'),
    ]);
    const envoy = config.envoy;
    overrides = config.grpc.limitOverrides
      ? new LimitOverrides(
          (added) => limiter.replacePolicies([...limiterPolicies(current), ...added]),
          envoy.buckets,
        )
      : undefined;
    service = new RlsService({
      config: envoy.config,
      limiter,
      responseHeaders: config.grpc.responseHeaders,
      unknownDomain: config.grpc.unknownDomain,
      countHits: config.grpc.countHits,
      dynamicMetadata: config.grpc.dynamicMetadata,
      overrides,
      clock,
      onDecision: (d, seconds, pairs, costs) => {
        const result = !d.limited ? 'allowed' : d.allowed ? 'shadow' : 'limited';
        metrics.decision(d.policy, result, d.mode, seconds, d.rule);
        if (d.allowed)
          for (let i = 0; i < pairs.length; i++)
            if (costs[i]! > 0) hotKeys.add(pairs[i]![0], pairs[i]![1], costs[i]!);
      },
    });
    try {
      const ignored = ignoredOnNodeHttp2(config.grpc);
      if (ignored.length > 0)
        logger.warn(
          { transport: config.grpc.transport, ignored },
          'gRPC limits not applied by the node:http2 transport (nghttp2 has its own)',
        );
      rls = await startRlsServer({
        service,
        ...rlsServerOptions(config.grpc),
        logger,
        onCall: rlsCallCounter(metrics.registry),
      });
    } catch (err) {
      server.close();
      await limiter.stop().catch(() => {});
      throw err;
    }
    rls.setServing(true);
  }

  const addr = server.address() as AddressInfo;
  const urlHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const http = { host: addr.address, port: addr.port, url: `http://${urlHost}:${addr.port}` };
  logger.info(
    {
      http: http.url,
      peerId: limiter.peerId,
      multiaddrs: limiter.multiaddrs(),
      policies: config.policies.map((p) => p.name),
      bootstrap: config.mesh.bootstrap,
      config: config.configFile,
      ...(rls === undefined
        ? {}
        : {
            grpc: `${rls.host}:${rls.port}`,
            grpcTransport: config.grpc?.transport,
            envoyFiles: config.envoy?.files,
            envoyAlgorithm: config.envoy?.algorithm,
          }),
    },
    'ratemesh node started',
  );

  let stopping: Promise<void> | undefined;

  const reload = (trigger = 'api'): ReloadOutcome => {
    const at = clock.now();
    const refuse = (err: unknown): ReloadOutcome => {
      const error = reloadError(err, current.configFile);
      reloads.failed++;
      metrics.reload('failed', at);
      logger.error(
        {
          trigger,
          file: error.file,
          field: error.field,
          reason: error.message,
          version: limiter.policyVersion,
        },
        'config reload refused: the old config keeps serving',
      );
      lastReload = { ok: false, trigger, at, version: limiter.policyVersion, error };
      return lastReload;
    };
    if (stopping !== undefined) return refuse(new Error('the node is stopping'));
    if (options.load === undefined)
      return refuse(new Error('this daemon was started without a config source'));
    // what is read now is what the watcher would have reloaded
    watcher?.rebase();
    let next: DaemonConfig;
    try {
      next = options.load();
    } catch (err) {
      return refuse(err);
    }
    const fixed = restartOnlyChange(current, next);
    if (fixed !== undefined) {
      return refuse(
        new RateMeshError(
          ErrorCodes.CONFIG_INVALID,
          `cannot change while the node runs (in ${next.configFile ?? 'the flags or environment'}); nothing was reloaded: restore it, or restart the node to apply it`,
          fixed,
        ),
      );
    }
    let change: ReturnType<MeshLimiter['replacePolicies']>;
    try {
      // the limit overrides requests brought stay: Envoy keeps sending them
      change = limiter.replacePolicies([...limiterPolicies(next), ...(overrides?.policies() ?? [])]);
    } catch (err) {
      return refuse(err);
    }
    // the same tick of the event loop: no check sees the new policies with the old descriptors
    if (service !== undefined && next.envoy !== undefined && next.grpc !== undefined) {
      service.reconfigure({
        config: next.envoy.config,
        responseHeaders: next.grpc.responseHeaders,
        unknownDomain: next.grpc.unknownDomain,
        countHits: next.grpc.countHits,
        dynamicMetadata: next.grpc.dynamicMetadata,
      });
    }
    if (next.log.level !== current.log.level && 'level' in logger) {
      (logger as { level: string }).level = next.log.level;
    }
    current = next;
    metrics.configFile = next.configFile ?? '';
    reloads.ok++;
    metrics.reload('ok', at);
    const policies = {
      kept: change.kept,
      changed: change.changed,
      added: change.added,
      removed: change.removed,
    };
    logger.info(
      {
        trigger,
        version: change.version,
        ...policies,
        ...(next.envoy === undefined ? {} : { envoyFiles: next.envoy.files }),
      },
      'config reloaded',
    );
    watcher?.set(configFiles(next));
    lastReload = { ok: true, trigger, at, version: change.version, policies };
    return lastReload;
  };
  const watcher =
    (options.watch ?? options.load !== undefined) ? new FileWatcher(() => reload('file-changed')) : undefined;
  watcher?.set(configFiles(config));

  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      watcher?.close();
      // 1. readiness fails first (/readyz 503, gRPC health NOT_SERVING); requests are still
      //    served for shutdownDelayMs, while the load balancer stops routing here
      state.draining = true;
      rls?.setServing(false);
      const delayMs = config.http.shutdownDelayMs ?? DAEMON_DEFAULTS.shutdownDelayMs;
      logger.info({ shutdownDelayMs: delayMs, drainTimeoutMs: config.http.drainTimeoutMs }, 'draining');
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      // 2. no new connections; in-flight requests finish within drainTimeoutMs
      const grpcStopped = rls?.stop(config.http.drainTimeoutMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          logger.warn({}, 'drain timeout: closing remaining connections');
          server.closeAllConnections();
        }, config.http.drainTimeoutMs);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
      await grpcStopped;
      // 3. the farewell (the peers count this node departed at once), then nothing left open
      await limiter.stop();
      logger.info({}, 'ratemesh node stopped');
    })();
    return stopping;
  };

  const grpcAddr = rls === undefined ? undefined : { host: rls.host, port: rls.port };
  return {
    limiter,
    metrics,
    http,
    grpc: grpcAddr,
    stop,
    reload,
    get config() {
      return current;
    },
    get lastReload() {
      return lastReload;
    },
  };
}

/** `GET /v1/limits`: the limits in force. */
function limitsBody(
  config: DaemonConfig,
  limiter: MeshLimiter,
  reloads: { ok: number; failed: number },
  last: ReloadOutcome | undefined,
): object {
  const versions = limiter.policyVersions();
  return {
    version: limiter.policyVersion,
    configFile: config.configFile ?? null,
    policyFile: config.policyFile ?? null,
    reloads: { ...reloads, last: last ?? null },
    policies: limiterPolicies(config).map((spec) => ({
      name: spec.name,
      version: versions[spec.name] ?? null,
      envoy: config.policies.every((p) => p.name !== spec.name),
      policy: limiter.policy(spec.name) ?? spec,
    })),
    envoy:
      config.envoy === undefined
        ? null
        : {
            files: config.envoy.files,
            algorithm: config.envoy.algorithm,
            domains: [...config.envoy.config.domains.keys()].sort().map((domain) => ({
              domain,
              descriptors: config
                .envoy!.config.rateLimits.filter(
                  (r) => r.fullKey === domain || r.fullKey.startsWith(`${domain}.`),
                )
                .map((r) => ({
                  key: r.fullKey,
                  policy: r.policy ?? null,
                  requestsPerUnit: r.requestsPerUnit,
                  unit: r.unit ?? null,
                  unitMultiplier: r.unitMultiplier,
                  unlimited: r.unlimited,
                  shadow: r.shadow,
                  name: r.name,
                  file: r.file,
                  path: r.path,
                })),
            })),
          },
  };
}
