/**
 * Every error ratemesh throws is a {@link RateMeshError} with a stable `code`
 * (listed in {@link ErrorCodes}) and, where one input is at fault, the `field`
 * that names it. Being rate limited is never an error: it is a decision value.
 */
export const ErrorCodes = {
  /** A policy is malformed; `field` names the offending field. */
  POLICY_INVALID: 'ERR_POLICY_INVALID',
  /** Two policies share a name. */
  POLICY_DUPLICATE: 'ERR_POLICY_DUPLICATE',
  /** No policy with that name is configured. */
  POLICY_UNKNOWN: 'ERR_POLICY_UNKNOWN',
  /** A key is empty, longer than 512 bytes, or holds control characters. */
  KEY_INVALID: 'ERR_KEY_INVALID',
  /** An IP address could not be parsed. */
  IP_INVALID: 'ERR_IP_INVALID',
  /** A cost is not an integer between 1 and the policy's maxCost. */
  COST_INVALID: 'ERR_COST_INVALID',
  /** A clock reading is not a finite number. */
  CLOCK_INVALID: 'ERR_CLOCK_INVALID',
  /** A configuration (mesh, daemon, middleware) option is invalid; `field` names it. */
  CONFIG_INVALID: 'ERR_CONFIG_INVALID',
  /** Gossip or sync bytes could not be decoded. */
  CODEC_INVALID: 'ERR_CODEC_INVALID',
  /** The limiter is not running (not started, or stopped). */
  NOT_STARTED: 'ERR_NOT_STARTED',
  /** An HTTP request to the daemon is malformed (bad JSON, wrong shape); `field` names the part. */
  REQUEST_INVALID: 'ERR_REQUEST_INVALID',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** The one error class ratemesh throws. */
export class RateMeshError extends Error {
  readonly code: ErrorCode;
  readonly field: string | undefined;
  /** What is wrong, without the field: `message` is `${field}: ${reason}` when a field is named. */
  readonly reason: string;

  constructor(code: ErrorCode, message: string, field?: string) {
    super(field === undefined ? message : `${field}: ${message}`);
    this.name = 'RateMeshError';
    this.code = code;
    this.field = field;
    this.reason = message;
  }
}

/** True when `err` is a {@link RateMeshError}, optionally with the given code. */
export function isRateMeshError(err: unknown, code?: ErrorCode): err is RateMeshError {
  return err instanceof RateMeshError && (code === undefined || err.code === code);
}

/**
 * An error as a log field: its code (a {@link RateMeshError}) or name, its message, and its stack
 * when asked (unexpected failures); anything thrown that is not an Error as its string.
 */
export function errorInfo(err: unknown, withStack = false): Record<string, unknown> {
  if (!(err instanceof Error)) return { value: String(err) };
  const head = isRateMeshError(err) ? { code: err.code } : { name: err.name };
  return withStack ? { ...head, message: err.message, stack: err.stack } : { ...head, message: err.message };
}
