import { ManualClock } from '../../src/clock.js';
import { Engine } from '../../src/decision/engine.js';
import type { PeerView } from '../../src/decision/peers.js';
import type { PolicyReplacement } from '../../src/decision/types.js';
import { type EnvoyConfig, type EnvoyConfigOptions, parseEnvoyConfig } from '../../src/envoy/config.js';
import { counterKey } from '../../src/envoy/key.js';
import { type DescriptorEntry, matchDescriptor } from '../../src/envoy/matcher.js';
import type { EnvoyRateLimit } from '../../src/envoy/tree.js';
import { ErrorCodes, RateMeshError } from '../../src/errors.js';
import type { MeshLimiter, MeshStats } from '../../src/mesh/types.js';
import type { PolicySet } from '../../src/policy/index.js';
import type { Decision, Explanation, KeyOutcome, Policy, PolicyKey, PolicySpec } from '../../src/types.js';
import { emptyStats } from '../daemon/fake-limiter.js';

/** Parses YAML texts named a.yaml, b.yaml, ... */
export function config(texts: string | string[], opts?: EnvoyConfigOptions): EnvoyConfig {
  const list = typeof texts === 'string' ? [texts] : texts;
  return parseEnvoyConfig(
    list.map((text, i) => ({ file: `${String.fromCharCode(97 + i)}.yaml`, text })),
    opts,
  );
}

/** Entries from `k=v` strings. */
export function entries(...pairs: string[]): DescriptorEntry[] {
  return pairs.map((p) => {
    const at = p.indexOf('=');
    return at < 0 ? { key: p, value: '' } : { key: p.slice(0, at), value: p.slice(at + 1) };
  });
}

/** What a descriptor matches: the limit and the counter key, or undefined. */
export function match(
  cfg: EnvoyConfig,
  domain: string,
  ...pairs: string[]
): { limit: EnvoyRateLimit; key: string } | undefined {
  const root = cfg.domains.get(domain);
  if (root === undefined) throw new Error(`no domain ${domain}`);
  const list = entries(...pairs);
  const shared: (string | undefined)[] = [];
  const limit = matchDescriptor(root, list, shared);
  return limit === undefined ? undefined : { limit, key: counterKey(list, shared) };
}

/**
 * A MeshLimiter over one real decision Engine on a manual clock: the
 * production decision code without the network, so tests control time.
 */
export class EngineLimiter implements MeshLimiter {
  readonly peerId = '12D3KooWEngineLimiter';
  readonly topic = 'ratemesh/test';
  readonly engine: Engine;
  private running = false;

  constructor(
    policies: readonly PolicySpec[],
    readonly clock = new ManualClock(1_700_000_000_000),
  ) {
    this.engine = new Engine({ policies, clock });
  }

  get ready(): boolean {
    return this.running;
  }
  async start(): Promise<void> {
    this.running = true;
  }
  async stop(): Promise<void> {
    this.running = false;
  }
  multiaddrs(): string[] {
    return [];
  }
  peers(): PeerView[] {
    return [];
  }
  stats(): MeshStats {
    return emptyStats(this.peerId, this.topic);
  }
  policy(name: string): Policy | undefined {
    return this.engine.policy(name);
  }
  get policyVersion(): string {
    return this.engine.version;
  }
  policyVersions(): Record<string, string> {
    return this.engine.policyVersions();
  }
  replacePolicies(policies: readonly PolicySpec[] | PolicySet): PolicyReplacement {
    return this.engine.replacePolicies(policies);
  }
  check(policy: string, keys: string | readonly string[], cost?: number): Decision {
    this.guard();
    return this.engine.check(policy, keys, cost);
  }
  checkAll(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): Decision & { outcomes: KeyOutcome[] } {
    this.guard();
    return this.engine.checkAll(pairs, cost);
  }
  explain(policy: string, key: string, cost?: number): Explanation {
    return this.engine.explain(policy, key, cost);
  }
  private guard(): void {
    if (!this.running) {
      // the mesh limiter's contract: not running is an error, never a decision
      throw new RateMeshError(ErrorCodes.NOT_STARTED, 'not started');
    }
  }
}
