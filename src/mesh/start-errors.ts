import { ErrorCodes, RateMeshError } from '../errors.js';
import type { Logger } from './types.js';

const LISTEN_FAILURE = /^\s*(\/\S+): Error: listen (EADDRINUSE|EACCES|EADDRNOTAVAIL)\b/m;

const WHY: Record<string, string> = {
  EADDRINUSE: 'is already in use (EADDRINUSE): another process, or another ratemesh node, listens there',
  EACCES: 'may not be listened on by this user (EACCES): a port under 1024 needs privileges',
  EADDRNOTAVAIL: 'names an address this host does not have (EADDRNOTAVAIL)',
};

/**
 * A start failure as an operator reads it: libp2p's "Some configured addresses failed to be
 * listened on ... `transportManager.faultTolerance`" becomes one warn line and a
 * RateMeshError CONFIG_INVALID naming `listen` and the address; anything else is returned as is.
 */
export function explainStartError(err: unknown, logger: Logger): unknown {
  const message = err instanceof Error ? err.message : String(err);
  const m = LISTEN_FAILURE.exec(message);
  if (m === null) return err;
  const [, addr, code] = m as unknown as [string, string, string];
  const reason = `${addr} ${WHY[code]}; choose another address or port (tcp/0 picks a free one)`;
  logger.warn({ addr, code }, `ratemesh cannot listen: ${reason}`);
  return new RateMeshError(ErrorCodes.CONFIG_INVALID, reason, 'listen');
}
