/**
 * The one logger shape ratemesh takes everywhere (pino satisfies it): a structured object
 * first, the message second. The mesh and the daemon use every level. The engine and the
 * HTTP middleware only need `warn` and use `info` when it is there: they take
 * {@link WarnLogger}, the same shape with the other levels optional.
 */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A {@link Logger} of which only `warn` is required. */
export type WarnLogger = Pick<Logger, 'warn'> & Partial<Logger>;
