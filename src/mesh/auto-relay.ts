import { expectedRelayHops, MAX_RELAY_HOPS } from '../decision/constants.js';

/**
 * `relayFanout: 'auto'` (the default): broadcast while the membership a node sees is small,
 * relay once direct broadcast would bring it too many messages.
 *
 * Broadcast brings each node (M - 1) messages a tick, (M - 1) · 1000 / g a second. A node
 * relays (fanout {@link AUTO_RELAY_FANOUT}: 1000 · f / g messages in a second, 40 at
 * g = 100 ms whatever M) once M passes {@link defaultAutoRelayMembers} (broadcast would pass
 * {@link AUTO_BROADCAST_MSGS_PER_S}; 101 members at g = 100 ms), and broadcasts again once M is
 * back at 3/4 of that or under (a band, so that one member coming and going does not switch
 * the mesh back and forth). Small meshes, where broadcast is measured best (bench:accuracy,
 * bench:scale up to 64 nodes), never relay.
 */

/** The fanout of auto relay: 40 messages in per node a second at g = 100 ms (bench:scale). */
export const AUTO_RELAY_FANOUT = 4;
/** Auto relay starts where broadcast would bring each node more messages a second than this. */
export const AUTO_BROADCAST_MSGS_PER_S = 1_000;

/** Most members a node broadcasts to under 'auto' by default: 1 + g / 1000 · AUTO_BROADCAST_MSGS_PER_S. */
export function defaultAutoRelayMembers(gossipIntervalMs: number): number {
  return 1 + Math.floor((AUTO_BROADCAST_MSGS_PER_S * gossipIntervalMs) / 1000);
}

/** Auto relay stops once the membership is back at this or under. */
export function autoRelayStopMembers(relayMembers: number): number {
  return Math.floor((3 * relayMembers) / 4);
}

/**
 * The fanout an 'auto' node runs at `members` (itself included): 0 (broadcast) or
 * {@link AUTO_RELAY_FANOUT}. `relaying`: whether it relays now (the band between
 * {@link autoRelayStopMembers} and `relayMembers` keeps the current mode).
 */
export function autoRelayFanout(members: number, relayMembers: number, relaying: boolean): number {
  if (relaying) return members > autoRelayStopMembers(relayMembers) ? AUTO_RELAY_FANOUT : 0;
  return members > relayMembers ? AUTO_RELAY_FANOUT : 0;
}

/**
 * The engine's relayHops when relaying at `fanout` among `members`: at least 1 (the engine then
 * sends whole windows and allows for a hop), expectedRelayHops otherwise.
 */
export function relayHopsFor(members: number, fanout: number): number {
  return Math.min(MAX_RELAY_HOPS, Math.max(1, expectedRelayHops(members, fanout)));
}

/**
 * The moving average of fast ticks' lateness (ms, over about five ticks) after one `late` ms
 * late at interval `f`, or -1 where it passes half the interval: the node cannot keep fast ticks
 * on time (short of CPU) and holds them off for a while (MeshLimiter).
 */
export function fastTickLateness(avg: number, late: number, f: number): number {
  const next = 0.8 * avg + 0.2 * Math.max(0, late);
  return next > f / 2 ? -1 : next;
}

/**
 * The interval a node gossips at while one of its keys is tight (Engine.wantsFastGossip) under
 * `fastGossipIntervalMs: 'auto'` (the default), at `members` (itself included), gossip interval
 * `g` and expected delay `d`: as often as broadcast brings each node at most
 * {@link AUTO_BROADCAST_MSGS_PER_S} messages a second, (M - 1) · 1000 / that ms, and no more
 * often than every d (a node's horizon is its peers' interval plus d: under d, gossiping faster
 * shortens it little). 0 (off) where that is not at most half of g: 52 members and more at
 * g = 100 ms (at 64 nodes, 63 ms bought nothing at 0.9 L and took 931 messages in a node a
 * second against 630: bench:two-sided).
 */
export function fastGossipIntervalMs(members: number, g: number, d: number): number {
  const f = Math.max(1, d, Math.ceil(((members - 1) * 1000) / AUTO_BROADCAST_MSGS_PER_S));
  return 2 * f <= g ? f : 0;
}
