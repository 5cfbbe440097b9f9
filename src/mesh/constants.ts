import type { TopicValidatorResult } from '@libp2p/gossipsub';

/** Defaults of the mesh layer; every one can be overridden through MeshLimiterOptions. */
/**
 * Loopback by default: a node reachable from other hosts is a choice (and needs a psk, or
 * `insecure: true`).
 */
export const DEFAULT_LISTEN: readonly string[] = ['/ip4/127.0.0.1/tcp/0'];
/**
 * Shared with the engine, one value each (src/decision/constants.ts): the gossip interval
 * (100 ms: the smallest 8 signed nodes on 2 cores sustain, mesh-test/README.md), the expected
 * delay, and the depart rule's default.
 */
export {
  DEFAULT_EXPECTED_DELAY_MS,
  DEFAULT_GOSSIP_INTERVAL_MS,
  defaultDepartAfterMs,
  defaultStaleAfterMs,
} from '../decision/constants.js';
/** Small mesh degree: a ratemesh mesh is a handful of nodes and every forward costs a signature check. */
export const DEFAULT_MESH_DEGREE = { D: 3, Dlo: 2, Dhi: 4 } as const;
export const DEFAULT_HEARTBEAT_MS = 700;
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;
export const DEFAULT_MAX_SYNC_BYTES = 16 * 1024 * 1024;
export const DEFAULT_SYNC_TIMEOUT_MS = 5_000;
export const DEFAULT_DISCOVERY_INTERVAL_MS = 2_000;
/** libp2p's default is 5 per second per host, which a loopback mesh (one host) exceeds at once. */
export const DEFAULT_INBOUND_CONNECTION_THRESHOLD = 100;
export const DEFAULT_MAX_CONNECTIONS = 64;
export const DEFAULT_DIAL_TIMEOUT_MS = 5_000;
/** Publishes allowed in flight before a tick is skipped (the next one carries the same full window). */
export const MAX_PUBLISHES_IN_FLIGHT = 8;
/** Sync pulls retried this many times per connection, spaced by SYNC_RETRY_MS × attempt. */
export const SYNC_ATTEMPTS = 3;
export const SYNC_RETRY_MS = 500;
export const SYNC_MAX_INBOUND_STREAMS = 4;
/** Gossipsub frames may batch several messages (IWANT replies): cap frames at this multiple of a message. */
export const RPC_FRAME_MESSAGES = 4;
/** The gossip topic prefix; the wire format follows. */
export const TOPIC_PREFIX = 'ratemesh/';
/**
 * The one gossip topic of this wire format, whatever the policies: versions
 * are per policy and travel in every message (docs/wire-format.md), so nodes
 * on different versions of some policy stay one membership. (Before format 3
 * the topic carried the policy-set version, and any change split the mesh.)
 */
export const TOPIC = `${TOPIC_PREFIX}5`;
/** Largest snapshot file a node reads at start, bytes (the sync frame limit). */
export const MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024;

/**
 * Gossipsub's `TopicValidatorResult` values, without loading gossipsub for them: its module
 * graph is part of the libp2p stack that node.ts loads on start(), not on `import('ratemesh')`.
 * (test/mesh/lazy-stack.test.ts checks they are gossipsub's own.)
 */
export const Validation = {
  Accept: 'accept' as TopicValidatorResult.Accept,
  Ignore: 'ignore' as TopicValidatorResult.Ignore,
  Reject: 'reject' as TopicValidatorResult.Reject,
} as const;
