import { type Clock, systemClock } from '../clock.js';
import { LIMITS } from '../crdt/codec.js';
import type { WarnLogger } from '../logger.js';
import { compilePolicies, type PolicySet } from '../policy/index.js';
import type { PolicySpec } from '../types.js';
import { fail, integer, optional, shown } from '../validate.js';
import {
  DEFAULT_ANTI_ENTROPY_TICKS,
  DEFAULT_EARLY_PUBLISH_FRACTION,
  DEFAULT_EXPECTED_DELAY_MS,
  DEFAULT_GOSSIP_INTERVAL_MS,
  DEFAULT_MAX_CLOCK_OFFSET_MS,
  DEFAULT_MAX_GOSSIP_BYTES,
  DEFAULT_MAX_KEYS,
  DEFAULT_MAX_KEYS_PER_MESSAGE,
  DEFAULT_MAX_PEERS,
  DEFAULT_REPEAT_TICKS,
  DEFAULT_SKETCH_WIDTH,
  DEFAULT_STRIKES_TO_IGNORE,
  dataDelayMs,
  defaultDepartAfterMs,
  defaultStaleAfterMs,
  MAX_RELAY_HOPS,
} from './constants.js';

/** Options of {@link Engine}; validated at construction. */
export interface EngineOptions {
  /** Policy specs (validated here) or an already compiled set. */
  policies: readonly PolicySpec[] | PolicySet;
  /** This node's id (its libp2p peer id in a mesh). Default 'local'. */
  nodeId?: string;
  clock?: Clock;
  /** Gossip tick interval g, ms. Default 100 (the mesh's default too). */
  gossipIntervalMs?: number;
  /** Expected one-way gossip delay d, ms. Default 10. */
  expectedDelayMs?: number;
  /**
   * Relay hops a peer's gossip takes to reach this node, beyond its first (0: every node sends
   * straight to every other, the default). When nodes relay (each forwards, once a tick, what
   * it learned to a few peers), a peer's data arrives up to D = d + relayHops × (g/2 + d) old:
   * staleness and the controlled rule's unseen horizon allow for that age (see
   * {@link expectedRelayHops} for a value from the mesh size and the fanout). Default 0.
   * With relay every entry carries the key's whole window (a relay forwards each origin's
   * newest message only, so the messages between are never seen downstream: deltas and the
   * repair on a gap would not serve), and a key goes in max(repeatTicks, relayHops) messages.
   */
  relayHops?: number;
  /** A peer is stale when its newest data is older than this. Default 3g + d + D (3g + 2d without relay). */
  staleAfterMs?: number;
  /**
   * A silent member departs after this: while another member is live, or once the transport
   * has also reported its connection gone this long (see {@link Engine.peerConnection}).
   * Default max(5 s, 10 × staleAfter).
   */
  departAfterMs?: number;
  /**
   * Members this node expects, itself included (a mesh node: 1 + its bootstrap
   * peers). Until it hears any peer it enforces L/N with this N, so a node that
   * starts or restarts does not spend the whole limit alone. Default 1 (standalone).
   */
  expectedMembers?: number;
  /**
   * This node's id was made at its start (no earlier run had it): a sync answer's echo of its own
   * id is then only what this run admitted, held as its own already, and is not merged. Default
   * false: the echo counts as an unattributed floor (what an earlier run under the id admitted).
   */
  freshId?: boolean;
  /**
   * This engine replaces one of the same node that its peers hear already (a rebuild in place):
   * it decides at once, without waiting for its peers to have heard it (see
   * {@link EngineCore.startOpen}). Default false.
   */
  rebuilt?: boolean;
  /**
   * A node that expects peers and hears none decides nothing on a global policy for this long
   * after its first gossip message (or until {@link Engine.joined}), then decides as a node cut
   * off (L/N): a running mesh it has not reached would not count what it admits. Default: the
   * staleness period; a mesh node passes its join timeout (MeshOptions.joinTimeoutMs).
   */
  joinTimeoutMs?: number;
  /** Cap on tracked keys over all policies. Default 100,000. */
  maxKeys?: number;
  /** Cap on known origins (peers). Default 1,024 (about 1 KB each, plus 300-650 B per key it touches). */
  maxPeers?: number;
  /**
   * A touched key is carried again in this many more ticks (its counts since it was last sent).
   * Default 0: a lost message is repaired on request instead (a receiver that sees a gap in the
   * sequence numbers asks for it, and the sender resends the whole window of what it sent since).
   */
  repeatTicks?: number;
  /** Every this many ticks, every key with own counts in its window is carried whole (anti-entropy). Default 50. */
  antiEntropyTicks?: number;
  /** Ask for an early publish when a key's unsynced own count reaches this fraction of its limit. Default 0.05. */
  earlyPublishFraction?: number;
  /**
   * Most keys one gossip message may carry: a received message with more is
   * dropped whole before anything is merged (`too-many-keys`), and this node
   * never sends more (the rest go in the next ticks). Default 2,048.
   */
  maxKeysPerMessage?: number;
  /**
   * Most bytes one gossip message this node sends may take (header and entries, an upper
   * bound): keys past it go in the next ticks, the ones with unsent admissions first. At
   * least 1,024, at most 1 MiB. Default 32 KiB.
   */
  maxGossipBytes?: number;
  /** A peer with this many capped messages within a window is ignored for {@link ignoreMs}. Default 3. */
  strikesToIgnore?: number;
  /** How long a peer that sent counts it could not have admitted is ignored, ms. Default max(60 s, 2 × the longest window). */
  ignoreMs?: number;
  /** Seed of the eviction sketch's hashing. Default: random per engine (an outsider cannot aim collisions). */
  sketchSeed?: number;
  /** Width of each policy's eviction sketch (a power of two; 4 rows of it, 5 time slots). Default 8,192. */
  sketchWidth?: number;
  /** Where the engine reports what an operator should see (a peer ignored, a peer departed): pino-compatible. Default none. */
  logger?: WarnLogger;
  /**
   * A peer whose clock is estimated further off than this (ms, either way) is
   * treated as stale: its counts are not merged, it counts as spending at
   * least L/N, and it is logged. Within it, its counts are moved into our
   * buckets by the estimated offset. Default 1,000.
   */
  maxClockOffsetMs?: number;
}

/** {@link EngineOptions} validated, every default filled in. */
export interface EngineConfig {
  readonly policySet: PolicySet;
  readonly nodeId: string;
  readonly clock: Clock;
  readonly gossipIntervalMs: number;
  readonly expectedDelayMs: number;
  readonly relayHops: number;
  /** D: the expected age of a peer's data on arrival, d + relayHops × (g/2 + d) (d without relay). */
  readonly dataDelayMs: number;
  readonly staleAfterMs: number;
  readonly departAfterMs: number;
  readonly expectedMembers: number;
  readonly freshId: boolean;
  readonly rebuilt: boolean;
  readonly joinTimeoutMs: number;
  readonly maxKeys: number;
  readonly maxPeers: number;
  readonly repeatTicks: number;
  readonly antiEntropyTicks: number;
  readonly earlyPublishFraction: number;
  readonly maxKeysPerMessage: number;
  readonly maxGossipBytes: number;
  readonly strikesToIgnore: number;
  /** Undefined: derived from the longest window (see defaultIgnoreMs). */
  readonly ignoreMs: number | undefined;
  readonly sketchSeed: number;
  readonly sketchWidth: number;
  readonly logger: WarnLogger | undefined;
  readonly maxClockOffsetMs: number;
}

/** An integer option >= `min`, or `dflt` when left out. */
function int(v: unknown, field: string, dflt: number, min = 1): number {
  return optional(v, dflt, (x) => integer(x, field, min));
}

/** A compiled policy set (kept as is) or specs to compile. */
export function policySetOf(policies: unknown, needVersionOf = false): PolicySet {
  const ps = policies;
  return ps !== null &&
    typeof ps === 'object' &&
    'version' in ps &&
    'byName' in ps &&
    (!needVersionOf || 'versionOf' in ps)
    ? (ps as PolicySet)
    : compilePolicies(ps);
}

/** Validates every option (a RateMeshError CONFIG_INVALID naming the field) and fills the defaults. */
export function parseEngineOptions(opts: EngineOptions): EngineConfig {
  if (opts === null || typeof opts !== 'object') fail('options', 'options must be an object');
  if ((opts as { roundLeadMs?: unknown }).roundLeadMs !== undefined)
    fail(
      'roundLeadMs',
      'was removed with aligned gossip rounds, which admitted less and denied more than spread rounds on every row measured (docs/decision-rule.md, "Removed by this rule")',
    );
  const policySet = policySetOf(opts.policies);
  const nodeId = opts.nodeId ?? 'local';
  if (typeof nodeId !== 'string' || nodeId.length === 0 || nodeId.length > 128) {
    fail('nodeId', 'must be a string of 1..128 characters');
  }
  const clock = opts.clock ?? systemClock;
  const gossipIntervalMs = int(opts.gossipIntervalMs, 'gossipIntervalMs', DEFAULT_GOSSIP_INTERVAL_MS);
  const expectedDelayMs = int(opts.expectedDelayMs, 'expectedDelayMs', DEFAULT_EXPECTED_DELAY_MS, 0);
  const relayHops = optional(opts.relayHops, 0, (x) => integer(x, 'relayHops', 0, MAX_RELAY_HOPS));
  const staleAfterMs = int(
    opts.staleAfterMs,
    'staleAfterMs',
    defaultStaleAfterMs(gossipIntervalMs, expectedDelayMs, relayHops),
  );
  const departAfterMs = int(opts.departAfterMs, 'departAfterMs', defaultDepartAfterMs(staleAfterMs));
  const maxKeys = int(opts.maxKeys, 'maxKeys', DEFAULT_MAX_KEYS);
  const maxPeers = int(opts.maxPeers, 'maxPeers', DEFAULT_MAX_PEERS);
  // A relay forwards each origin's newest message only, so a key's update must ride the next
  // messages too while older ones may still be on their hops: repeated for as many ticks.
  const repeatTicks = int(
    opts.repeatTicks,
    'repeatTicks',
    relayHops > 0 ? Math.max(DEFAULT_REPEAT_TICKS, relayHops) : DEFAULT_REPEAT_TICKS,
    0,
  );
  const antiEntropyTicks = int(opts.antiEntropyTicks, 'antiEntropyTicks', DEFAULT_ANTI_ENTROPY_TICKS);
  const earlyPublishFraction = opts.earlyPublishFraction ?? DEFAULT_EARLY_PUBLISH_FRACTION;
  if (typeof earlyPublishFraction !== 'number' || !(earlyPublishFraction > 0 && earlyPublishFraction <= 1)) {
    fail('earlyPublishFraction', `must be in (0, 1] (got ${shown(earlyPublishFraction)})`);
  }
  const expectedMembers = int(opts.expectedMembers, 'expectedMembers', 1);
  const maxKeysPerMessage = int(opts.maxKeysPerMessage, 'maxKeysPerMessage', DEFAULT_MAX_KEYS_PER_MESSAGE);
  const maxGossipBytes = int(opts.maxGossipBytes, 'maxGossipBytes', DEFAULT_MAX_GOSSIP_BYTES, 1024);
  if (maxGossipBytes > LIMITS.gossipBytes) fail('maxGossipBytes', `must be at most ${LIMITS.gossipBytes}`);
  const strikesToIgnore = int(opts.strikesToIgnore, 'strikesToIgnore', DEFAULT_STRIKES_TO_IGNORE);
  const ignoreMs = opts.ignoreMs === undefined ? undefined : int(opts.ignoreMs, 'ignoreMs', 1);
  const sketchWidth = int(opts.sketchWidth, 'sketchWidth', DEFAULT_SKETCH_WIDTH, 16);
  if (!Number.isInteger(Math.log2(sketchWidth))) {
    fail('sketchWidth', 'must be a power of two');
  }
  const sketchSeed =
    opts.sketchSeed === undefined
      ? crypto.getRandomValues(new Uint32Array(1))[0]!
      : int(opts.sketchSeed, 'sketchSeed', 0, 0) >>> 0;
  const maxClockOffsetMs = int(opts.maxClockOffsetMs, 'maxClockOffsetMs', DEFAULT_MAX_CLOCK_OFFSET_MS, 0);
  return {
    policySet,
    nodeId,
    clock,
    gossipIntervalMs,
    expectedDelayMs,
    relayHops,
    dataDelayMs: dataDelayMs(gossipIntervalMs, expectedDelayMs, relayHops),
    staleAfterMs,
    departAfterMs,
    expectedMembers,
    freshId: opts.freshId === true,
    rebuilt: opts.rebuilt === true,
    joinTimeoutMs: int(opts.joinTimeoutMs, 'joinTimeoutMs', staleAfterMs, 0),
    maxKeys,
    maxPeers,
    repeatTicks,
    antiEntropyTicks,
    earlyPublishFraction,
    maxKeysPerMessage,
    maxGossipBytes,
    strikesToIgnore,
    ignoreMs,
    sketchSeed,
    sketchWidth,
    logger: opts.logger,
    maxClockOffsetMs,
  };
}
