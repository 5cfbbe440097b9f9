import type { Clock } from '../clock.js';
import type { OwnerStats } from '../decision/owner.js';
import type { PeerView } from '../decision/peers.js';
import type { EngineStats, PolicyReplacement } from '../decision/types.js';
import type { Logger } from '../logger.js';
import type { PolicySet } from '../policy/index.js';
import type { Decision, Explanation, KeyOutcome, PolicyKey, PolicySpec, RateLimiter } from '../types.js';
import type { DirectGossipStats } from './direct-gossip.js';
import type { DiscoveryStats } from './discovery.js';
import type { EngineFactory } from './engine-port.js';
import type { OwnerServiceStats } from './owner-service.js';
import type { ShutdownOptions } from './shutdown.js';

export type { Logger } from '../logger.js';

/** Options of {@link MeshLimiter}; validated at construction (errors name the field). */
export interface MeshLimiterOptions {
  policies: readonly PolicySpec[];
  /** libp2p listen multiaddrs, e.g. ['/ip4/127.0.0.1/tcp/0']. */
  listen?: readonly string[];
  /** Multiaddrs of peers to dial (with /p2p/<id> or without), or `dns:<name>:<port>` entries resolved to every address. */
  bootstrap?: readonly string[];
  /** Protobuf-encoded libp2p private key (Ed25519); a new one when absent. */
  privateKey?: Uint8Array;
  /**
   * Pre-shared key (libp2p pnet swarm key file contents) so outsiders cannot join. Required
   * when any listen or bootstrap address is not loopback, unless `insecure: true`.
   */
  psk?: Uint8Array;
  /**
   * Run on non-loopback addresses without a psk: anyone who can reach the port can join the
   * mesh and gossip counts (docs/security.md says what a member can do). Logged as a warning.
   * Default false.
   */
  insecure?: boolean;
  /**
   * Write this node's windows here on stop and restore them at start (while still inside the
   * window), so a lone node's restart does not reopen its limits. Off by default: in a mesh a
   * restarted node pulls its peers' windows by sync instead.
   */
  snapshotFile?: string;
  /** Gossip tick interval, ms. Default 100 (the smallest 8 signed nodes on 2 cores sustain: mesh-test/README.md). */
  gossipIntervalMs?: number;
  /** Expected one-way gossip delay, ms (feeds staleness). Default 10. */
  expectedDelayMs?: number;
  /**
   * The tick interval while a key is tight (its node's own counts, at their average rate over
   * the window, would take half its share of the headroom or more over two horizons at
   * gossipIntervalMs: Engine.wantsFastGossip), ms,
   * and for two intervals after. `'auto'` (default): as often as broadcast brings each node at
   * most 1,000 messages a second, (M - 1) ms at M members, and no more often than
   * expectedDelayMs; off where that is over half of gossipIntervalMs (52 members and more at
   * 100 ms) and while relaying. 0: off (every tick gossipIntervalMs apart). A number: that
   * interval, 1 .. gossipIntervalMs (docs/decision-rule.md, "Rounds, and tight keys").
   */
  fastGossipIntervalMs?: number | 'auto';
  /**
   * When nodes gossip: `spread`, the only schedule, each node every gossipIntervalMs on its own
   * phase (and at once when it has spent a part of L worth telling). `aligned` (every node in one
   * round) was removed and is refused: it admitted less and denied more on every row measured
   * (docs/decision-rule.md, "Removed by this rule").
   */
  gossipRounds?: 'spread';
  logger?: Logger;
  clock?: Clock;
  /** Experiments only: hold received gossip this long, ms. Logged loudly when set. */
  injectDelayMs?: number;
  /** Experiments only: drop this fraction of received gossip. Logged loudly when set. */
  injectLoss?: number;
  /** Experiments only: seed of the loss draw (xorshift32), so runs repeat. Default: random. */
  injectSeed?: number;
  /** Gossipsub mesh degree. Default { D: 3, Dlo: 2, Dhi: 4 }. */
  meshDegree?: { D: number; Dlo: number; Dhi: number };
  /**
   * Whether received gossip is relayed through the gossipsub mesh. `'auto'`
   * (default): only when its origin did not reach every member this node knows
   * directly (every message carries how many it reached), so a full mesh, as
   * a DNS name or a complete bootstrap list gives, sends each message once to
   * each node, and a partial one still relays. `'always'`: every message
   * (plain gossipsub). `'never'`: none (only for a mesh known to be full).
   */
  relay?: RelayMode;
  /**
   * Relay mode (direct transport): once a tick each node sends ONE frame to
   * this many random peers (a new draw each tick) holding its own message and
   * the newest message of every origin it learned since its last tick, each
   * signed by its origin; receivers verify, merge what is new and relay it on.
   * Messages per node per tick stay at `relayFanout` whatever the mesh size;
   * counts take a few hops (about log_f N ticks) to reach everyone. `'auto'`
   * (default): broadcast while this node sees at most `autoRelayMembers`
   * members, relay at fanout 4 above that, broadcast again at 3/4 of it or
   * under (src/mesh/auto-relay.ts); the engine's relayHops follows each switch.
   * 0: always broadcast, each message straight to every connected peer. 1..16:
   * always relay at that fanout. Members in either mode deliver each other's
   * counts (a broadcasting node forwards what reaches it in relay batches).
   */
  relayFanout?: number | 'auto';
  /**
   * `relayFanout: 'auto'`: relay once this node sees more members than this (itself included).
   * Default 1 + gossipIntervalMs (where broadcast would bring 1,000 messages in per node a
   * second: 101 members at g = 100 ms). 2..1,000,000.
   */
  autoRelayMembers?: number;
  /**
   * Relay mode: most members this node's own item carries an 8-byte MAC for
   * (pairwise keys from X25519 on the identity keys, src/mesh/relay-mac.ts).
   * A member that finds its MAC checks it (~4 µs) instead of the Ed25519
   * signature (~75-110 µs); the others, and members of older versions, check
   * the signature. Each entry costs 12 bytes per item per hop. Default 64; 0:
   * this node's items carry none. 0..1024; ignored in broadcast mode.
   */
  relayMacPeers?: number;
  /**
   * Relay mode: the hops a member's gossip may take to reach this node beyond the first,
   * which the engine's staleness and unseen horizon allow for (EngineOptions.relayHops).
   * Default: expectedRelayHops(members, relayFanout), at least 1: members = 1 + the bootstrap
   * entries with a relayFanout set (every member must list the mesh), the members seen when
   * 'auto' switches to relay. 0..64; ignored in broadcast mode.
   */
  relayHops?: number;
  /**
   * Most peers this node dials from its bootstrap list (a random subset, redrawn
   * while short); peers that dial it come on top. Default: every entry in
   * broadcast mode and under 'auto', max(6, 2 × relayFanout) with a relayFanout set (a relay needs only a
   * few links; every member is still heard through them). 0: every entry.
   */
  dialPeers?: number;
  /** Gossipsub heartbeat (mesh upkeep), ms. Default 700. */
  heartbeatMs?: number;
  /** Largest gossip message accepted from a peer, bytes; larger ones are dropped and counted. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Largest sync request / response frame, bytes. Default 16 MiB. */
  maxSyncBytes?: number;
  /** A sync exchange (dial, request, response) must finish within this, ms. Default 5000. */
  syncTimeoutMs?: number;
  /** How often bootstrap entries are re-resolved and unconnected ones redialled, ms. Default 2000. */
  discoveryIntervalMs?: number;
  /**
   * How long `health().ready` waits after `start()` to join the mesh while bootstrap entries
   * name other members and none has answered a sync yet, ms; then ready in the L/N fallback
   * all the same. The daemon's `/readyz` follows the same rule (src/mesh/join.ts). Default 10000.
   */
  joinTimeoutMs?: number;
  /** A dial (TCP, pnet, noise, yamux) must finish within this, ms. Default 5000. */
  dialTimeoutMs?: number;
  /**
   * A member silent this long departs, ms; while no other member is live, only once it has
   * also been disconnected this long (the engine's depart rule, src/decision/peers.ts).
   * Default max(5000, 10 × staleness), staleness being 3 gossip intervals + 2 expected delays.
   */
  departAfterMs?: number;
  /** Connections per second one host may open to us (libp2p's default of 5 breaks a loopback mesh). Default 100. */
  inboundConnectionThreshold?: number;
  /** Most libp2p connections kept. Default 64. */
  maxConnections?: number;
  /** Tests only: builds the engine instead of the real decision engine. */
  engineFactory?: EngineFactory;
}

/** The sync protocol's counters (`/ratemesh/sync/1.0.0`). */
export interface SyncStats {
  pulls: number;
  pullsOk: number;
  pullsFailed: number;
  served: number;
  bytesIn: number;
  bytesOut: number;
  /** By reason: timeout, too-large, no-frame, dial, engine:<reason>, ... */
  failures: Record<string, number>;
}

/** See {@link MeshLimiterOptions.relay}. */
export type RelayMode = 'auto' | 'always' | 'never';

/** Where a mesh node is in its life. */
export type MeshState = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

/** What a liveness and a readiness probe need to know of an embedded node ({@link MeshLimiter.health}). */
export interface MeshHealth {
  /** The process should be kept: false only once the node is stopped (or failed to start). */
  live: boolean;
  /**
   * The node can decide and has joined the mesh it was pointed at: running, not shutting down,
   * and alone (no bootstrap), or its bootstrap resolved to no other member (the first pod), or
   * a sync answer from a member has been merged, or `joinTimeoutMs` passed since `start()`; and
   * past its start gate (`starting` false). The rule of the daemon's `/readyz`
   * (src/mesh/join.ts). True in the L/N fallback too (a single replica, the first pod, every
   * peer stale in a partition), and kept once joined. Until then `check` denies global
   * policies with rule `starting` (docs/decision-rule.md, "Starting").
   */
  ready: boolean;
  /**
   * The start gate is shut: the node expects members and decides no global policy until every
   * member it expects is heard and each has heard it (or, none heard, until it has joined: then
   * L/N). A mesh that keeps nothing for a member it has not heard would not count what it admits.
   */
  starting: boolean;
  /** The node has joined the mesh (see `ready`); false before `start()`. */
  joined: boolean;
  state: MeshState;
  /** `shutdown()` has begun. */
  draining: boolean;
  /** Deciding on the static L/N share (no fresh view of the peers). */
  fallback: boolean;
  peers: { live: number; stale: number };
  /** Why `ready` is false. */
  reason?: string;
}

/** A rate limiter that is one node of a ratemesh mesh. `check` never touches the network. */
export interface MeshLimiter extends RateLimiter {
  start(): Promise<void>;
  /**
   * Says farewell (the peers count this node departed at once) and leaves no handles,
   * sockets or timers behind. After it `ready` is false and the HTTP adapters answer 503
   * (never fail open: a stopped node cannot limit). To shut a serving instance down, use
   * {@link EmbeddedMeshLimiter.shutdown}, which closes the servers first.
   */
  stop(): Promise<void>;
  readonly peerId: string;
  multiaddrs(): string[];
  /** The members as this node sees them, each with the addresses the transport is connected to it on (`addrs`). */
  peers(): PeerView[];
  stats(): MeshStats;
  /**
   * Every term of the decision `check` would make now for `cost` on (`policy`, `key`), as
   * numbers, changing nothing: the counts seen, the reserves, the share, when it would pass.
   */
  explain(policy: string, key: string, cost?: number): Explanation;
  /** The gossip topic, `ratemesh/5` (one per wire format, whatever the policies). */
  readonly topic: string;
  /** The policy-set version in force (one hash of every policy; informational). */
  readonly policyVersion: string;
  /** The version of each policy in force, by name (what the wire carries per policy). */
  policyVersions(): Record<string, string>;
  /**
   * Replace the policy set at runtime (a config reload): validated first (a
   * RateMeshError and nothing changed when invalid); unchanged policies keep
   * their counts, changed ones start fresh under their new version, removed
   * ones are dropped. Takes effect for the next check and the next gossip tick.
   */
  replacePolicies(policies: readonly PolicySpec[] | PolicySet): PolicyReplacement;
}

/**
 * A mesh limiter made by createMeshLimiter: a {@link MeshLimiter} whose async checks are always there.
 * (MeshLimiter keeps them optional, as RateLimiter does, so test doubles need not have them.)
 */
export interface OwnerMeshLimiter extends MeshLimiter {
  /**
   * Owner placement (docs/owner.md): `check` for keys that may be owned by another member. A key
   * decided here resolves at once with no call; one owned elsewhere is asked of its owner over
   * the mesh (one round trip, batched per link), and past the policy's `ownerDeadlineMs` takes
   * the policy's failure mode (`Decision.owner` says which). Before `start()` every key is
   * decided here by the local rule.
   */
  checkAsync(policy: string, keys: string | readonly string[], cost?: number): Promise<Decision>;
  /** {@link checkAsync} for several (policy, key) pairs, all-or-nothing as `checkAll`. */
  checkAllAsync(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): Promise<Decision & { outcomes: KeyOutcome[] }>;
}

/**
 * What {@link createMeshLimiter} returns: a {@link MeshLimiter} with the lifecycle of
 * an instance that embeds it (graceful shutdown, probes).
 */
export interface EmbeddedMeshLimiter extends OwnerMeshLimiter {
  /**
   * The graceful shutdown of an instance embedding this node (call it on SIGTERM), in this
   * order: readiness turns false (`health().ready`), requests are still served for
   * `delayMs`; each of `servers` stops accepting and its in-flight requests finish (their
   * connections are closed after `graceMs`); then `stop()` sends the farewell, which carries
   * what those last requests admitted. Idempotent.
   */
  shutdown(options?: ShutdownOptions): Promise<void>;
  /** Liveness and readiness for probes (`/livez`, `/readyz`); see {@link MeshHealth}. */
  health(): MeshHealth;
  /** Where the node is in its life (the HTTP adapters answer 503 once it is `stopping` or `stopped`). */
  readonly lifecycle: MeshState;
}

/** Counters of the network layer; the engine's own figures are under `engine`. */
export interface MeshStats {
  peerId: string;
  topic: string;
  running: boolean;
  /** `members` and `departed` are the engine's (its peer table and depart rule); `connected` the transport's. */
  peers: { connected: number; members: number; departed: number };
  gossip: {
    ticks: number;
    /** Ticks that came at the fast interval (a key tight: fastGossipIntervalMs). */
    fastTicks: number;
    /** Times fast ticks ran late by half their interval on average, after which the node ticked at gossipIntervalMs for ten of those (short of CPU). */
    fastHeld: number;
    earlyPublishes: number;
    msgsOut: number;
    bytesOut: number;
    publishErrors: number;
    msgsIn: number;
    bytesIn: number;
    /** Received messages the engine dropped, by its reason (the engine keeps its own detailed counts). */
    dropped: Record<string, number>;
    /**
     * Received messages handed back to the transport to relay, and not to (their origin reached
     * everyone we know). In relay mode (`relayFanout`) every merged message is relayed.
     */
    relayed: number;
    notRelayed: number;
    /** Received messages that came through another node than their origin (no clock-offset sample). */
    relayedIn: number;
  };
  /**
   * Relay or broadcast now: `fanout` (0: broadcast), the engine's `relayHops`, whether
   * `relayFanout` is 'auto', and how often 'auto' switched (or rebuilt the engine for more hops).
   */
  relay: { auto: boolean; fanout: number; relayHops: number; switches: number };
  /** The direct transport's own counters (frames, relay batches, signatures checked, drops); absent over gossipsub. */
  transport?: DirectGossipStats;
  /** Messages the transport dropped, by reason (oversize, unsigned, self, stopped, ...). */
  dropped: Record<string, number>;
  injected: { delayMs: number; loss: number; delayed: number; dropped: number };
  sync: SyncStats;
  /** Owner placement: the ask protocol's counters and the engine's (decided as owner, fallbacks by reason). */
  owner?: OwnerServiceStats & { engine?: OwnerStats };
  /**
   * Per policy: the members that run another version of it than ours (peer id
   * → their version). Their counts for that policy are not merged and each
   * counts as spending at least L/N of it; every other policy merges as usual.
   */
  versionMismatch: Record<string, { ours: string; peers: Record<string, string> }>;
  /** Peers seen subscribing to another ratemesh topic (another wire format): never merged. */
  otherTopics: { events: number; peers: Record<string, string> };
  /** Dials of bootstrap addresses; `dialFailures` by reason (`encryption`: most likely a psk mismatch). */
  discovery: DiscoveryStats;
  engine: EngineStats;
}
