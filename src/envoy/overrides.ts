import { MAX_CELLS, MAX_WINDOW_MS } from '../policy/constants.js';
import type { PolicySpec } from '../types.js';
import { type EnvoyUnit, UNIT_SECONDS } from './units.js';

/** Most distinct (requests_per_unit, unit) overrides one node serves; past it a new one is INVALID_ARGUMENT. */
export const MAX_OVERRIDES = 64;

/** Told of the override policies whenever one is added: the caller installs them in the limiter. */
export type InstallOverrides = (policies: readonly PolicySpec[]) => void;

/**
 * The limits Envoy sends in a request (`RateLimitDescriptor.limit`, from its
 * `limit` override action), which envoyproxy/ratelimit applies in place of the
 * config's. Each distinct (requests_per_unit, unit) is a ratemesh policy,
 * `envoy-override:<n>-<unit>`, created on first use and installed in the
 * limiter through `install` (so every node that sees the same override names
 * the same policy and their counts merge); at most {@link MAX_OVERRIDES} of
 * them, since each costs a policy. The counter key is the domain and the
 * descriptor's keys and values.
 */
export class LimitOverrides {
  private readonly specs = new Map<string, PolicySpec>();

  constructor(
    private readonly install: InstallOverrides,
    private readonly buckets = 10,
  ) {}

  /** The policies created so far (for a config reload, which must keep them). */
  policies(): PolicySpec[] {
    return [...this.specs.values()];
  }

  /**
   * The policy counting `requests` per `unit`, created and installed on first
   * use; a string message when it cannot be (too many overrides, a limit
   * ratemesh cannot count).
   */
  policyFor(requests: number, unit: EnvoyUnit): { name: string } | { error: string } {
    const name = `envoy-override:${requests}-${unit}`;
    if (this.specs.has(name)) return { name };
    if (requests > MAX_CELLS) return { error: `ratemesh counts at most ${MAX_CELLS} requests per window` };
    const windowMs = UNIT_SECONDS[unit] * 1000;
    if (windowMs > MAX_WINDOW_MS) return { error: `ratemesh enforces windows of at most 366 days` };
    if (this.specs.size >= MAX_OVERRIDES) {
      return {
        error: `at most ${MAX_OVERRIDES} distinct limit overrides per node (set the limit in the config)`,
      };
    }
    const spec: PolicySpec = {
      name,
      limit: requests,
      windowMs,
      buckets: Math.min(this.buckets, windowMs),
      maxCost: MAX_CELLS,
    };
    this.specs.set(name, spec);
    try {
      this.install(this.policies());
    } catch (err) {
      this.specs.delete(name);
      return { error: `cannot install its policy: ${err instanceof Error ? err.message : String(err)}` };
    }
    return { name };
  }
}
