/** The fields and enums of the vendored protos the RLS/health codec reads and writes (test/envoy/codec.test.ts checks them). */

/**
 * Every field the codec reads or writes: message → field → [number, proto type].
 * Checked against the vendored protos by the tests; the codec below uses the
 * same numbers as constants.
 */
export const SCHEMA = {
  'envoy.service.ratelimit.v3.RateLimitRequest': {
    domain: [1, 'string'],
    descriptors: [2, 'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor'],
    hits_addend: [3, 'uint32'],
  },
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor': {
    entries: [1, 'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry'],
    limit: [2, 'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride'],
    hits_addend: [3, 'google.protobuf.UInt64Value'],
  },
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry': {
    key: [1, 'string'],
    value: [2, 'string'],
  },
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride': {
    requests_per_unit: [1, 'uint32'],
    unit: [2, 'envoy.type.v3.RateLimitUnit'],
  },
  'google.protobuf.UInt64Value': { value: [1, 'uint64'] },
  'envoy.service.ratelimit.v3.RateLimitResponse': {
    overall_code: [1, 'envoy.service.ratelimit.v3.RateLimitResponse.Code'],
    statuses: [2, 'envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus'],
    response_headers_to_add: [3, 'envoy.config.core.v3.HeaderValue'],
  },
  'envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus': {
    code: [1, 'envoy.service.ratelimit.v3.RateLimitResponse.Code'],
    current_limit: [2, 'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit'],
    limit_remaining: [3, 'uint32'],
    duration_until_reset: [4, 'google.protobuf.Duration'],
  },
  'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit': {
    requests_per_unit: [1, 'uint32'],
    unit: [2, 'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit'],
    name: [3, 'string'],
  },
  'google.protobuf.Duration': { seconds: [1, 'int64'], nanos: [2, 'int32'] },
  'envoy.config.core.v3.HeaderValue': { key: [1, 'string'], value: [2, 'string'] },
  'grpc.health.v1.HealthCheckRequest': { service: [1, 'string'] },
  'grpc.health.v1.HealthCheckResponse': {
    status: [1, 'grpc.health.v1.HealthCheckResponse.ServingStatus'],
  },
  'grpc.health.v1.HealthListResponse': {
    statuses: [1, 'grpc.health.v1.HealthListResponse.StatusesEntry'],
  },
  'grpc.health.v1.HealthListResponse.StatusesEntry': {
    key: [1, 'string'],
    value: [2, 'grpc.health.v1.HealthCheckResponse'],
  },
} as const;

/** The enums the codec maps, value by name (checked against the protos by the tests). */
export const ENUMS = {
  'envoy.service.ratelimit.v3.RateLimitResponse.Code': { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 },
  'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit': {
    UNKNOWN: 0,
    SECOND: 1,
    MINUTE: 2,
    HOUR: 3,
    DAY: 4,
    WEEK: 7,
    MONTH: 5,
    YEAR: 6,
  },
  'envoy.type.v3.RateLimitUnit': {
    UNKNOWN: 0,
    SECOND: 1,
    MINUTE: 2,
    HOUR: 3,
    DAY: 4,
    MONTH: 5,
    YEAR: 6,
  },
  'grpc.health.v1.HealthCheckResponse.ServingStatus': {
    UNKNOWN: 0,
    SERVING: 1,
    NOT_SERVING: 2,
    SERVICE_UNKNOWN: 3,
  },
} as const;
