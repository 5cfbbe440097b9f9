/**
 * The graceful shutdown of an instance that embeds a mesh node, in the order
 * that loses no decision and no count: stop being routed to, stop accepting,
 * let in-flight requests finish, then say farewell (`MeshLimiter.stop`).
 */

/** What `shutdown` needs of a server: node:http, https and http2 servers all fit (Fastify: `app.server`). */
export interface ClosableServer {
  close(callback?: (err?: Error) => void): unknown;
  closeIdleConnections?(): void;
  closeAllConnections?(): void;
  readonly listening?: boolean;
}

/** Options of {@link MeshLimiter.shutdown}. */
export interface ShutdownOptions {
  /** The servers whose requests this node decides: closed before the node stops. Default: none. */
  servers?: readonly ClosableServer[];
  /**
   * How long to keep serving after readiness turns false and before the servers stop
   * accepting, ms: the time a load balancer (Kubernetes endpoints) takes to stop routing
   * here. Default 0; on Kubernetes a few seconds (the chart uses 5,000).
   */
  delayMs?: number;
  /** How long in-flight requests may take to finish before their connections are closed, ms. Default 10,000. */
  graceMs?: number;
}

/** Defaults of {@link ShutdownOptions}. */
export const SHUTDOWN_DEFAULTS = { delayMs: 0, graceMs: 10_000 } as const;

/** How often idle keep-alive connections are closed while in-flight requests finish, ms. */
const IDLE_SWEEP_MS = 100;

/** Checks the options (a TypeError naming the field) and fills the defaults. */
export function shutdownOptions(opts: ShutdownOptions | undefined): Required<ShutdownOptions> {
  const o = opts ?? {};
  const ms = (v: unknown, field: string, dflt: number): number => {
    if (v === undefined) return dflt;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 600_000)
      throw new TypeError(`shutdown: ${field} must be a number of ms in 0..600000`);
    return v;
  };
  const servers = o.servers ?? [];
  if (!Array.isArray(servers) || servers.some((s) => typeof s?.close !== 'function'))
    throw new TypeError('shutdown: servers must be a list of servers (objects with close())');
  return {
    servers,
    delayMs: ms(o.delayMs, 'delayMs', SHUTDOWN_DEFAULTS.delayMs),
    graceMs: ms(o.graceMs, 'graceMs', SHUTDOWN_DEFAULTS.graceMs),
  };
}

/** Resolves after `ms` (at once for 0). */
export function sleep(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Stops each server accepting connections and resolves when every one has closed: its
 * in-flight requests finished (idle keep-alive connections are closed as they become idle),
 * or `graceMs` passed and the remaining connections were closed. Resolves with the number
 * of servers that needed that forced close.
 */
export async function closeServers(servers: readonly ClosableServer[], graceMs: number): Promise<number> {
  let forced = 0;
  await Promise.all(
    servers.map(
      (s) =>
        new Promise<void>((resolve) => {
          if (s.listening === false) {
            resolve();
            return;
          }
          const sweep = setInterval(() => s.closeIdleConnections?.(), IDLE_SWEEP_MS);
          const timer = setTimeout(() => {
            forced++;
            s.closeAllConnections?.();
          }, graceMs);
          s.close(() => {
            clearInterval(sweep);
            clearTimeout(timer);
            resolve();
          });
          s.closeIdleConnections?.();
        }),
    ),
  );
  return forced;
}
