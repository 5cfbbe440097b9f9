import type { PeerView } from '../../src/decision/peers.js';
import { emptyEngineStats, type PolicyReplacement } from '../../src/decision/types.js';
import { ErrorCodes, RateMeshError } from '../../src/errors.js';
import { emptyDiscoveryStats } from '../../src/mesh/discovery.js';
import type { MeshLimiter, MeshStats } from '../../src/mesh/types.js';
import type { PolicySet } from '../../src/policy/index.js';
import type { Decision, Explanation, KeyOutcome, Policy, PolicyKey, PolicySpec } from '../../src/types.js';

/**
 * A stand-in for the mesh limiter: fixed counts per (policy, key) that never
 * reset, the same error contract (RateMeshError for unknown policy, bad key,
 * bad cost), and settable peers and stats. No network. Like the engine, it
 * reports the L/N fallback when every known peer is stale, unless a test sets
 * `fallback` to say otherwise (a node still waiting for its expected peers).
 */
export class FakeLimiter implements MeshLimiter {
  readonly peerId = '12D3KooWFakePeer';
  readonly topic = 'ratemesh/fake-version';
  ready = false;
  started = 0;
  stopped = 0;
  peerList: PeerView[] = [];
  statsValue: MeshStats = emptyStats(this.peerId, this.topic);
  /** The engine's fallback as stats() reports it; undefined: every known peer is stale. */
  fallback: boolean | undefined;
  /** When set, check() throws it (to test the server's 500 path). */
  explode: unknown;
  private readonly counts = new Map<string, number>();
  private limits: Map<string, number>;
  /** Policy sets handed to replacePolicies, in order. */
  readonly replaced: { name: string; limit: number }[][] = [];

  constructor(policies: { name: string; limit: number; shadow?: boolean }[] = [{ name: 'api', limit: 3 }]) {
    this.limits = new Map(policies.map((p) => [p.name, p.limit]));
    this.shadow = new Set(policies.filter((p) => p.shadow).map((p) => p.name));
  }
  private shadow: Set<string>;

  get policyVersion(): string {
    return [...this.limits].map(([n, l]) => `${n}=${l}`).join(',');
  }

  policyVersions(): Record<string, string> {
    return Object.fromEntries([...this.limits].map(([n, l]) => [n, `v${l}`]));
  }

  /** Keeps the counts of a policy whose limit is unchanged; a changed or removed one loses them. */
  replacePolicies(policies: readonly PolicySpec[] | PolicySet): PolicyReplacement {
    const list = (Array.isArray(policies) ? policies : (policies as PolicySet).policies) as {
      name: string;
      limit: number;
      shadow?: boolean;
    }[];
    const next = new Map(list.map((p) => [p.name, p.limit]));
    const out: PolicyReplacement = { kept: [], changed: [], added: [], removed: [], version: '' };
    for (const [name, limit] of next) {
      const was = this.limits.get(name);
      if (was === undefined) out.added.push(name);
      else if (was === limit) out.kept.push(name);
      else out.changed.push(name);
    }
    for (const name of this.limits.keys()) if (!next.has(name)) out.removed.push(name);
    for (const k of [...this.counts.keys()]) {
      const name = k.slice(0, k.indexOf('/'));
      if (!out.kept.includes(name)) this.counts.delete(k);
    }
    this.limits = next;
    this.shadow = new Set(list.filter((p) => p.shadow).map((p) => p.name));
    this.replaced.push(list.map((p) => ({ name: p.name, limit: p.limit })));
    out.version = this.policyVersion;
    return out;
  }

  async start(): Promise<void> {
    this.started++;
    this.ready = true;
  }

  async stop(): Promise<void> {
    this.stopped++;
    this.ready = false;
  }

  multiaddrs(): string[] {
    return ['/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWFakePeer'];
  }

  peers(): PeerView[] {
    return this.peerList;
  }

  stats(): MeshStats {
    const peers = this.peerList;
    const fallback = this.fallback ?? (peers.length > 0 && peers.every((p) => p.stale));
    return { ...this.statsValue, engine: { ...this.statsValue.engine, fallback } };
  }

  policy(_name: string): Policy | undefined {
    return undefined;
  }

  /** The fake's counts as an explanation: the count so far against the limit, changing nothing. */
  explain(policy: string, key: string, cost = 1): Explanation {
    const limit = this.limits.get(policy);
    if (limit === undefined)
      throw new RateMeshError(ErrorCodes.POLICY_UNKNOWN, `no policy ${policy}`, 'policy');
    const used = this.counts.get(`${policy}/${key}`) ?? 0;
    const allowed = used + cost <= limit;
    return {
      policy,
      key,
      cost,
      at: 0,
      allowed,
      rule: allowed ? 'allow' : 'global-limit',
      mode: 'global',
      reason: allowed ? 'allowed' : 'over the limit',
      limit,
      windowMs: 60_000,
      remaining: Math.max(0, limit - used - (allowed ? cost : 0)),
      retryAfterMs: allowed ? 0 : -1,
      resetMs: 0,
      seen: { total: used, own: used, peers: 0, unattributed: 0 },
    };
  }

  check(policy: string, keys: string | readonly string[], cost = 1): Decision {
    if (this.explode !== undefined) throw this.explode;
    if (!this.ready) throw new RateMeshError(ErrorCodes.NOT_STARTED, 'not started');
    const limit = this.limits.get(policy);
    if (limit === undefined)
      throw new RateMeshError(ErrorCodes.POLICY_UNKNOWN, `no policy ${policy}`, 'policy');
    const list = typeof keys === 'string' ? [keys] : keys;
    for (const k of list) {
      if (k.length === 0 || k.length > 512) throw new RateMeshError(ErrorCodes.KEY_INVALID, 'bad key', 'key');
    }
    if (!Number.isInteger(cost) || cost < 1) {
      throw new RateMeshError(ErrorCodes.COST_INVALID, `must be an integer >= 1 (got ${cost})`, 'cost');
    }
    const used = Math.max(...list.map((k) => this.counts.get(`${policy}/${k}`) ?? 0));
    const limited = used + cost > limit;
    const shadow = this.shadow.has(policy);
    if (!limited || shadow) for (const k of list) this.counts.set(`${policy}/${k}`, used + cost);
    return {
      allowed: !limited || shadow,
      limited,
      policy,
      key: list[0] ?? '',
      rule: limited ? 'global-limit' : 'allow',
      mode: 'global',
      limit,
      remaining: Math.max(0, limit - used - (limited ? 0 : cost)),
      retryAfterMs: limited ? 1500 : 0,
      resetMs: 10_000,
      delayMs: 0,
      shadow,
    };
  }

  checkAll(pairs: readonly PolicyKey[], cost = 1): Decision & { outcomes: KeyOutcome[] } {
    let first: Decision | undefined;
    const outcomes: KeyOutcome[] = [];
    // Like the engine: an unknown policy in a list names the pair (`pairs[i]`), checked first.
    pairs.forEach(([p], i) => {
      if (this.ready && this.explode === undefined && !this.limits.has(p))
        throw new RateMeshError(ErrorCodes.POLICY_UNKNOWN, `no policy ${p}`, `pairs[${i}]`);
    });
    for (const [p, k] of pairs) {
      const d = this.check(p, k, cost);
      first ??= d;
      if (d.limited && !first.limited) first = d;
      outcomes.push({
        policy: p,
        key: k,
        limit: d.limit,
        windowMs: 10_000,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
        resetMs: d.resetMs,
        limited: d.limited,
        shadow: d.shadow,
      });
    }
    if (first === undefined) throw new RateMeshError(ErrorCodes.KEY_INVALID, 'no pairs', 'pairs');
    return { ...first, outcomes };
  }
}

export function emptyStats(peerId: string, topic: string): MeshStats {
  return {
    peerId,
    topic,
    running: true,
    peers: { connected: 0, members: 0, departed: 0 },
    relay: { auto: true, fanout: 0, relayHops: 0, switches: 0 },
    gossip: {
      ticks: 0,
      fastTicks: 0,
      fastHeld: 0,
      earlyPublishes: 0,
      msgsOut: 0,
      bytesOut: 0,
      relayed: 0,
      notRelayed: 0,
      relayedIn: 0,
      publishErrors: 0,
      msgsIn: 0,
      bytesIn: 0,
      dropped: {},
    },
    dropped: {},
    injected: { delayMs: 0, loss: 0, delayed: 0, dropped: 0 },
    sync: { pulls: 0, pullsOk: 0, pullsFailed: 0, served: 0, bytesIn: 0, bytesOut: 0, failures: {} },
    versionMismatch: {},
    otherTopics: { events: 0, peers: {} },
    discovery: emptyDiscoveryStats(),
    engine: emptyEngineStats(),
  };
}

/** A logger that remembers what it was told. */
export function memoryLogger() {
  const lines: { level: string; obj: object; msg?: string }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => {
    lines.push({ level, obj, msg });
  };
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** A peer as the engine reports it: `over` on top of a fresh, live one. */
export function fakePeer(over: Partial<PeerView> & { id: string }): PeerView {
  return {
    ageMs: 0,
    stale: false,
    delayMs: 0,
    clockOffsetMs: 0,
    members: 2,
    messages: 1,
    ignoredMs: 0,
    skewed: false,
    addrs: [],
    ...over,
  };
}
