/**
 * The IPC protocol between the mesh-test harness (parent) and one node process
 * (node-child.ts). Every node process replays its own share of a trace in real
 * time, in-process, and writes each decision to a file as it is made, so a
 * node killed with SIGKILL still leaves every decision it returned.
 */
import type { PolicySpec } from '../src/types.js';

/** What a node process is started with. */
export interface ChildConfig {
  /** Position in the mesh (trace node index); the rogue is past the last one. */
  index: number;
  role: 'node' | 'rogue';
  /** Protobuf-encoded libp2p private key file (restart keeps the identity). */
  keyFile: string;
  /** libp2p TCP port on 127.0.0.1. */
  port: number;
  /** Every other node's multiaddr (with /p2p/<id>). */
  bootstrap: string[];
  policies: PolicySpec[];
  gossipIntervalMs: number;
  expectedDelayMs: number;
  injectDelayMs: number;
  heartbeatMs?: number;
  discoveryIntervalMs?: number;
  /** Drill: this node's clock runs this many ms ahead of true time (negative: behind). */
  skewMs?: number;
  /** MeshLimiterOptions.fastGossipIntervalMs; absent: the default ('auto'). */
  fastGossipIntervalMs?: number | 'auto';
  /** Relay mode's fanout (MeshLimiterOptions.relayFanout); absent: broadcast. */
  relayFanout?: number;
  /** MeshLimiterOptions.relayMacPeers; absent: the default. */
  relayMacPeers?: number;
  /** Bootstrap entries dialled (MeshLimiterOptions.dialPeers); absent: the limiter's default. */
  dialPeers?: number;
  /** Harness only: the process gets its own session (see MeshSpec.ownSessions). */
  ownSession?: boolean;
}

/** One replay: request i at startAt + times[i] (wall-clock epoch ms), in-process `check(policy, key)`. */
export interface RunSpec {
  startAt: number;
  /** Offsets (ms, ascending) of this node's requests. */
  times: number[];
  policy: string;
  key: string;
  /** Decisions are appended here as [t (ms since startAt, when decided), code] float64 pairs. */
  decisionFile: string;
  /**
   * More policies each request is also checked against (one `check` each, on
   * the same key, right after the main one), each with its own decision file.
   */
  also?: { policy: string; decisionFile: string }[];
  /**
   * Serve only once this node's view would pass the daemon's /healthz (at least
   * one live peer); requests due before then are not served (a load balancer
   * would have sent them elsewhere). Default false: serve at once.
   */
  gateOnLivePeer?: boolean;
  /** Drill: drop all gossip in and out during [fromMs, toMs) after startAt. */
  isolate?: { fromMs: number; toMs: number };
  /** Rogue: publish malformed and inflated gossip during [fromMs, toMs) after startAt. */
  rogue?: { fromMs: number; toMs: number };
  /**
   * Latency probe: every 50 ms, 20 back-to-back checks of the same policy on key
   * `probe` (not recorded as trace decisions), each timed; reported as `probeUs`.
   */
  probe?: boolean;
}

/** Decision codes in the decision file: allowed bit + 2 × mode index. */
export const MODES = ['global', 'fallback', 'local'] as const;

/** What a node reports after a replay. */
export interface RunReport {
  index: number;
  served: number;
  /** Requests due before the node could serve (restart, gate) and skipped. */
  skipped: number;
  admitted: number;
  /** How late requests were served against their trace time, ms. */
  lateMs: { p50: number; p99: number; max: number };
  /** In-process check() latency, µs. */
  latencyUs: { p50: number; p99: number; p999: number; max: number };
  /** The probe's checks (back to back, so the path is warm), µs; absent without a probe. */
  probeUs?: { n: number; p50: number; p99: number; p999: number; max: number };
  /**
   * What stalled the process over the replay: V8's GC pauses (count, total and longest, ms; wall
   * time, so a pause that waits for a core is longer), the major ones among them, and how many
   * requests were served more than 20 ms late.
   */
  stalls?: {
    gcPauses: number;
    gcMs: number;
    gcMaxMs: number;
    /** Context switches over the replay (Linux): voluntary (the process slept and woke) and not (preempted). */
    wakeups: number;
    preempted: number;
    gcMajor: number;
    gcMajorMs: number;
    over20Ms: number;
  };
  /** CPU (user + system) over the replay, % of one core. */
  cpuPct: number;
  wallMs: number;
  gossip: {
    msgsOut: number;
    bytesOut: number;
    msgsIn: number;
    bytesIn: number;
    earlyPublishes: number;
    /** Gossip ticks that fired during the run (one is due every g ms). */
    ticks: number;
    relayed: number;
    notRelayed: number;
  };
  drops: Record<string, number>;
  /** The direct transport's counters over the run (deltas); absent over gossipsub. */
  transport?: {
    framesIn: number;
    framesOut: number;
    batchesIn: number;
    batchesOut: number;
    itemsIn: number;
    itemsNew: number;
    verified: number;
    /** Origin MACs checked instead of a signature. */
    macVerified: number;
    dropped: Record<string, number>;
  };
  /** Connected peers at the end of the run. */
  connected?: number;
  injected: { delayed: number; dropped: number };
  sync: { pulls: number; pullsOk: number; served: number };
  engine: {
    dropped: Record<string, number>;
    capped: number;
    gossipIn: number;
    byMode: Record<string, number>;
    livePeers: number;
    members: number;
    /** Peers whose clocks are too far off to merge (they count as stale). */
    skewedPeers: number;
  };
  /** This node's view of its peers at the end of the run. */
  peers: { id: string; clockOffsetMs: number; stale: boolean }[];
  /** When isolation was applied and lifted (ms since startAt). */
  isolation?: { onAt: number; offAt: number };
  /** When this node started serving (ms since startAt). */
  servingFrom: number;
  rogue?: { sent: Record<string, number> };
}

export type ParentMessage =
  | { op: 'init'; cfg: ChildConfig }
  | { op: 'status'; id: number }
  | { op: 'run'; id: number; run: RunSpec }
  /** Replace the node's policies in place (limiter.replacePolicies, what a daemon reload calls). */
  | { op: 'reload'; id: number; policies: PolicySpec[] }
  | { op: 'stop'; id: number };

export interface Status {
  peerId: string;
  live: number;
  stale: number;
  connected: number;
  synced: number;
}

export type ChildMessage =
  | { ev: 'ready'; peerId: string; addrs: string[] }
  | { ev: 'reply'; id: number; data: unknown }
  | { ev: 'log'; level: string; msg: string; obj: unknown }
  | { ev: 'fatal'; message: string };
