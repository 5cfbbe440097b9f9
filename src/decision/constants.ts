/**
 * Defaults of the engine's options, in one place: the mesh (src/mesh/constants.ts) takes the
 * ones it shares with the engine from here, so a knob has one default whichever layer fills it.
 */

/**
 * Gossip tick interval g, ms: the mesh's, and the engine's when it runs alone. 100 ms is the
 * smallest 8 signed nodes on 2 cores sustain (mesh-test/README.md); the simulator and the
 * decision tests pass 10.
 */
export const DEFAULT_GOSSIP_INTERVAL_MS = 100;
/** Expected one-way gossip delay d, ms. */
export const DEFAULT_EXPECTED_DELAY_MS = 10;

/**
 * A peer is stale when its newest data is older than this: three ticks, a delay, and the
 * expected age of its data on arrival ({@link dataDelayMs}; d when gossip comes straight from
 * its origin, so 3g + 2d by default).
 */
export function defaultStaleAfterMs(
  gossipIntervalMs: number,
  expectedDelayMs: number,
  relayHops = 0,
): number {
  return 3 * gossipIntervalMs + expectedDelayMs + dataDelayMs(gossipIntervalMs, expectedDelayMs, relayHops);
}

/** Most relay hops an engine accepts (a relay of fanout 2 reaches 4,096 nodes in about 17). */
export const MAX_RELAY_HOPS = 64;
/** Ticks whose build times EngineCore.tickTimes keeps, less one (a power of two less one). */
export const TICK_TIMES_MASK = 63;

/**
 * The expected age of a peer's data when it arrives, ms: d when it comes straight from its
 * origin; through `relayHops` relays, each waits for its next tick (g / 2 on average: relays'
 * ticks are spread over the interval) and forwards it, one more delay d.
 */
export function dataDelayMs(gossipIntervalMs: number, expectedDelayMs: number, relayHops: number): number {
  return expectedDelayMs + relayHops * (gossipIntervalMs / 2 + expectedDelayMs);
}

/**
 * The relay hops to expect when each node forwards, once a tick, what it learned to `fanout`
 * random peers among `members` (push gossip, each node forwarding each message once): about
 * log_f(N) rounds to reach most nodes and ln(N) / f more for the last ones. 0 when there is
 * nothing to relay (N <= 2 or a fanout reaching every other node). In the simulator (g = 100,
 * d = 10) the resulting {@link dataDelayMs} is about the 99.9th percentile of first-arrival ages
 * at N = 64 to 1,024 with f = 4 (docs/scale.md, "Relay").
 */
export function expectedRelayHops(members: number, fanout: number): number {
  if (!(members > 2) || !(fanout >= 1) || fanout >= members - 1) return 0;
  const f = Math.max(fanout, 2);
  return Math.min(MAX_RELAY_HOPS, Math.ceil(Math.log(members) / Math.log(f) + Math.log(members) / fanout));
}

/** The shortest default silence after which a peer departs, ms. */
export const MIN_DEPART_AFTER_MS = 5_000;

/** A silent peer departs after ten staleness periods, and never sooner than {@link MIN_DEPART_AFTER_MS}. */
export function defaultDepartAfterMs(staleAfterMs: number): number {
  return Math.max(MIN_DEPART_AFTER_MS, 10 * staleAfterMs);
}

/** Cap on tracked keys over all policies (the key store's default). */
export { DEFAULT_MAX_KEYS } from '../keys/key-store.js';
/** Cap on known origins (peers): 1,024 members (about 1 KB each, `npm run bench:memory`). */
export const DEFAULT_MAX_PEERS = 1024;
/** A touched key is carried in this many more ticks (0: loss is repaired on request, see gossip.ts). */
export const DEFAULT_REPEAT_TICKS = 0;
/** Every this many ticks every key with own counts is carried (anti-entropy). */
export const DEFAULT_ANTI_ENTROPY_TICKS = 50;
/** Early publish when a key's unsent own count reaches this fraction of its limit. */
export const DEFAULT_EARLY_PUBLISH_FRACTION = 0.05;
/** Most keys one gossip message may carry. */
export const DEFAULT_MAX_KEYS_PER_MESSAGE = 2048;
/** Most bytes of one gossip message this node sends (the rest waits for the next ticks). */
export const DEFAULT_MAX_GOSSIP_BYTES = 32 * 1024;
/** Capped messages within a window before a peer is ignored. */
export const DEFAULT_STRIKES_TO_IGNORE = 3;
/** Width of each policy's eviction sketch. */
export const DEFAULT_SKETCH_WIDTH = 8192;
/** A peer whose clock is further off than this is treated as stale, ms. */
export const DEFAULT_MAX_CLOCK_OFFSET_MS = 1000;

/** How long a peer that sent counts it could not have admitted is ignored, ms: two windows, 60 s to 1 h. */
export function defaultIgnoreMs(longestWindowMs: number): number {
  return Math.min(3_600_000, Math.max(60_000, 2 * longestWindowMs));
}

/**
 * Longest a departed peer keeps its slot in the peer table, ms (10 min). Its counts then move into
 * each key's unattributed floor, where they stay counted until they leave the window.
 */
export const RETAIN_MAX_MS = 600_000;

/** The largest time (epoch ms, either sign) an engine accepts: bucket ids stay exact integers. */
export const MAX_TIME = 2 ** 50;
