import type { Logger } from './types.js';

function line(level: string, obj: object, msg?: string): void {
  process.stderr.write(`${JSON.stringify({ level, time: Date.now(), name: 'ratemesh', ...obj, msg })}\n`);
}

/**
 * The logger used when none is given: warnings and errors as JSON lines on
 * stderr (so experiment knobs are never silent), debug and info dropped.
 * It opens no handle of its own; pass a pino logger for anything more.
 */
export const stderrLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: (obj, msg) => line('warn', obj, msg),
  error: (obj, msg) => line('error', obj, msg),
};
