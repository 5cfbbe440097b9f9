/**
 * The rate limit units of Envoy's RLS v3 API (`RateLimitResponse.RateLimit.Unit`)
 * as envoyproxy/ratelimit reads them from its config: case-insensitive names,
 * each a fixed number of seconds (`src/utils/utilities.go`, `UnitToDivider`:
 * a month is 30 days, a year 365).
 */
export const UNIT_SECONDS = {
  second: 1,
  minute: 60,
  hour: 3_600,
  day: 86_400,
  week: 604_800,
  month: 2_592_000,
  year: 31_536_000,
} as const;

/** A unit name as written in the config (lower case). */
export type EnvoyUnit = keyof typeof UNIT_SECONDS;

/** The enum names of `RateLimitResponse.RateLimit.Unit` on the wire. */
export const UNIT_ENUM: Readonly<Record<EnvoyUnit, string>> = {
  second: 'SECOND',
  minute: 'MINUTE',
  hour: 'HOUR',
  day: 'DAY',
  week: 'WEEK',
  month: 'MONTH',
  year: 'YEAR',
};

const BY_NAME = new Map<string, EnvoyUnit>(
  (Object.keys(UNIT_SECONDS) as EnvoyUnit[]).map((u) => [u.toUpperCase(), u]),
);

/** The unit a config names (any letter case, as their loader upper-cases it), or undefined. */
export function parseUnit(text: string): EnvoyUnit | undefined {
  return BY_NAME.get(text.toUpperCase());
}
