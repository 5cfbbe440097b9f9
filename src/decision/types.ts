import type { DecisionMode, DecisionRule } from '../types.js';

/** What happened to bytes handed to the engine (gossip, sync, a snapshot): it never throws, it counts and explains. */
export interface ReceiveResult {
  ok: boolean;
  reason?: string;
}

/** Counters an engine keeps. */
export interface EngineStats {
  decisions: number;
  allowed: number;
  limited: number;
  shadowLimited: number;
  byMode: Record<DecisionMode, number>;
  /** Decisions limited (denied, or let through in shadow mode), by rule: why (docs/decision-rule.md). */
  limitedByRule: Record<Exclude<DecisionRule, 'allow'>, number>;
  gossipOut: number;
  gossipBytesOut: number;
  gossipIn: number;
  gossipBytesIn: number;
  dropped: Record<string, number>;
  /** Messages (gossip or sync) whose counts were cut to what their origin could have admitted. */
  capped: number;
  /** Times a peer was put on ignore for sending capped messages. */
  peersIgnored: number;
  /** Messages from peers whose clock is off by more than maxClockOffsetMs (not merged). */
  clockSkewed: number;
  /** Peers whose clock is off by more than maxClockOffsetMs now. */
  skewedPeers: number;
  /** Peers in the table (members and departed peers whose counts are still in a window). */
  peerTable: number;
  /** Members that departed (silent past departAfterMs, see peers.ts, or by a farewell), since start. */
  peersDeparted: number;
  /** Of those, members that left by a farewell merged here (Engine.farewell), since start. */
  peersLeft: number;
  /** Departed peers forgotten (their slot reused), since start. */
  peersForgotten: number;
  /** Entries of members gone (a replaced pod's counts) merged from sync answers, since start. */
  goneSynced: number;
  keys: number;
  evictions: number;
  /** Keys evicted with counts still in their window (recorded in the eviction sketch). */
  evictedLive: number;
  /** Bytes held by the eviction sketches. */
  sketchBytes: number;
  livePeers: number;
  stalePeers: number;
  members: number;
  fallback: boolean;
  /** The start gate is shut: no global policy decided until the members heard have heard this node (Engine.starting). */
  starting: boolean;
  clockBackwards: number;
  /** Per policy: members that run another version of it now (counted as spending at least L/N each, their counts not merged). */
  foreignVersion: Record<string, number>;
  /** Entries received for a policy the sender runs at another version than ours, or that we do not have (not merged). */
  foreignEntries: number;
  /** Times the policy set was replaced at runtime ({@link Engine.replacePolicies}). */
  policyReplacements: number;
  /**
   * Global policies whose window is under twice the gossip horizon (g plus the data's age on
   * arrival): there bursts on many nodes at once can pass the limit, controlled ones by a few
   * percent, naive ones by much more. The
   * engine also warns once per policy.
   */
  slowGossip: string[];
}

/** What {@link Engine.replacePolicies} did, by policy name. */
export interface PolicyReplacement {
  /** Same version: windows, local states and sketches kept. */
  kept: string[];
  /** Another version: its state dropped, started fresh under the new version. */
  changed: string[];
  added: string[];
  removed: string[];
  /** The new policy-set version. */
  version: string;
}

/** One policy some members run at another version than this node. */
export interface VersionMismatch {
  policy: string;
  ours: string;
  /** Peer id → the version it runs. */
  peers: Record<string, string>;
}

/**
 * The start gate's state of an engine (Engine.startState): what an engine rebuilt in place while
 * its node starts carries on (EngineSlot), so the handover's answers prove no member heard it.
 */
export interface StartState {
  /** When its first gossip message was built (+Infinity: none yet). */
  firstSentAt: number;
  /** The mesh's join rule said the node joined (Engine.joined). */
  joined: boolean;
  /** When the mesh's join wait ends (Engine.joinWaitEnds; +Infinity: not told). */
  joinEndsAt: number;
  /** Per member: it has heard this node (its sync answer named it), and when we first built a message with it live. */
  peers: { id: string; heardUs: boolean; sentToAt: number }[];
}

/** A fresh set of counters: nothing decided, nothing heard. */
export function emptyEngineStats(): EngineStats {
  return {
    decisions: 0,
    allowed: 0,
    limited: 0,
    shadowLimited: 0,
    byMode: { global: 0, fallback: 0, local: 0 },
    limitedByRule: {
      'global-limit': 0,
      'headroom-share': 0,
      'fallback-share': 0,
      'local-limit': 0,
      'cost-exceeds-limit': 0,
      'left-mesh': 0,
      'startup-hold': 0,
      starting: 0,
      'owner-unreachable': 0,
    },
    gossipOut: 0,
    gossipBytesOut: 0,
    gossipIn: 0,
    gossipBytesIn: 0,
    dropped: {},
    capped: 0,
    peersIgnored: 0,
    clockSkewed: 0,
    skewedPeers: 0,
    peerTable: 0,
    peersDeparted: 0,
    peersLeft: 0,
    peersForgotten: 0,
    goneSynced: 0,
    keys: 0,
    evictions: 0,
    evictedLive: 0,
    sketchBytes: 0,
    livePeers: 0,
    stalePeers: 0,
    members: 1,
    fallback: false,
    starting: false,
    clockBackwards: 0,
    foreignVersion: {},
    foreignEntries: 0,
    policyReplacements: 0,
    slowGossip: [],
  };
}
