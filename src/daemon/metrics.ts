import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { EngineStats } from '../decision/types.js';
import type { MeshLimiter, MeshStats } from '../mesh/types.js';
import type { DecisionMode, DecisionRule } from '../types.js';

/** `allowed`; `limited` (denied); `shadow` (limited, but allowed because the policy is in shadow mode). */
export type DecisionResult = 'allowed' | 'limited' | 'shadow';

/** Routes as metric labels: a fixed set, so unknown paths cannot grow the label space. */
export type RouteLabel =
  | '/v1/check'
  | '/v1/check/batch'
  | '/v1/peers'
  | '/v1/stats'
  | '/healthz'
  | '/livez'
  | '/readyz'
  | '/metrics'
  | '/v1/limits'
  | '/v1/explain'
  | 'other';

/** Bounds of the decision latency histogram, seconds: 1 µs to 10 ms. */
const LATENCY_BUCKETS = [1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2];

/**
 * The daemon's Prometheus metrics in its own Registry (never the global one, so
 * several daemons can share a process in tests). Decision figures are recorded
 * as checks happen; gossip, peer and view figures are read from the limiter at
 * scrape time through `collect()` callbacks.
 *
 * | series | type | labels |
 * | --- | --- | --- |
 * | `ratemesh_decisions_total` | counter | policy, result, mode |
 * | `ratemesh_decision_duration_seconds` | histogram | |
 * | `ratemesh_check_errors_total` | counter | code |
 * | `ratemesh_http_requests_total` | counter | route, status |
 * | `ratemesh_gossip_messages_total` | counter | direction (in, out) |
 * | `ratemesh_gossip_bytes_total` | counter | direction (in, out) |
 * | `ratemesh_gossip_ticks_total` | counter | interval (configured, fast) |
 * | `ratemesh_gossip_dropped_total` | counter | reason |
 * | `ratemesh_sync_bytes_total` | counter | direction |
 * | `ratemesh_peers_live`, `ratemesh_peers_stale` | gauge | |
 * | `ratemesh_fallback_active` | gauge (0/1) | |
 * | `ratemesh_gossip_capped_total`, `ratemesh_key_evictions_total` | counter | |
 * | `ratemesh_tracked_keys` | gauge | |
 * | `ratemesh_peers_ignored_total`, `ratemesh_clock_skewed_messages_total`, `ratemesh_peers_forgotten_total`, `ratemesh_key_evictions_live_total` | counter | |
 * | `ratemesh_peers_clock_skewed`, `ratemesh_peer_table_size`, `ratemesh_eviction_sketch_bytes` | gauge | |
 * | `ratemesh_view_age_seconds` | gauge | |
 * | `ratemesh_clock_offset_seconds` | gauge | peer |
 * | `ratemesh_info` | gauge (1) | peer_id, topic |
 * | `ratemesh_config_reloads_total` | counter | result (ok, failed) |
 * | `ratemesh_config_info` | gauge (1) | version (the policy set in force), file |
 * | `ratemesh_config_last_reload_seconds` | gauge | result: unix time of the last reload of that result |
 * | `ratemesh_policy_info` | gauge (1) | policy, version |
 * | `ratemesh_policy_version_mismatch_peers` | gauge | policy: members on another version of it |
 *
 * plus prom-client's default process and Node.js metrics.
 */
export class DaemonMetrics {
  readonly registry = new Registry();
  private readonly decisions: Counter<'policy' | 'result' | 'mode'>;
  private readonly denials: Counter<'policy' | 'rule'>;
  private readonly latency: Histogram<string>;
  private readonly checkErrors: Counter<'code'>;
  private readonly requests: Counter<'route' | 'status'>;
  private readonly reloads: Counter<'result'>;
  private readonly lastReload: Gauge<'result'>;
  /** The config file shown in `ratemesh_config_info` (set by the daemon). */
  configFile = '';

  constructor(limiter: MeshLimiter) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });

    this.decisions = new Counter({
      name: 'ratemesh_decisions_total',
      help: 'Checks decided, by deciding policy, result (allowed, limited, shadow) and mode (global, fallback, local).',
      labelNames: ['policy', 'result', 'mode'],
      registers,
    });
    this.denials = new Counter({
      name: 'ratemesh_denials_total',
      help: 'Checks limited (denied, or let through in shadow mode), by deciding policy and rule: why (headroom-share, global-limit, starting, fallback-share, startup-hold, left-mesh, local-limit, cost-exceeds-limit, owner-unreachable; docs/decision-rule.md).',
      labelNames: ['policy', 'rule'],
      registers,
    });
    this.latency = new Histogram({
      name: 'ratemesh_decision_duration_seconds',
      help: 'Time spent in the limiter deciding one check (excludes HTTP parsing).',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.checkErrors = new Counter({
      name: 'ratemesh_check_errors_total',
      help: 'Check requests refused as invalid, by error code.',
      labelNames: ['code'],
      registers,
    });
    this.requests = new Counter({
      name: 'ratemesh_http_requests_total',
      help: 'HTTP requests served, by route and status code.',
      labelNames: ['route', 'status'],
      registers,
    });

    this.reloads = new Counter({
      name: 'ratemesh_config_reloads_total',
      help: 'Config reloads (SIGHUP or a watched file changed), by result: ok (in force) or failed (refused; the old config keeps serving).',
      labelNames: ['result'],
      registers,
    });
    this.reloads.inc({ result: 'ok' }, 0);
    this.reloads.inc({ result: 'failed' }, 0);
    this.lastReload = new Gauge({
      name: 'ratemesh_config_last_reload_seconds',
      help: 'Unix time of the last config reload of each result.',
      labelNames: ['result'],
      registers,
    });
    const self = this;
    new Gauge({
      name: 'ratemesh_config_info',
      help: 'Always 1; `version` is the policy-set version in force (changes when a reload changes any policy).',
      labelNames: ['version', 'file'],
      registers,
      collect() {
        this.reset();
        let version = '';
        try {
          version = limiter.policyVersion;
        } catch {}
        this.set({ version, file: self.configFile }, 1);
      },
    });
    new Gauge({
      name: 'ratemesh_policy_info',
      help: 'Always 1, one series per policy in force with its version (what gossip carries for it).',
      labelNames: ['policy', 'version'],
      registers,
      collect() {
        this.reset();
        let versions: Record<string, string> = {};
        try {
          versions = limiter.policyVersions();
        } catch {}
        for (const [policy, version] of Object.entries(versions)) this.set({ policy, version }, 1);
      },
    });

    // Scrape-time views of the limiter. A stats() failure must not break the scrape.
    const stats = (): MeshStats | undefined => {
      try {
        return limiter.stats();
      } catch {
        return undefined;
      }
    };
    const peers = () => {
      try {
        return limiter.peers();
      } catch {
        return [];
      }
    };

    new Counter({
      name: 'ratemesh_gossip_messages_total',
      help: 'Gossip messages received (in) and published (out).',
      labelNames: ['direction'],
      registers,
      collect() {
        const s = stats();
        this.reset();
        this.inc({ direction: 'in' }, num(s?.gossip.msgsIn));
        this.inc({ direction: 'out' }, num(s?.gossip.msgsOut));
      },
    });
    new Counter({
      name: 'ratemesh_gossip_bytes_total',
      help: 'Gossip payload bytes received (in) and published (out).',
      labelNames: ['direction'],
      registers,
      collect() {
        const s = stats();
        this.reset();
        this.inc({ direction: 'in' }, num(s?.gossip.bytesIn));
        this.inc({ direction: 'out' }, num(s?.gossip.bytesOut));
      },
    });
    new Counter({
      name: 'ratemesh_gossip_ticks_total',
      help: 'Gossip ticks, by interval: gossipIntervalMs (configured), or fastGossipIntervalMs while a key was tight (fast).',
      labelNames: ['interval'],
      registers,
      collect() {
        const s = stats();
        this.reset();
        const fast = num(s?.gossip.fastTicks);
        this.inc({ interval: 'configured' }, Math.max(0, num(s?.gossip.ticks) - fast));
        this.inc({ interval: 'fast' }, fast);
      },
    });
    new Counter({
      name: 'ratemesh_sync_bytes_total',
      help: 'Sync protocol bytes received (in) and sent (out).',
      labelNames: ['direction'],
      registers,
      collect() {
        const s = stats();
        this.reset();
        this.inc({ direction: 'in' }, num(s?.sync.bytesIn));
        this.inc({ direction: 'out' }, num(s?.sync.bytesOut));
      },
    });
    new Counter({
      name: 'ratemesh_gossip_dropped_total',
      help: 'Gossip messages dropped, by reason: transport drops (oversize, unsigned, ...) and ones the engine refused.',
      labelNames: ['reason'],
      registers,
      collect() {
        const s = stats();
        this.reset();
        const byReason = new Map<string, number>();
        for (const table of [s?.dropped, s?.gossip.dropped]) {
          for (const [reason, n] of Object.entries(table ?? {})) {
            byReason.set(reason, (byReason.get(reason) ?? 0) + num(n));
          }
        }
        for (const [reason, n] of byReason) this.inc({ reason }, n);
      },
    });
    new Gauge({
      name: 'ratemesh_peers_live',
      help: 'Peers whose data is fresh.',
      registers,
      collect() {
        this.set(peers().filter((p) => !p.stale).length);
      },
    });
    new Gauge({
      name: 'ratemesh_peers_stale',
      help: 'Known peers whose data is stale.',
      registers,
      collect() {
        this.set(peers().filter((p) => p.stale).length);
      },
    });
    new Gauge({
      name: 'ratemesh_fallback_active',
      help: '1 when every known peer is stale, so global policies enforce the static L/N share.',
      registers,
      collect() {
        this.set(fallbackActive(limiter) ? 1 : 0);
      },
    });
    new Gauge({
      name: 'ratemesh_policy_slow_gossip',
      help:
        'Per global policy whose window is under twice the gossip horizon (gossip interval plus the data age on ' +
        'arrival): 1. There bursts on many nodes at once can pass its limit (controlled: by a few percent).',
      labelNames: ['policy'],
      registers,
      collect() {
        this.reset();
        for (const policy of stats()?.engine.slowGossip ?? []) this.set({ policy }, 1);
      },
    });
    new Counter({
      name: 'ratemesh_gossip_capped_total',
      help: 'Peer counts capped because the origin could not have admitted that much.',
      registers,
      collect() {
        this.reset();
        this.inc(num(stats()?.engine.capped));
      },
    });
    new Gauge({
      name: 'ratemesh_tracked_keys',
      help: 'Keys the engine holds state for (bounded by its key cap).',
      registers,
      collect() {
        this.set(num(stats()?.engine.keys));
      },
    });
    new Counter({
      name: 'ratemesh_key_evictions_total',
      help: 'Keys evicted by the engine to stay within its key cap.',
      registers,
      collect() {
        this.reset();
        this.inc(num(stats()?.engine.evictions));
      },
    });
    // Issue 11: what the engine does about churn, hostile members, skewed clocks and key floods.
    const engineCounter = (name: string, help: string, field: EngineCount) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset();
          this.inc(num(stats()?.engine[field]));
        },
      });
    const engineGauge = (name: string, help: string, field: EngineCount) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(num(stats()?.engine[field]));
        },
      });
    engineCounter(
      'ratemesh_peers_ignored_total',
      'Times a peer was ignored for a while after repeatedly sending counts it could not have admitted.',
      'peersIgnored',
    );
    engineCounter(
      'ratemesh_clock_skewed_messages_total',
      'Peer messages not merged because the peer clock is off by more than maxClockOffsetMs.',
      'clockSkewed',
    );
    engineGauge(
      'ratemesh_peers_clock_skewed',
      'Peers whose clock is off by more than maxClockOffsetMs now (treated as stale).',
      'skewedPeers',
    );
    engineGauge(
      'ratemesh_peer_table_size',
      'Peers in the table: members and departed peers whose counts are still in a window.',
      'peerTable',
    );
    engineCounter(
      'ratemesh_peers_forgotten_total',
      'Departed peers forgotten once their counts left every window (their slot reused).',
      'peersForgotten',
    );
    engineCounter(
      'ratemesh_key_evictions_live_total',
      'Keys evicted with counts still in their window (recorded in the eviction sketch).',
      'evictedLive',
    );
    engineGauge('ratemesh_eviction_sketch_bytes', 'Bytes held by the eviction sketches.', 'sketchBytes');
    new Gauge({
      name: 'ratemesh_view_age_seconds',
      help: "Age of the oldest peer data this node's view holds (0 with no peers).",
      registers,
      collect() {
        this.set(viewAgeMs(peers()) / 1000);
      },
    });
    new Gauge({
      name: 'ratemesh_clock_offset_seconds',
      help: "Estimated clock offset of each peer (peer's wall clock minus ours).",
      labelNames: ['peer'],
      registers,
      collect() {
        this.reset();
        for (const p of peers())
          if (Number.isFinite(p.clockOffsetMs)) this.set({ peer: p.id }, p.clockOffsetMs / 1000);
      },
    });
    new Counter({
      name: 'ratemesh_dial_failures_total',
      help: 'Failed dials of bootstrap addresses, by reason: encryption (most likely a psk mismatch), refused, timeout, unreachable, other.',
      labelNames: ['reason'],
      registers,
      collect() {
        const s = stats();
        this.reset();
        for (const reason of ['encryption', 'refused', 'timeout', 'unreachable', 'other'] as const)
          this.inc({ reason }, num(s?.discovery.dialFailures?.[reason]));
      },
    });
    new Counter({
      name: 'ratemesh_dns_errors_total',
      help: 'Failed lookups of dns:<name>:<port> bootstrap entries.',
      registers,
      collect() {
        this.reset();
        this.inc(num(stats()?.discovery.dnsErrors));
      },
    });
    new Gauge({
      name: 'ratemesh_peers_other_topic',
      help: 'Peers seen on another ratemesh topic (another wire format, so another ratemesh version): their gossip is not merged.',
      registers,
      collect() {
        this.set(Object.keys(stats()?.otherTopics.peers ?? {}).length);
      },
    });
    new Gauge({
      name: 'ratemesh_policy_version_mismatch_peers',
      help: 'Members that run another version of the policy (during a rolling change): their counts for it are not merged, each counts as spending at least L/N.',
      labelNames: ['policy'],
      registers,
      collect() {
        this.reset();
        const vm = stats()?.versionMismatch ?? {};
        for (const [policy, m] of Object.entries(vm)) this.set({ policy }, Object.keys(m.peers).length);
      },
    });
    new Gauge({
      name: 'ratemesh_info',
      help: 'Always 1; labels identify this node and its gossip topic (one per wire format).',
      labelNames: ['peer_id', 'topic'],
      registers,
      collect() {
        this.reset();
        let topic = '';
        try {
          topic = limiter.topic;
        } catch {}
        this.set({ peer_id: limiter.peerId, topic }, 1);
      },
    });
  }

  /** Records one decision (`rule`: why, when limited) and how long the limiter took, seconds. */
  decision(
    policy: string,
    result: DecisionResult,
    mode: DecisionMode,
    seconds: number,
    rule: DecisionRule,
  ): void {
    this.decisions.inc({ policy, result, mode });
    if (result !== 'allowed') this.denials.inc({ policy, rule });
    this.latency.observe(seconds);
  }

  checkError(code: string): void {
    this.checkErrors.inc({ code });
  }

  /** A config reload: `ok` (in force) or `failed` (refused), at unix time `at` (ms). */
  reload(result: 'ok' | 'failed', at: number): void {
    this.reloads.inc({ result });
    this.lastReload.set({ result }, Math.floor(at / 1000));
  }

  request(route: RouteLabel, status: number): void {
    this.requests.inc({ route, status: String(status) });
  }

  /** The exposition text and its content type. */
  async expose(): Promise<{ body: string; contentType: string }> {
    return { body: await this.registry.metrics(), contentType: this.registry.contentType };
  }
}

/** The engine's figures a scrape reads by name. */
type EngineCount = {
  [K in keyof EngineStats]: EngineStats[K] extends number ? K : never;
}[keyof EngineStats];

/** A count for a series: 0 when the figure is missing (a stats() that threw) or not a count. */
function num(v: number | undefined): number {
  return v !== undefined && Number.isFinite(v) && v >= 0 ? v : 0;
}

/**
 * Whether the node decides in the L/N fallback now: the engine's answer (`EngineStats.fallback`:
 * every member stale, or peers expected and not all heard yet, a starting node), the one
 * definition that /healthz, /v1/peers and `ratemesh_fallback_active` all use. False when the
 * limiter cannot say (its stats() threw).
 */
export function fallbackActive(limiter: MeshLimiter): boolean {
  return engineStatsOf(limiter)?.fallback === true;
}

/** The engine's stats (the fallback, the start gate), or undefined when the limiter cannot say (its stats() threw). */
export function engineStatsOf(limiter: MeshLimiter): EngineStats | undefined {
  try {
    return limiter.stats().engine;
  } catch {
    return undefined;
  }
}

/** The oldest peer data in the view, ms; 0 with no peers. */
export function viewAgeMs(peers: readonly { ageMs: number }[]): number {
  let max = 0;
  for (const p of peers) if (Number.isFinite(p.ageMs) && p.ageMs > max) max = p.ageMs;
  return max;
}
