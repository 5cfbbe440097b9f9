/** gRPC status codes (grpc/doc/statuscodes.md), as @grpc/grpc-js numbers them. */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

/** A gRPC status code. */
export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

const NAMES = new Map<number, string>(Object.entries(GrpcStatus).map(([name, code]) => [code, name]));

/** A status code's name (`INVALID_ARGUMENT`), or the number as text for one outside the list. */
export function grpcStatusName(code: number): string {
  return NAMES.get(code) ?? String(code);
}
