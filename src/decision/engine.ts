import { createAlgorithm } from '../algorithms/index.js';
import type { LocalAlgorithm } from '../algorithms/types.js';
import { type AlgoResult, newAlgoResult } from '../algorithms/types.js';
import { type Clock, checkTime, systemClock } from '../clock.js';
import {
  decodeMessage,
  encodeGossip,
  encodeSyncRequest,
  encodeSyncResponse,
  LIMITS,
  peekGossipEntries,
  TYPE_GOSSIP,
  TYPE_SYNC_REQUEST,
  TYPE_SYNC_RESPONSE,
  type WireEntry,
  type WirePolicy,
} from '../crdt/codec.js';
import { KeyWindow, ownLeftAt } from '../crdt/window.js';
import { ErrorCodes, RateMeshError } from '../errors.js';
import { validateKey } from '../keys/key.js';
import { checkCost, compilePolicies, type PolicySet, policyVersion } from '../policy/index.js';
import type {
  Decision,
  DecisionMode,
  DecisionRule,
  KeyOutcome,
  Policy,
  PolicyKey,
  PolicySpec,
  RateLimiter,
} from '../types.js';
import { EvictedSketch } from './evicted-sketch.js';
import { KeyBudget, KeyStore } from './key-store.js';
import { type PeerState, PeerTable, type PeerView } from './peers.js';

/** The largest time (epoch ms, either sign) an engine accepts: bucket ids stay exact integers. */
const MAX_TIME = 2 ** 50;

/** mergeEntry's origin for the unattributed floor of a window (KeyWindow.floor). */
const FLOOR = -1;

/** Options of {@link Engine}; validated at construction. */
export interface EngineOptions {
  /** Policy specs (validated here) or an already compiled set. */
  policies: readonly PolicySpec[] | PolicySet;
  /** This node's id (its libp2p peer id in a mesh). Default 'local'. */
  nodeId?: string;
  clock?: Clock;
  /** Gossip tick interval g, ms. Default 10. */
  gossipIntervalMs?: number;
  /** Expected one-way gossip delay d, ms. Default 10. */
  expectedDelayMs?: number;
  /** A peer is stale when its newest data is older than this. Default 3g + 2d. */
  staleAfterMs?: number;
  /** A silent peer stops being a member after this (while others are live). Default max(5 s, 10 × staleAfter). */
  departAfterMs?: number;
  /**
   * Members this node expects, itself included (a mesh node: 1 + its bootstrap
   * peers). Until it hears any peer it enforces L/N with this N, so a node that
   * starts or restarts does not spend the whole limit alone. Default 1 (standalone).
   */
  expectedMembers?: number;
  /** Cap on tracked keys over all policies. Default 100,000. */
  maxKeys?: number;
  /** Cap on known origins (peers). Default 256. */
  maxPeers?: number;
  /** A touched key is carried in this many more ticks, so a lost message is repaired. Default 3. */
  repeatTicks?: number;
  /** Every this many ticks, every key with own counts in its window is carried (anti-entropy). Default 50. */
  antiEntropyTicks?: number;
  /** Ask for an early publish when a key's unsynced own count reaches this fraction of its limit. Default 0.05. */
  earlyPublishFraction?: number;
  /**
   * Most keys one gossip message may carry: a received message with more is
   * dropped whole before anything is merged (`too-many-keys`), and this node
   * never sends more (the rest go in the next ticks). Default 2,048.
   */
  maxKeysPerMessage?: number;
  /** A peer with this many capped messages within a window is ignored for {@link ignoreMs}. Default 3. */
  strikesToIgnore?: number;
  /** How long a peer that sent counts it could not have admitted is ignored, ms. Default max(60 s, 2 × the longest window). */
  ignoreMs?: number;
  /** Seed of the eviction sketch's hashing. Default: random per engine (an outsider cannot aim collisions). */
  sketchSeed?: number;
  /** Width of each policy's eviction sketch (a power of two; 4 rows of it, 5 time slots). Default 8,192. */
  sketchWidth?: number;
  /** Where the engine reports what an operator should see (a peer ignored): pino-compatible. Default none. */
  logger?: EngineLogger;
  /**
   * A peer whose clock is estimated further off than this (ms, either way) is
   * treated as stale: its counts are not merged, it counts as spending at
   * least L/N, and it is logged. Within it, its counts are moved into our
   * buckets by the estimated offset. Default 1,000.
   */
  maxClockOffsetMs?: number;
}

/** The logging the engine does (pino's signature). */
export interface EngineLogger {
  warn(obj: object, msg: string): void;
}

/** What happened to a received message. */
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
  /** Departed peers forgotten (their slot reused), since start. */
  peersForgotten: number;
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
  clockBackwards: number;
  /** Per policy: members that run another version of it now (counted as spending at least L/N each, their counts not merged). */
  foreignVersion: Record<string, number>;
  /** Entries received for a policy the sender runs at another version than ours, or that we do not have (not merged). */
  foreignEntries: number;
  /** Times the policy set was replaced at runtime ({@link Engine.replacePolicies}). */
  policyReplacements: number;
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

interface PolicyRt {
  readonly policy: Policy;
  /** {@link policyVersion} of the policy: what the wire carries for it. */
  readonly version: string;
  /** Position in the policy set (KeyWindow.policy); changes when the set is replaced. */
  idx: number;
  /** Bucket width W / k. */
  readonly bw: number;
  /** Front local algorithm (global scope) or the algorithm (local scope). */
  readonly algo: LocalAlgorithm<unknown> | undefined;
  readonly earlyAt: number;
  readonly local: boolean;
  /** Row of this policy in our messages' policy table (global policies, name-sorted); -1 for a local one. */
  wire: number;
  /** The last key decided on and its window: a hot key skips the map lookup. Cleared when the window is dropped. */
  hotKey: string | undefined;
  hotKw: KeyWindow | undefined;
  windows: KeyStore<KeyWindow>;
  locals: KeyStore<LocalEntry>;
  /** What evicted keys had counted (created on the first live eviction). */
  sketch: EvictedSketch | undefined;
  /**
   * Members that said, in their newest message, that they run another version
   * of this policy: their counts for it are not merged, and each counts as
   * spending at least L/N (see foreignReserve). Parallel arrays (no allocation
   * on the decision path): the peer, when it last said so (ours), its version.
   */
  foreign: PeerState[];
  foreignAt: number[];
  foreignVer: string[];
}

/** Per-key bookkeeping of local-scope policies. */
interface LocalEntry {
  state: unknown;
  last: number;
  /** Used since inserted or last passed over by eviction (second chance). */
  ref: boolean;
}

/** Scratch result of evaluating one (policy, key). */
interface Eval {
  allowed: boolean;
  rule: DecisionRule;
  mode: DecisionMode;
  remaining: number;
  retryAfterMs: number;
  resetMs: number;
  delayMs: number;
  rt: PolicyRt | undefined;
  key: string;
  kw: KeyWindow | undefined;
  entry: LocalEntry | undefined;
}

function newEval(): Eval {
  return {
    allowed: false,
    rule: 'allow',
    mode: 'global',
    remaining: 0,
    retryAfterMs: 0,
    resetMs: 0,
    delayMs: 0,
    rt: undefined,
    key: '',
    kw: undefined,
    entry: undefined,
  };
}

function positiveInt(v: unknown, field: string, def: number, min = 1): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw new RateMeshError(
      ErrorCodes.CONFIG_INVALID,
      `must be an integer >= ${min} (got ${String(v)})`,
      field,
    );
  }
  return v;
}

/**
 * The decision core of one node: policies, the windowed G-counters of every
 * key, the peer view, and the decision rule. It is transport-free: a mesh feeds
 * it peers' gossip and publishes what it builds, the simulator does the same on
 * a virtual network.
 *
 * The rule for a global policy with limit L (README, "How a node decides"):
 * - estimate E = sliding-window-counter sum over all origins;
 * - naive: admit when E + cost <= L;
 * - controlled (default): everything live peers admitted more than U ago has
 *   reached us (U = the longest any live peer has gone unseen); what they
 *   admitted since is unknown. The headroom left for the last U ms, L - E_old,
 *   is shared by demand (offered cost, which every node gossips), and this node
 *   admits only while its own admissions in the last U ms stay within its share.
 *   Summed over the nodes that is at most L;
 * - every member stale, or still starting and not all expected peers heard (and
 *   fallback on): admit while own counts + cost <= L/N;
 * - some members stale: each stale peer counts as spending max(seen + unseen,
 *   L/N), unseen being what it may have admitted at its reported demand rate
 *   until its own view went stale (see staleReserve).
 * Time is the clock's (`check`) or the caller's (`checkAt`); an earlier time
 * than one already used counts as standing still.
 */
export class Engine implements RateLimiter {
  readonly nodeId: string;
  private policySet: PolicySet;

  /** The policies in force (replaced by {@link replacePolicies}). */
  get policies(): PolicySet {
    return this.policySet;
  }

  /**
   * The policy-set version hash (for operators: one figure for the whole set).
   * The wire carries one version per policy (see {@link policyVersions}).
   */
  get version(): string {
    return this.policySet.version;
  }
  readonly gossipIntervalMs: number;
  readonly expectedDelayMs: number;
  readonly staleAfterMs: number;
  readonly ready = true;

  private readonly clock: Clock;
  private rts: PolicyRt[] = [];
  private rtByName = new Map<string, PolicyRt>();
  /** The policy of the last check: a caller checking one policy skips the name lookup. */
  private lastRt: PolicyRt | undefined;
  /** Our global policies by their row in our messages' policy table. */
  private rtByWire: PolicyRt[] = [];
  /** The policy table our messages carry: every global policy, name-sorted, with its version. */
  private wireTable: WirePolicy[] = [];
  private readonly budget: KeyBudget;
  private readonly earlyFrac: number;
  private readonly ignoreMsOpt: number | undefined;
  private readonly sketchSeed: number;
  private readonly sketchWidth: number;
  private readonly maxKeysPerMessage: number;
  private readonly strikesToIgnore: number;
  private ignoreMs = 0;
  private maxWindowMs = 0;
  /** A departed peer is forgotten once its newest data is this old: its counts have left every window. */
  private retainMs = 0;
  private readonly logger: EngineLogger | undefined;
  private readonly maxClockOffsetMs: number;
  /** Sync requests sent and not answered yet: their t0 and how many share it. */
  private readonly pendingSync = new Map<number, number>();
  private readonly peers: PeerTable;
  private readonly dirty = new Set<KeyWindow>();
  /** (peer, policy, version) marks already logged. */
  private readonly warnedForeign = new Set<string>();
  private readonly repeatTicks: number;
  private readonly antiEntropyTicks: number;
  private readonly maxKeys: number;
  private lastNow = Number.NEGATIVE_INFINITY;
  private nextRefresh = Number.NEGATIVE_INFINITY;
  private tick = 0;
  private seq = 0;
  /** Changes whenever the view changes (gossip in, own tick): demand shares are recomputed. */
  private stamp = 0;
  private early = false;
  /** Min over live peers of the time (ours) their newest data was sent. */
  private oldestSent = Number.POSITIVE_INFINITY;
  private readonly algoOut: AlgoResult = newAlgoResult();
  private readonly cur: Eval = newEval();
  private readonly counters: EngineStats;

  constructor(opts: EngineOptions) {
    if (opts === null || typeof opts !== 'object') {
      throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'options must be an object', 'options');
    }
    const ps = opts.policies as unknown;
    this.policySet =
      ps !== null && typeof ps === 'object' && 'version' in ps && 'byName' in ps
        ? (ps as PolicySet)
        : compilePolicies(ps);
    this.nodeId = opts.nodeId ?? 'local';
    if (typeof this.nodeId !== 'string' || this.nodeId.length === 0 || this.nodeId.length > 128) {
      throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'must be a string of 1..128 characters', 'nodeId');
    }
    this.clock = opts.clock ?? systemClock;
    this.gossipIntervalMs = positiveInt(opts.gossipIntervalMs, 'gossipIntervalMs', 10);
    this.expectedDelayMs = positiveInt(opts.expectedDelayMs, 'expectedDelayMs', 10, 0);
    this.staleAfterMs = positiveInt(
      opts.staleAfterMs,
      'staleAfterMs',
      3 * this.gossipIntervalMs + 2 * this.expectedDelayMs,
    );
    const departAfter = positiveInt(
      opts.departAfterMs,
      'departAfterMs',
      Math.max(5000, 10 * this.staleAfterMs),
    );
    this.maxKeys = positiveInt(opts.maxKeys, 'maxKeys', 100_000);
    const maxPeers = positiveInt(opts.maxPeers, 'maxPeers', 256);
    this.repeatTicks = positiveInt(opts.repeatTicks, 'repeatTicks', 3, 0);
    this.antiEntropyTicks = positiveInt(opts.antiEntropyTicks, 'antiEntropyTicks', 50);
    const earlyFrac = opts.earlyPublishFraction ?? 0.05;
    if (typeof earlyFrac !== 'number' || !(earlyFrac > 0 && earlyFrac <= 1)) {
      throw new RateMeshError(
        ErrorCodes.CONFIG_INVALID,
        `must be in (0, 1] (got ${String(earlyFrac)})`,
        'earlyPublishFraction',
      );
    }
    this.earlyFrac = earlyFrac;
    const expectedMembers = positiveInt(opts.expectedMembers, 'expectedMembers', 1);
    this.maxKeysPerMessage = positiveInt(opts.maxKeysPerMessage, 'maxKeysPerMessage', 2048);
    this.strikesToIgnore = positiveInt(opts.strikesToIgnore, 'strikesToIgnore', 3);
    this.ignoreMsOpt = opts.ignoreMs === undefined ? undefined : positiveInt(opts.ignoreMs, 'ignoreMs', 1);
    this.windowBounds();
    this.sketchWidth = positiveInt(opts.sketchWidth, 'sketchWidth', 8192, 16);
    if (!Number.isInteger(Math.log2(this.sketchWidth))) {
      throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'must be a power of two', 'sketchWidth');
    }
    this.sketchSeed =
      opts.sketchSeed === undefined
        ? crypto.getRandomValues(new Uint32Array(1))[0]!
        : positiveInt(opts.sketchSeed, 'sketchSeed', 0, 0) >>> 0;
    this.logger = opts.logger;
    this.maxClockOffsetMs = positiveInt(opts.maxClockOffsetMs, 'maxClockOffsetMs', 1000, 0);
    this.peers = new PeerTable(
      this.nodeId,
      this.staleAfterMs,
      departAfter,
      maxPeers,
      expectedMembers,
      this.expectedDelayMs,
    );

    this.budget = new KeyBudget(this.maxKeys);
    this.installRts(this.policies.policies.map((policy, idx) => this.makeRt(policy, idx)));
    this.counters = {
      decisions: 0,
      allowed: 0,
      limited: 0,
      shadowLimited: 0,
      byMode: { global: 0, fallback: 0, local: 0 },
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
      peersForgotten: 0,
      keys: 0,
      evictions: 0,
      evictedLive: 0,
      sketchBytes: 0,
      livePeers: 0,
      stalePeers: 0,
      members: 1,
      fallback: false,
      clockBackwards: 0,
      foreignVersion: {},
      foreignEntries: 0,
      policyReplacements: 0,
    };
  }

  // ------------------------------------------------------------------ policies

  /** The runtime of one policy, with empty stores. */
  private makeRt(policy: Policy, idx: number): PolicyRt {
    const rt = {
      policy,
      version: this.policies.versionOf(policy.name) ?? policyVersion(policy),
      idx,
      bw: policy.windowMs / policy.buckets,
      algo:
        policy.local === undefined ? undefined : (createAlgorithm(policy.local) as LocalAlgorithm<unknown>),
      earlyAt: Math.max(1, Math.ceil(policy.limit * this.earlyFrac)),
      local: policy.scope === 'local',
      wire: -1,
      hotKey: undefined,
      hotKw: undefined,
      sketch: undefined,
      foreign: [],
      foreignAt: [],
      foreignVer: [],
    } as unknown as PolicyRt;
    rt.windows = new KeyStore<KeyWindow>(
      this.budget,
      (kw) => this.windowExpired(rt, kw),
      (key, kw, live) => this.forget(rt, key, kw, live),
    );
    rt.locals = new KeyStore<LocalEntry>(
      this.budget,
      (e) => rt.algo?.isIdle(e.state, this.lastNow) === true,
      (key, e, live) => this.forgetLocal(rt, key, e, live),
    );
    return rt;
  }

  /** Make `rts` the policies in force: lookups, the wire table (global policies, name-sorted). */
  private installRts(rts: PolicyRt[]): void {
    this.rts = rts;
    this.rtByName = new Map(rts.map((rt) => [rt.policy.name, rt]));
    this.lastRt = undefined;
    this.rtByWire = rts
      .filter((rt) => !rt.local)
      .sort((a, b) => (a.policy.name < b.policy.name ? -1 : a.policy.name > b.policy.name ? 1 : 0));
    for (const rt of rts) rt.wire = -1;
    this.rtByWire.forEach((rt, i) => {
      rt.wire = i;
    });
    this.wireTable = this.rtByWire.map((rt) => ({ name: rt.policy.name, version: rt.version }));
  }

  /** Window-derived bounds: the longest window, how long departed peers are kept, the ignore period. */
  private windowBounds(): void {
    let maxW = 0;
    let maxBw = 0;
    for (const p of this.policies.policies) {
      if (p.windowMs > maxW) maxW = p.windowMs;
      if (p.windowMs / p.buckets > maxBw) maxBw = p.windowMs / p.buckets;
    }
    this.maxWindowMs = maxW;
    // a departed peer's newest counts sit at most in our bucket c + 1 of when we heard it
    this.retainMs = maxW + 2 * maxBw + 1;
    this.ignoreMs = this.ignoreMsOpt ?? Math.max(60_000, 2 * maxW);
  }

  /** The policy table this node's messages carry (global policies, name-sorted, with their versions). */
  policyTable(): WirePolicy[] {
    return this.wireTable.map((r) => ({ ...r }));
  }

  /** The version of each policy in force, by name ({@link policyVersion}: what the wire carries). */
  policyVersions(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const rt of this.rts) out[rt.policy.name] = rt.version;
    return out;
  }

  /**
   * Replace the policy set at runtime (a config reload). The new set is
   * validated first (a RateMeshError and nothing changed when it is invalid).
   * A policy whose version is unchanged keeps everything: its key windows
   * (own and peers' counts), local-algorithm states and eviction sketch. A
   * changed one starts fresh under its new version (its counts were kept
   * under another definition); members known to run another version of it
   * count as spending at least L/N each from this moment, until they say
   * otherwise. A removed one is dropped. Peers keep merging every unchanged
   * policy with us throughout.
   */
  replacePolicies(policies: readonly PolicySpec[] | PolicySet, time?: number): PolicyReplacement {
    const ps = policies as unknown;
    const next =
      ps !== null && typeof ps === 'object' && 'version' in ps && 'byName' in ps && 'versionOf' in ps
        ? (ps as PolicySet)
        : compilePolicies(ps);
    const now = time === undefined ? this.now() : this.at(time);
    const out: PolicyReplacement = { kept: [], changed: [], added: [], removed: [], version: next.version };
    const old = this.rtByName;
    this.policySet = next;
    const rts = next.policies.map((policy, idx) => {
      const was = old.get(policy.name);
      const version = next.versionOf(policy.name) ?? policyVersion(policy);
      if (was !== undefined && was.version === version) {
        out.kept.push(policy.name);
        if (was.idx !== idx) {
          was.idx = idx;
          for (const kw of was.windows.map.values()) kw.policy = idx;
        }
        return was;
      }
      if (was === undefined) out.added.push(policy.name);
      else out.changed.push(policy.name);
      const rt = this.makeRt(policy, idx);
      if (
        was !== undefined &&
        !was.local &&
        !rt.local &&
        was.policy.windowMs === policy.windowMs &&
        was.policy.buckets === policy.buckets
      ) {
        // Same window and buckets (say, only the limit changed): the counts in
        // the window are requests already admitted, under either definition.
        // They carry over (own counts are gossiped again under the new
        // version), so a node that changes does not admit a second window's
        // worth on top of what it just admitted. A front limiter's state does not.
        for (const [key, kw] of was.windows.drain()) {
          kw.policy = idx;
          kw.local = undefined;
          kw.shareStamp = -1;
          rt.windows.insert(key, kw);
          this.touch(kw);
        }
      }
      if (!rt.local) {
        // until they say otherwise, members run what they last told us
        for (const p of this.peers.live.concat(this.peers.stale)) {
          const row = p.policies.find((r) => r.name === policy.name);
          if (row !== undefined && row.version !== version) this.markForeign(rt, p, row.version, p.lastHeard);
        }
      }
      return rt;
    });
    const keep = new Set(rts);
    for (const [name, rt] of old) {
      if (keep.has(rt)) continue;
      if (!out.changed.includes(name)) out.removed.push(name);
      // (a changed policy's carried-over windows left this store already)
      for (const kw of rt.windows.map.values()) {
        if (kw.inDirty) {
          this.dirty.delete(kw);
          kw.inDirty = false;
        }
      }
      rt.windows.dispose();
      rt.locals.dispose();
      rt.hotKey = undefined;
      rt.hotKw = undefined;
    }
    this.installRts(rts);
    this.windowBounds();
    this.counters.policyReplacements++;
    this.stamp++;
    this.refresh(now);
    return out;
  }

  /** Record that peer `p` runs version `version` of `rt`'s policy (another than ours), as of `at`. */
  private markForeign(rt: PolicyRt, p: PeerState, version: string, at: number): void {
    const i = rt.foreign.indexOf(p);
    if (i >= 0) {
      rt.foreignAt[i] = at;
      rt.foreignVer[i] = version;
      return;
    }
    rt.foreign.push(p);
    rt.foreignAt.push(at);
    rt.foreignVer.push(version);
    this.stamp++;
    // once per (peer, policy, version): a mark that expires and returns is not news
    const said = `${p.id}\u0000${rt.policy.name}\u0000${version}`;
    if (this.warnedForeign.has(said)) return;
    if (this.warnedForeign.size >= 4096) this.warnedForeign.clear();
    this.warnedForeign.add(said);
    this.logger?.warn(
      { peer: p.id, policy: rt.policy.name, theirVersion: version, ourVersion: rt.version },
      'ratemesh peer runs another version of a policy: its counts for it are not merged, it counts as spending at least L/N of it',
    );
  }

  private unmarkForeign(rt: PolicyRt, i: number): void {
    const last = rt.foreign.length - 1;
    rt.foreign[i] = rt.foreign[last]!;
    rt.foreignAt[i] = rt.foreignAt[last]!;
    rt.foreignVer[i] = rt.foreignVer[last]!;
    rt.foreign.pop();
    rt.foreignAt.pop();
    rt.foreignVer.pop();
    this.stamp++;
  }

  /**
   * A peer's newest policy table: for each of our global policies, it runs the
   * same version (merged), another one (marked foreign), or does not have it
   * (ignored: it never spends on it). Returns, per row of the table, our policy
   * when the versions match, else undefined (its entries are not merged).
   */
  private mapTable(
    p: PeerState | undefined,
    table: readonly WirePolicy[],
    at: number,
  ): (PolicyRt | undefined)[] {
    const map: (PolicyRt | undefined)[] = new Array(table.length);
    // their version of each of our global policies, by our wire row (names are unique in a table)
    const theirs: (string | undefined)[] = new Array(this.rtByWire.length);
    for (let i = 0; i < table.length; i++) {
      const row = table[i]!;
      const rt = this.rtByName.get(row.name);
      if (rt === undefined || rt.local) continue;
      theirs[rt.wire] = row.version;
      map[i] = rt.version === row.version ? rt : undefined;
    }
    if (p === undefined) return map;
    p.policies = table;
    for (const rt of this.rtByWire) {
      const v = theirs[rt.wire];
      if (v !== undefined && v !== rt.version) this.markForeign(rt, p, v, at);
      else {
        const i = rt.foreign.indexOf(p);
        if (i >= 0) this.unmarkForeign(rt, i);
      }
    }
    return map;
  }

  /** Forget foreign-version marks that expired (not repeated within staleAfterMs) or whose peer left. */
  private expireForeign(now: number): void {
    for (const rt of this.rtByWire) {
      for (let i = rt.foreign.length - 1; i >= 0; i--) {
        const p = rt.foreign[i]!;
        if (!p.member || now - rt.foreignAt[i]! > this.staleAfterMs || this.peers.get(p.id) !== p)
          this.unmarkForeign(rt, i);
      }
    }
  }

  /** Policies some members run at another version than ours, and which versions. */
  versionMismatches(): VersionMismatch[] {
    this.now();
    const out: VersionMismatch[] = [];
    for (const rt of this.rtByWire) {
      if (rt.foreign.length === 0) continue;
      const peers: Record<string, string> = {};
      for (let i = 0; i < rt.foreign.length; i++) peers[rt.foreign[i]!.id] = rt.foreignVer[i]!;
      out.push({ policy: rt.policy.name, ours: rt.version, peers });
    }
    return out;
  }

  // ------------------------------------------------------------------ time

  /** The clock's reading, validated and never earlier than one already used. */
  private now(): number {
    return this.at(this.clock.now());
  }

  /** `t` validated and never earlier than a time already used (an earlier one counts as standing still). */
  private at(t: number): number {
    // NaN fails this comparison: checkTime throws the clear error
    if (!(t >= this.lastNow)) {
      checkTime(t);
      this.counters.clockBackwards++;
      return this.lastNow;
    }
    if (t >= this.nextRefresh) {
      checkTime(t); // +Infinity lands here: nextRefresh is always finite once set
      // Bucket ids must stay exact integers (a ring loop at 2^60 ms would never end).
      if (!(t <= MAX_TIME && t >= -MAX_TIME)) {
        throw new RateMeshError(
          ErrorCodes.CLOCK_INVALID,
          `time must be within ±2^50 ms of the epoch (got ${String(t)})`,
        );
      }
      this.refresh(t);
    }
    this.lastNow = t;
    return t;
  }

  private refresh(now: number): void {
    this.expireForeign(now);
    const departed = this.peers.refresh(now);
    if (departed.length > 0) this.stamp++;
    const freed = this.peers.forgetDeparted(now, this.retainMs);
    if (freed.length > 0) this.clearOrigins(freed);
    this.nextRefresh = now + Math.max(1, Math.min(this.gossipIntervalMs, this.staleAfterMs / 4));
    this.updateOldestSent();
  }

  /**
   * Recompute the unseen horizon, and refresh no later than the moment the
   * first live peer turns stale, so the view goes stale exactly on time.
   */
  /** Departed peers were forgotten: clear their origin slots in every window, so a slot is reused clean. */
  private clearOrigins(freed: readonly number[]): void {
    this.counters.peersForgotten += freed.length;
    for (const rt of this.rts) {
      for (const kw of rt.windows.map.values()) {
        for (const o of freed) if (kw.peers[o] !== undefined) kw.dropOrigin(o);
      }
    }
  }

  private updateOldestSent(): void {
    let oldest = Number.POSITIVE_INFINITY;
    let firstStale = Number.POSITIVE_INFINITY;
    for (const p of this.peers.live) {
      // A peer whose clock is far behind (or a rogue claiming old send times)
      // must not stretch the horizon past the window and switch the control
      // off: its delay counts for at most one staleness period.
      const sent = p.lastHeard - Math.min(p.delayMs, this.staleAfterMs);
      if (sent < oldest) oldest = sent;
      // a peer is stale once its data age passes staleAfterMs
      const due = this.peers.staleAt(p);
      if (due < firstStale) firstStale = due;
    }
    this.oldestSent = oldest;
    const due = firstStale + 1e-6;
    if (due < this.nextRefresh) this.nextRefresh = due;
  }

  // ------------------------------------------------------------------ RateLimiter

  policy(name: string): Policy | undefined {
    return this.rtByName.get(name)?.policy;
  }

  check(policy: string, keys: string | readonly string[], cost = 1): Decision {
    return this.checkAt(this.clock.now(), policy, keys, cost);
  }

  /**
   * {@link check} at a given time (epoch ms) instead of the clock's: for callers
   * that already read the clock (one reading for many checks) and for tests. A
   * time earlier than one already used is treated as that time.
   */
  checkAt(time: number, policy: string, keys: string | readonly string[], cost = 1): Decision {
    let rt = this.lastRt;
    if (rt === undefined || policy !== rt.policy.name) rt = this.rtByName.get(policy);
    if (rt === undefined) {
      throw new RateMeshError(
        ErrorCodes.POLICY_UNKNOWN,
        `no policy named ${JSON.stringify(String(policy))}`,
        'policy',
      );
    }
    this.lastRt = rt;
    checkCost(cost, rt.policy);
    const now = this.at(time);
    if (typeof keys === 'string') {
      const e = this.cur;
      this.evaluate(rt, keys, cost, now, e);
      if (e.allowed) this.commit(e, cost, now);
      return this.finish(e, e.allowed || rt.policy.shadow);
    }
    if (!Array.isArray(keys) || keys.length === 0) {
      throw new RateMeshError(ErrorCodes.KEY_INVALID, 'must be a key or a non-empty array of keys', 'keys');
    }
    return this.evaluateAll(
      keys.length,
      (_i) => rt,
      (i) => keys[i] as string,
      (_i) => cost,
      now,
    );
  }

  checkAll(
    pairs: readonly PolicyKey[],
    cost: number | readonly number[] = 1,
  ): Decision & { outcomes: KeyOutcome[] } {
    return this.checkAllAt(this.clock.now(), pairs, cost);
  }

  /** {@link checkAll} at a given time; see {@link checkAt}. */
  checkAllAt(
    time: number,
    pairs: readonly PolicyKey[],
    cost: number | readonly number[] = 1,
  ): Decision & { outcomes: KeyOutcome[] } {
    if (!Array.isArray(pairs) || pairs.length === 0) {
      throw new RateMeshError(
        ErrorCodes.KEY_INVALID,
        'must be a non-empty array of [policy, key] pairs',
        'pairs',
      );
    }
    const costs = typeof cost === 'number' ? undefined : cost;
    if (costs !== undefined && (!Array.isArray(costs) || costs.length !== pairs.length)) {
      throw new RateMeshError(
        ErrorCodes.COST_INVALID,
        `a list of costs must hold one cost per pair (${pairs.length})`,
        'cost',
      );
    }
    const rts: PolicyRt[] = [];
    for (let i = 0; i < pairs.length; i++) {
      const pair = pairs[i];
      const rt = Array.isArray(pair) ? this.rtByName.get(pair[0]) : undefined;
      if (rt === undefined) {
        throw new RateMeshError(
          ErrorCodes.POLICY_UNKNOWN,
          `no policy named ${JSON.stringify(String(Array.isArray(pair) ? pair[0] : pair))}`,
          `pairs[${i}]`,
        );
      }
      // In a list of costs, 0 evaluates the pair without spending on it (a peek).
      if (costs === undefined) checkCost(cost, rt.policy);
      else if (costs[i] !== 0) checkCost(costs[i], rt.policy);
      rts.push(rt);
    }
    const now = this.at(time);
    const outcomes: KeyOutcome[] = [];
    const d = this.evaluateAll(
      pairs.length,
      (i) => rts[i]!,
      (i) => pairs[i]![1],
      costs === undefined ? (_i) => cost as number : (i) => costs[i]!,
      now,
      outcomes,
    ) as Decision & { outcomes: KeyOutcome[] };
    d.outcomes = outcomes;
    return d;
  }

  /**
   * Evaluate every pair; spend on all only if all allow (shadow policies never
   * block). A pair whose cost is 0 is evaluated and never spent on.
   */
  private evaluateAll(
    n: number,
    rtAt: (i: number) => PolicyRt,
    keyAt: (i: number) => string,
    costAt: (i: number) => number,
    now: number,
    outcomes?: KeyOutcome[],
  ): Decision {
    let worst: Eval | undefined;
    let best: Eval | undefined;
    let blocked = false;
    const evals: Eval[] = [];
    for (let i = 0; i < n; i++) {
      const rt = rtAt(i);
      const e = newEval();
      this.evaluate(rt, keyAt(i), costAt(i), now, e);
      evals.push(e);
      if (!e.allowed) {
        // the first refusing pair decides, a blocking one before a shadow one
        if (worst === undefined || (!rt.policy.shadow && worst.rt!.policy.shadow)) worst = e;
        if (!rt.policy.shadow) blocked = true;
      } else if (
        best === undefined ||
        e.remaining / rt.policy.limit < best.remaining / best.rt!.policy.limit
      ) {
        best = e;
      }
    }
    // the request passes only once every refusing pair allows: wait for the slowest
    let retry = 0;
    if (!blocked) {
      for (let i = 0; i < n; i++) {
        const c = costAt(i);
        if (evals[i]!.allowed && c > 0) this.commit(evals[i]!, c, now);
      }
    } else {
      for (const ev of evals) {
        if (ev.allowed || ev.rt!.policy.shadow) continue;
        if (ev.retryAfterMs < 0) {
          retry = -1;
          break;
        }
        if (ev.retryAfterMs > retry) retry = ev.retryAfterMs;
      }
    }
    if (outcomes !== undefined) {
      for (const ev of evals) {
        const p = ev.rt!.policy;
        outcomes.push({
          policy: p.name,
          key: ev.key,
          limit: p.limit,
          windowMs: p.windowMs,
          remaining: ev.remaining,
          resetMs: ev.resetMs,
          retryAfterMs: ev.allowed ? 0 : ev.retryAfterMs,
          limited: !ev.allowed,
          shadow: p.shadow,
        });
      }
    }
    if (worst !== undefined) return this.finish(worst, !blocked, blocked ? retry : worst.retryAfterMs);
    return this.finish(best!, true);
  }

  /** Turn an evaluation into the Decision value and count it. */
  private finish(e: Eval, allowed: boolean, retryAfterMs = e.retryAfterMs): Decision {
    const p = e.rt!.policy;
    const limited = !e.allowed;
    const c = this.counters;
    c.decisions++;
    if (e.mode === 'global') c.byMode.global++;
    else if (e.mode === 'fallback') c.byMode.fallback++;
    else c.byMode.local++;
    if (limited) {
      if (allowed) c.shadowLimited++;
      else c.limited++;
    } else c.allowed++;
    return {
      allowed: allowed,
      limited,
      policy: p.name,
      key: e.key,
      rule: e.rule,
      mode: e.mode,
      limit: p.limit,
      remaining: e.remaining,
      retryAfterMs: limited ? retryAfterMs : 0,
      resetMs: e.resetMs,
      delayMs: e.delayMs,
      shadow: p.shadow,
    };
  }

  // ------------------------------------------------------------------ the rule

  private evaluate(rt: PolicyRt, key: string, cost: number, now: number, out: Eval): void {
    out.rt = rt;
    out.key = key;
    out.delayMs = 0;
    out.kw = undefined;
    out.entry = undefined;
    if (rt.local) {
      this.evaluateLocal(rt, key, cost, now, out);
      return;
    }
    const p = rt.policy;
    const L = p.limit;
    let kw: KeyWindow | undefined;
    if (key === rt.hotKey && rt.hotKw !== undefined) {
      kw = rt.hotKw;
      kw.ref = true;
    } else {
      kw = rt.windows.get(key);
      if (kw === undefined) kw = this.createWindow(rt, validateKey(key));
      else kw.ref = true;
      rt.hotKey = key;
      rt.hotKw = kw;
    }
    out.kw = kw;
    const pos = now / rt.bw;
    const c = Math.floor(pos);
    if (c > kw.cur) kw.roll(c);
    // weight of the oldest bucket still inside the window
    // the fraction from the bucket start, not from now / bw: exact at epoch-sized times
    const w = c < kw.cur ? 1 : 1 - (now - c * rt.bw) / rt.bw;
    kw.addOffered(cost);
    this.touch(kw);
    out.resetMs =
      kw.full > 0 || kw.sum[kw.oldest]! > 0 ? Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now) : 0;

    if (cost > L) {
      this.deny(out, 'cost-exceeds-limit', 'global', Math.max(0, Math.floor(L - kw.estimate(w))), -1);
      return;
    }
    const peers = this.peers;
    if (peers.allStale && p.fallback) {
      const share = Math.floor(L / peers.knownN);
      const own = kw.ownEstimate(w);
      if (own + cost > share + 1e-9) {
        const retry = cost > share ? -1 : this.expiry(kw, true, own + cost - share, now, rt);
        this.deny(out, 'fallback-share', 'fallback', Math.max(0, Math.floor(share - own)), retry);
        return;
      }
      // What the view does hold still counts: a node starting with its peers'
      // windows pulled by sync, or cut off with their last counts, never admits
      // past L on them (the counts are real admissions; they only age out).
      const seen = kw.estimate(w);
      if (this.overLimit(out, kw, seen, cost, now, rt, 'fallback')) return;
      if (!this.frontAllows(rt, kw, cost, now, out, 'fallback')) return;
      this.allow(out, 'fallback', Math.floor(Math.min(share - own, L - seen) - cost + 1e-9));
      out.resetMs = Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now);
      return;
    }
    let est = kw.estimate(w);
    if (peers.stale.length > 0 && p.fallback) est += this.staleReserve(kw, w, L, now, p.windowMs);
    if (rt.foreign.length > 0) est += this.foreignReserve(rt, kw, w, L);
    if (this.overLimit(out, kw, est, cost, now, rt, 'global')) return;
    if (p.overAdmission === 'controlled' && peers.live.length > 0) {
      // Everything peers admitted more than U ago has reached us (U = the
      // longest any live peer has been unseen); what they admitted since is
      // unknown. So the headroom left for the last U ms, L - E_old, is shared
      // by demand, and this node's own admissions in the last U ms may not
      // exceed its share. Summed over nodes that is at most L.
      const U = now - this.oldestSent;
      if (U < p.windowMs) {
        if (kw.shareStamp !== this.stamp) this.computeShare(kw, rt);
        const tU = now - Math.max(U, 0);
        const cU = Math.floor(tU / rt.bw);
        // In the bucket that straddles the horizon, peers' counts count wholly
        // as old (they may all precede the horizon; when the limit closes they
        // do, and a pro-rata split would under-count E_old) and our own wholly
        // as recent (they may all follow it). Both err on the safe side.
        let recentAll = 0;
        let ownRecent = 0;
        let b = cU;
        if (cU === kw.cur) {
          // the common case: the horizon falls in the current bucket
          const n = kw.nextSlot;
          const ownCur = kw.own[kw.curSlot]!;
          recentAll = kw.sum[n]! + ownCur;
          ownRecent = kw.own[n]! + ownCur;
          b = kw.cur + 2;
        } else if (cU >= kw.cur - kw.k) {
          ownRecent = kw.own[kw.slotOf(cU)]!;
          recentAll = ownRecent;
          b = cU + 1;
        } else b = kw.cur - kw.k;
        for (; b <= kw.cur + 1; b++) {
          const s = kw.slotOf(b);
          recentAll += kw.sum[s]!;
          ownRecent += kw.own[s]!;
        }
        const allowance = kw.share * (L - est + recentAll);
        if (ownRecent + cost > allowance) {
          this.deny(
            out,
            'headroom-share',
            'global',
            Math.floor(allowance - ownRecent),
            this.gossipIntervalMs,
          );
          return;
        }
      }
    }
    if (!this.frontAllows(rt, kw, cost, now, out, 'global')) return;
    this.allow(out, 'global', Math.floor(L - est - cost + 1e-9));
    out.resetMs = Math.ceil((kw.cur + p.buckets + 1) * rt.bw - now);
  }

  /** Denies with rule global-limit (in `mode`) when `est + cost` passes L; true when it did. */
  private overLimit(
    out: Eval,
    kw: KeyWindow,
    est: number,
    cost: number,
    now: number,
    rt: PolicyRt,
    mode: DecisionMode,
  ): boolean {
    const L = rt.policy.limit;
    // the tolerance absorbs float error of the bucket weight at whole-ms boundaries
    if (est + cost <= L + 1e-9) return false;
    this.deny(
      out,
      'global-limit',
      mode,
      Math.max(0, Math.floor(L - est)),
      this.expiry(kw, false, est + cost - L, now, rt),
    );
    return true;
  }

  private frontAllows(
    rt: PolicyRt,
    kw: KeyWindow,
    cost: number,
    now: number,
    out: Eval,
    mode: DecisionMode,
  ): boolean {
    const algo = rt.algo;
    if (algo === undefined || cost === 0) return true;
    if (kw.local === undefined) kw.local = algo.init(now);
    const r = this.algoOut;
    if (!algo.check(kw.local, cost, now, r)) {
      this.deny(out, 'local-limit', mode, r.remaining, r.retryAfterMs);
      return false;
    }
    out.delayMs = r.delayMs;
    return true;
  }

  private evaluateLocal(rt: PolicyRt, key: string, cost: number, now: number, out: Eval): void {
    const algo = rt.algo!;
    const store = rt.locals;
    let entry = store.get(key);
    if (entry === undefined) {
      entry = { state: algo.init(now), last: now, ref: false };
      store.insert(validateKey(key), entry);
      // a key evicted with state left starts from at least what it had used
      const sk = rt.sketch;
      if (sk !== undefined) {
        const used = Math.min(sk.estimate(key, now), algo.capacity);
        if (used >= 1 && algo.check(entry.state, Math.floor(used), now, this.algoOut)) {
          algo.commit(entry.state, Math.floor(used), now);
        }
      }
    } else entry.ref = true;
    out.entry = entry;
    const r = this.algoOut;
    if (cost === 0) {
      // A look without spending (checkAll with a list of costs): 0 never goes
      // over. The algorithms take costs from 1, so ask what 1 would leave.
      algo.check(entry.state, 1, now, r);
      out.resetMs = r.resetMs;
      out.delayMs = 0;
      this.allow(out, 'local', r.allowed ? r.remaining + 1 : r.remaining);
      return;
    }
    algo.check(entry.state, cost, now, r);
    out.resetMs = r.resetMs;
    out.delayMs = r.delayMs;
    if (r.allowed) this.allow(out, 'local', r.remaining);
    else
      this.deny(
        out,
        cost > algo.capacity ? 'cost-exceeds-limit' : 'local-limit',
        'local',
        r.remaining,
        r.retryAfterMs,
      );
  }

  private allow(out: Eval, mode: DecisionMode, remaining: number): void {
    out.allowed = true;
    out.rule = 'allow';
    out.mode = mode;
    out.remaining = Math.max(remaining, 0);
    out.retryAfterMs = 0;
  }

  private deny(
    out: Eval,
    rule: DecisionRule,
    mode: DecisionMode,
    remaining: number,
    retryAfterMs: number,
  ): void {
    out.allowed = false;
    out.rule = rule;
    out.mode = mode;
    out.remaining = Math.max(remaining, 0);
    out.retryAfterMs = retryAfterMs < 0 ? -1 : Math.max(1, Math.ceil(retryAfterMs));
  }

  private commit(e: Eval, cost: number, now: number): void {
    const rt = e.rt!;
    if (rt.local) {
      rt.algo!.commit(e.entry!.state, cost, now);
      e.entry!.last = now;
      return;
    }
    const kw = e.kw!;
    kw.addOwn(cost, now / rt.bw - kw.cur);
    if (kw.local !== undefined) rt.algo!.commit(kw.local, cost, now);
    if (kw.unsynced >= rt.earlyAt) this.early = true;
  }

  /** Controlled mode: this node's demand-weighted share for a key, until the view changes. */
  private computeShare(kw: KeyWindow, rt: PolicyRt): void {
    const W = rt.policy.windowMs;
    // Our demand as we last gossiped it, not as it is now: the peers share the
    // headroom by the demands they have heard, so the shares sum to one only
    // when every node uses the same numbers. A node whose demand just rose
    // (a restart, a new burst) waits one tick before claiming the larger share.
    // Every demand counts for at most L, ours as well, the same on every node
    // (so the shares still sum to one): a claim of demand backed by no counts
    // can take at most the share of a node offering L, never starve the others.
    const L = rt.policy.limit;
    const own = Math.min(kw.sentDemand, L);
    let total = own;
    const live = this.peers.live;
    // members on another version of the policy are not sharers: foreignReserve counts them
    let sharers = live.length + 1;
    for (let i = 0; i < live.length; i++) {
      if (rt.foreign.length > 0 && rt.foreign.indexOf(live[i]!) >= 0) {
        sharers--;
        continue;
      }
      const arr = kw.peers[live[i]!.idx];
      if (arr !== undefined) total += reportedDemand(arr, kw.r, live[i]!.lastHeard, W, L);
    }
    kw.share = total > 0 ? own / total : 1 / sharers;
    kw.shareStamp = this.stamp;
  }

  /**
   * Extra count assumed for stale members. A stale peer may have admitted,
   * unseen, from its newest data we hold until its own view went stale as
   * well (about staleAfter + d later; it then falls back to L/N on its own
   * counts): at most its offered rate for the key over that stretch, the part
   * of it still inside the window, and never more than L less what we saw.
   * From then on it keeps its own window total within max(what it had, L/N).
   * So a stale peer counts as spending max(seen + unseen, L/N).
   */
  private staleReserve(kw: KeyWindow, w: number, L: number, now: number, W: number): number {
    const perPeer = L / this.peers.knownN;
    const r = kw.r;
    let extra = 0;
    for (const p of this.peers.stale) {
      const seen = kw.peerEstimate(p.idx, w);
      let unseen = 0;
      const arr = kw.peers[p.idx];
      const demand = arr === undefined ? 0 : arr[r]!;
      if (demand > 0) {
        const sent = p.lastHeard - Math.min(p.delayMs, this.expectedDelayMs);
        const end = Math.min(now, sent + this.staleAfterMs + this.expectedDelayMs);
        const span = end - Math.max(sent, now - W);
        if (span > 0) unseen = Math.min((demand / W) * span, Math.max(0, L - seen));
      }
      extra += Math.max(unseen, perPeer - seen);
    }
    return extra;
  }

  /**
   * Extra count assumed for members on another version of the policy (a
   * rolling change of its definition): their counts for it are not merged, so
   * each counts as spending at least L/N (our L), less what we still hold of
   * it from before it changed. A stale one is left to staleReserve, which
   * counts it at least as much. Summed over the mesh, the nodes on each
   * version then admit at most their L times their share of the members, so
   * the total stays within max(L_old, L_new) while the rollout runs.
   */
  private foreignReserve(rt: PolicyRt, kw: KeyWindow, w: number, L: number): number {
    const perPeer = L / this.peers.knownN;
    const skipStale = rt.policy.fallback;
    let extra = 0;
    for (let i = 0; i < rt.foreign.length; i++) {
      const p = rt.foreign[i]!;
      if (!p.member || (p.stale && skipStale)) continue;
      const seen = kw.peers[p.idx] === undefined ? 0 : kw.peerEstimate(p.idx, w);
      if (perPeer > seen) extra += perPeer - seen;
    }
    return extra;
  }

  /**
   * ms until `need` of the counts in `arr` have left the window, with nothing
   * new admitted: the oldest bucket drains linearly over the rest of the current
   * bucket, then each next bucket over one bucket width.
   */
  /**
   * How long until `need` of the window's counts have left it: `ownOnly` counts our own
   * admissions only (the fallback share), else every origin's. Peers' counts leave a bucket
   * evenly over it; ours between the first and last admission in it (see KeyWindow.ownWeight),
   * so the answer matches what the estimate will say then.
   */
  private expiry(kw: KeyWindow, ownOnly: boolean, need: number, now: number, rt: PolicyRt): number {
    if (need <= 1e-9) return 0;
    const bw = rt.bw;
    const frac = (now - kw.cur * bw) / bw;
    let start = frac < 0 ? 0 : Math.min(1, frac);
    let t = 0;
    for (let b = kw.cur - kw.k; b <= kw.cur + 1; b++) {
      const s = kw.slotOf(b);
      const own = kw.own[s]!;
      const others = ownOnly ? 0 : kw.sum[s]! - own;
      let first = kw.span[2 * s]!;
      let last = kw.span[2 * s + 1]!;
      if (first < 0) {
        first = 0;
        last = 1;
      }
      // drained(c) for the cut at c in [start, 1]: others' evenly, ours over first..last (a
      // point mass, first = last, all at once): monotone, so the first c that drains `need`
      // is found by bisection (this runs on denials only; no closures, nothing allocated)
      const w0 = b === kw.cur - kw.k ? ownLeftAt(start, first, last) : 1;
      const all = others * (1 - start) + own * w0;
      if (all >= need - 1e-9) {
        if (own * (w0 - ownLeftAt(start, first, last)) >= need - 1e-9) return t;
        let lo = start;
        let hi = 1;
        for (let i = 0; i < 48 && hi - lo > 1e-12; i++) {
          const mid = (lo + hi) / 2;
          if (others * (mid - start) + own * (w0 - ownLeftAt(mid, first, last)) >= need - 1e-9) hi = mid;
          else lo = mid;
        }
        return t + (hi - start) * bw;
      }
      need -= all;
      t += (1 - start) * bw;
      start = 0;
    }
    return t;
  }

  private createWindow(rt: PolicyRt, key: string): KeyWindow {
    const kw = new KeyWindow(rt.policy.buckets, rt.idx, key);
    const now = this.lastNow;
    kw.created = now;
    rt.windows.insert(key, kw);
    const sk = rt.sketch;
    if (sk !== undefined) {
      // evicted before with counts in its window: it starts from at least those
      const had = sk.estimate(key, now);
      if (had > 0) {
        kw.roll(Math.floor(now / rt.bw));
        kw.mergeFloor(kw.cur, Math.min(had, rt.policy.limit));
      }
    }
    return kw;
  }

  private sketch(rt: PolicyRt): EvictedSketch {
    let sk = rt.sketch;
    if (sk === undefined) {
      sk = new EvictedSketch(rt.policy.windowMs, this.sketchSeed ^ rt.idx, 4, this.sketchWidth);
      rt.sketch = sk;
    }
    return sk;
  }

  /** A window leaves the store: a live one's counts go to the policy's sketch first. */
  private forget(rt: PolicyRt, key: string, kw: KeyWindow, live: boolean): void {
    if (rt.hotKw === kw) {
      rt.hotKey = undefined;
      rt.hotKw = undefined;
    }
    if (kw.inDirty) {
      this.dirty.delete(kw);
      kw.inDirty = false;
    }
    if (!live) return;
    const now = this.lastNow;
    const c = Math.floor(now / rt.bw);
    if (c > kw.cur) kw.roll(c);
    const w = c < kw.cur ? 1 : 1 - (now - c * rt.bw) / rt.bw;
    // the floor came from the sketch, which still holds it for as long as its counts can be in a window
    const counts = kw.estimate(w) - kw.floorEstimate(w);
    if (counts > 1e-9) {
      this.sketch(rt).add(key, counts, now);
      this.counters.evictedLive++;
    }
  }

  /** A local-scope state leaves the store: what it had used goes to the policy's sketch. */
  private forgetLocal(rt: PolicyRt, key: string, e: LocalEntry, live: boolean): void {
    if (!live) return;
    const algo = rt.algo!;
    const r = this.algoOut;
    algo.check(e.state, 1, this.lastNow, r);
    const left = r.allowed ? r.remaining + 1 : r.remaining;
    const used = algo.capacity - left;
    if (used > 0) {
      this.sketch(rt).add(key, used, this.lastNow);
      this.counters.evictedLive++;
    }
  }

  private windowExpired(rt: PolicyRt, kw: KeyWindow): boolean {
    const c = Math.floor(this.lastNow / rt.bw);
    if (c > kw.cur + kw.k + 1) return true;
    return c === kw.cur && kw.isEmpty();
  }

  private touch(kw: KeyWindow): void {
    kw.touchTick = this.tick;
    if (!kw.inDirty) {
      kw.inDirty = true;
      this.dirty.add(kw);
    }
  }

  // ------------------------------------------------------------------ gossip

  /** True when some key's unsynced own count crossed the early-publish threshold. */
  wantsEarlyPublish(): boolean {
    return this.early;
  }

  /**
   * The message for this tick: every recently touched key's full window of own
   * counts (so a lost message is repaired by the next) and its demand; an idle
   * node sends only the header (a heartbeat).
   *
   * `reach` is how many members the caller will hand the message to directly,
   * this node included (the mesh: its connected subscribers + 1); it goes in the
   * header so receivers can tell whether anyone they know still needs a relay.
   * Default: every live member (a network that delivers to all).
   */
  buildGossip(_now?: number, reach?: number): Uint8Array {
    const now = this.now();
    this.tick++;
    this.stamp++;
    this.early = false;
    const anti = this.tick % this.antiEntropyTicks === 0;
    const entries: WireEntry[] = [];
    const max = this.maxKeysPerMessage;
    // When more keys wait than a message may carry, three passes: first the
    // keys whose unsent admissions reached the early-publish threshold, then
    // those with any unsent admission or left out before, then the repeats.
    // A key left out stays due (`pending`) and goes in a next tick.
    for (let pass = this.dirty.size > max ? 0 : 2; pass < 3; pass++) {
      for (const kw of this.dirty) {
        const rt = this.rts[kw.policy]!;
        if (pass === 0 && kw.unsynced < rt.earlyAt) continue;
        if (pass === 1 && kw.unsynced === 0 && !kw.pending) continue;
        if (kw.sentTick === this.tick) continue;
        const c = Math.floor(now / rt.bw);
        if (c > kw.cur) kw.roll(c);
        const ownLeft = kw.ownEstimate(1);
        const recent = this.tick - kw.touchTick <= this.repeatTicks + 1 || kw.pending;
        if (!recent && ownLeft === 0) {
          this.dirty.delete(kw);
          kw.inDirty = false;
          continue;
        }
        if (!recent && !anti) continue;
        if (entries.length >= max) {
          // a repeat that did not fit is no loss; unsent admissions are
          if (pass < 2) kw.pending = true;
          continue;
        }
        const e = this.ownEntry(kw, rt.wire, kw.key, 0, now, rt);
        entries.push(e);
        kw.sentDemand = e.demand;
        kw.unsynced = 0;
        kw.pending = false;
        kw.sentTick = this.tick;
      }
    }
    this.seq++;
    const bytes = encodeGossip({
      policies: this.wireTable,
      seq: this.seq,
      sentAt: now,
      members: this.peers.live.length + 1,
      reach:
        reach === undefined
          ? this.peers.live.length + 1
          : Math.max(1, Math.min(LIMITS.origins, Math.floor(reach) || 1)),
      entries,
    });
    this.counters.gossipOut++;
    this.counters.gossipBytesOut += bytes.length;
    return bytes;
  }

  private ownEntry(
    kw: KeyWindow,
    policy: number,
    key: string,
    origin: number,
    now: number,
    rt: PolicyRt,
  ): WireEntry {
    const counts: number[] = [];
    for (let b = kw.cur - kw.k; b <= kw.cur; b++) counts.push(kw.own[kw.slotOf(b)]!);
    return {
      origin,
      policy,
      key,
      base: kw.cur - kw.k,
      counts,
      demand: Math.ceil(demandPerWindow(kw, now, rt.policy.windowMs, rt.bw)),
    };
  }

  private drop(reason: string): ReceiveResult {
    this.counters.dropped[reason] = (this.counters.dropped[reason] ?? 0) + 1;
    return { ok: false, reason };
  }

  /**
   * Merge a peer's gossip. The message is decoded and every entry validated
   * before anything is merged: a bad message is dropped whole and counted by
   * reason. Counts above what the origin could have admitted are capped.
   */
  receiveGossip(from: string, bytes: Uint8Array): ReceiveResult {
    const now = this.now();
    if (typeof from !== 'string' || from.length === 0 || from.length > 128) return this.drop('bad-sender');
    if (from === this.nodeId) return this.drop('self');
    const known = this.peers.get(from);
    if (known !== undefined && now < known.ignoredUntil) return this.drop('peer-ignored');
    // refused from the header alone: a message with too many keys costs no decoding
    if (peekGossipEntries(bytes) > this.maxKeysPerMessage) return this.drop('too-many-keys');
    const dec = decodeMessage(bytes);
    if (!dec.ok) return this.drop(dec.reason);
    const m = dec.message;
    if (m.type !== TYPE_GOSSIP) return this.drop('bad-type');
    if (m.entries.length > this.maxKeysPerMessage) return this.drop('too-many-keys');
    const map = this.mapTable(undefined, m.policies, now);
    const bad = this.validateEntries(m.entries, map);
    if (bad !== undefined) return this.drop(bad);
    const peer = known ?? this.peers.ensure(from);
    if (peer === undefined) return this.drop('too-many-peers');
    // A restarted peer starts its sequence again: accept when its clock moved on.
    if (m.seq <= peer.seq && m.sentAt <= peer.lastSentAt) return this.drop('duplicate');
    this.counters.gossipIn++;
    this.counters.gossipBytesIn += bytes.length;
    this.mapTable(peer, m.policies, now);
    const off = this.sampleOffset(peer, m.sentAt, now);
    if (this.checkSkew(peer, off)) {
      const shift = this.appliedOffset(peer);
      let capped = false;
      for (const e of m.entries) {
        const rt = map[e.policy];
        if (rt === undefined) this.counters.foreignEntries++;
        else if (this.mergeEntry(rt, peer.idx, e, now, shift)) capped = true;
      }
      if (capped) this.strike(peer, now);
    }
    const wasMember = peer.member;
    peer.member = true;
    peer.messages++;
    peer.seq = m.seq;
    peer.lastSentAt = m.sentAt;
    peer.lastHeard = now;
    peer.members = m.members;
    const delay = now - (m.sentAt - peer.clockOffsetMs);
    peer.delayMs = delay < 0 ? 0 : Math.min(delay, 60_000);
    this.stamp++;
    if (!wasMember || peer.stale) this.refresh(now);
    else this.updateOldestSent();
    return { ok: true };
  }

  /**
   * Every entry, merged or not, must hold a valid key; one of a policy we run
   * at the same version (`map`) at most buckets + 2 counts. Entries of policies
   * we do not run, or run at another version, are not an error: they are
   * skipped when merging.
   */
  private validateEntries(
    entries: readonly WireEntry[],
    map: readonly (PolicyRt | undefined)[],
  ): string | undefined {
    for (const e of entries) {
      if (!isValidKey(e.key)) return 'bad-key';
      const rt = map[e.policy];
      if (rt !== undefined && e.counts.length > rt.policy.buckets + 2) return 'bad-field';
    }
    return undefined;
  }

  /**
   * The peer's clock offset (its clock minus ours) after a gossip sample: the
   * round-trip measure of a sync when there is one, else the largest over the
   * last one or two seconds of (its send time - our receive time + the
   * expected delay), the sample with the shortest delay being the closest.
   */
  private sampleOffset(p: PeerState, sentAt: number, now: number): number {
    const sample = sentAt - now + this.expectedDelayMs;
    if (now - p.offPeriod >= 1000) {
      const gap = now - p.offPeriod >= 2000;
      p.offPrev = gap ? Number.NEGATIVE_INFINITY : p.offCur;
      p.offSamplesPrev = gap ? 0 : p.offSamples;
      p.offCur = Number.NEGATIVE_INFINITY;
      p.offSamples = 0;
      p.offPeriod = now;
    }
    if (sample > p.offCur) p.offCur = sample;
    p.offSamples++;
    if (!p.offsetMeasured) p.clockOffsetMs = Math.max(p.offCur, p.offPrev);
    return p.clockOffsetMs;
  }

  /**
   * The offset a peer's counts are moved by: none within the estimate's own
   * noise (2d + 5 ms; a gossip estimate is trusted after 3 samples, a sync
   * round trip at once), and it changes only when the estimate moves by more
   * than d / 2 + 1 ms, so a peer's counts do not flip between two buckets.
   * (When it does change, counts already merged stay where they were: an
   * over-count for at most one window, never an under-count of the bucket
   * they move to, since merge is max per bucket.)
   */
  private appliedOffset(p: PeerState): number {
    // Moved by a lower bound of the offset, never the estimate: every sample of (its send time -
    // our receive time) is one, since a message takes at least no time to arrive, and so is a
    // sync answer's (t1 - t2). Counts are then never moved earlier than they were admitted,
    // whatever the delays: a starved process, whose messages and sync answers arrive hundreds of
    // ms late and lopsided, made the round-trip midpoint move them early (an under-count: worst
    // 1 s 583 against L = 500 in the Docker partition drill under two CPU burners). The bound is
    // at most the shortest delay below the truth: the counts stay that much longer (an over-count).
    const gossipLower = Math.max(p.offCur, p.offPrev) - this.expectedDelayMs;
    const est = Math.max(gossipLower, p.syncLowerMs);
    const trusted = p.offsetMeasured || p.offSamples + p.offSamplesPrev >= 3;
    const target = trusted && Number.isFinite(est) && Math.abs(est) > 2 * this.expectedDelayMs + 5 ? est : 0;
    if (Math.abs(target - p.appliedOffsetMs) > this.expectedDelayMs / 2 + 1) p.appliedOffsetMs = target;
    return p.appliedOffsetMs;
  }

  /** False (and the peer marked skewed, counted, logged once) when its offset is past maxClockOffsetMs. */
  private checkSkew(p: PeerState, off: number): boolean {
    const skewed = !(Math.abs(off) <= this.maxClockOffsetMs);
    if (skewed) this.counters.clockSkewed++;
    if (skewed !== p.skewed) {
      p.skewed = skewed;
      this.stamp++;
      if (skewed)
        this.logger?.warn(
          { peer: p.id, clockOffsetMs: off, maxClockOffsetMs: this.maxClockOffsetMs },
          'ratemesh peer clock is too far off: its counts are not merged and it counts as stale',
        );
    }
    return !skewed;
  }

  /**
   * A peer's message was capped: count it, and past `strikesToIgnore` capped
   * messages within a window ignore the peer for `ignoreMs` (it turns stale,
   * so it is counted as spending at least L/N, which is safe).
   */
  private strike(peer: PeerState, now: number): void {
    this.counters.capped++;
    if (now - peer.strikeSince > this.maxWindowMs) {
      peer.strikes = 0;
      peer.strikeSince = now;
    }
    peer.strikes++;
    if (peer.strikes < this.strikesToIgnore) return;
    peer.strikes = 0;
    peer.ignoredUntil = now + this.ignoreMs;
    this.counters.peersIgnored++;
    this.logger?.warn(
      { peer: peer.id, ignoreMs: this.ignoreMs, strikes: this.strikesToIgnore },
      'ratemesh peer sent counts it could not have admitted: ignored for a while',
    );
  }

  /**
   * Merge one entry into origin `origin`'s slot (FLOOR: the unattributed
   * floor). What one origin holds for a key is capped over the whole ring,
   * across every message it sent, not per message: at most L in a bucket,
   * L + maxCost over the full-weight buckets (an honest node's own estimate
   * never passes L) and 2L over the ring (the oldest bucket may still hold up
   * to L while the rest refills). Its demand is capped at L, as every node caps
   * its own. Returns true when anything was capped.
   */
  private mergeEntry(rt: PolicyRt, origin: number, e: WireEntry, now: number, offsetMs = 0): boolean {
    // Its bucket b covers our time [b·bw - off, (b+1)·bw - off): moved to the
    // later of the two of ours it overlaps (its counts then stay in our window
    // at least as long as they should); a tenth of a bucket is tolerated.
    const shift = offsetMs === 0 ? 0 : -Math.floor(offsetMs / rt.bw + 0.1);
    const L = rt.policy.limit;
    const fullCap = L + Math.min(rt.policy.maxCost, L);
    const ringCap = 2 * L;
    let kw = rt.windows.get(e.key);
    if (kw === undefined) kw = this.createWindow(rt, e.key);
    const c = Math.floor(now / rt.bw);
    if (c > kw.cur) kw.roll(c);
    const lo = kw.cur - kw.k;
    const hi = kw.cur + 1;
    const held = origin === FLOOR ? kw.floor : kw.peers[origin];
    let ring = 0;
    let full = 0;
    if (held !== undefined) {
      for (let b = lo; b <= hi; b++) {
        const v = held[kw.slotOf(b)]!;
        ring += v;
        if (b > lo) full += v;
      }
    }
    let capped = false;
    for (let i = 0; i < e.counts.length; i++) {
      let b = e.base + i + shift;
      let v = e.counts[i]!;
      if (v > L) {
        v = L;
        capped = true;
      }
      if (b >= hi) {
        // Buckets at or past our newest (an origin whose clock runs ahead, or counts moved later
        // by an offset bound) are folded into the newest instead of dropped: kept longer, never lost.
        for (let j = i + 1; j < e.counts.length; j++) {
          const x = e.counts[j]!;
          if (x > L) capped = true;
          v += Math.min(x, L);
        }
        if (v > L) v = L;
        b = hi;
        i = e.counts.length; // the last bucket merged
      }
      if (b < lo) continue;
      const had = held === undefined ? 0 : held[kw.slotOf(b)]!;
      let delta = v - had;
      if (delta <= 0) continue;
      if (ring + delta > ringCap) {
        delta = ringCap - ring;
        capped = true;
      }
      if (b > lo && full + delta > fullCap) {
        delta = fullCap - full;
        capped = true;
      }
      if (delta <= 0) continue;
      if (origin === FLOOR) kw.mergeFloor(b, had + delta);
      else kw.mergeEntry(origin, b, had + delta);
      ring += delta;
      if (b > lo) full += delta;
    }
    if (origin !== FLOOR) {
      const arr = kw.peer(origin);
      // the share rule uses at most L of it (computeShare); the stale reserve bounds it by L - seen
      arr[kw.r] = Math.min(e.demand, 1000 * L);
      arr[kw.r + 1] = now;
    }
    return capped;
  }

  // ------------------------------------------------------------------ sync

  /** A request for a peer's full state; carries our time for the clock-offset estimate. */
  buildSyncRequest(): Uint8Array {
    const t0 = this.now();
    // remembered so that only an answer to a request of ours is merged (at most 256 open, for 60 s)
    this.pendingSync.set(t0, (this.pendingSync.get(t0) ?? 0) + 1);
    if (this.pendingSync.size > 256) this.pendingSync.delete(this.pendingSync.keys().next().value!);
    return encodeSyncRequest({ t0 });
  }

  /**
   * Every global key's window of our own counts (origin 0), and when `asker` is given what we
   * hold of its own counts (origin 1): the entries of a sync answer, and of a snapshot.
   */
  private windowEntries(now: number, asker: PeerState | undefined): WireEntry[] {
    const entries: WireEntry[] = [];
    for (const rt of this.rts) {
      if (rt.local) continue;
      for (const [key, kw] of rt.windows.map) {
        const c = Math.floor(now / rt.bw);
        if (c > kw.cur) kw.roll(c);
        if (kw.isEmpty()) continue;
        if (kw.ownEstimate(1) > 0) entries.push(this.ownEntry(kw, rt.wire, key, 0, now, rt));
        const arr = asker === undefined ? undefined : kw.peers[asker.idx];
        if (arr === undefined) continue;
        const counts: number[] = [];
        let any = false;
        for (let b = kw.cur - kw.k; b <= kw.cur + 1; b++) {
          const v = arr[kw.slotOf(b)]!;
          if (v > 0) any = true;
          counts.push(v);
        }
        if (any)
          entries.push({ origin: 1, policy: rt.wire, key, base: kw.cur - kw.k, counts, demand: arr[kw.r]! });
      }
    }
    return entries;
  }

  /** Answer a sync request with every key's window of every origin we hold. */
  answerSync(from: string, request: Uint8Array): Uint8Array | ReceiveResult {
    const now = this.now();
    const dec = decodeMessage(request);
    if (!dec.ok) return this.drop(`sync-${dec.reason}`);
    if (dec.message.type !== TYPE_SYNC_REQUEST) return this.drop('sync-bad-type');
    // Our own windows, and what we hold of the requester's own counts (a
    // restarted node learns what it admitted before). Nothing of third parties:
    // a receiver credits a sync answer only to the responder.
    const origins = [this.nodeId];
    const asker = typeof from === 'string' && from !== this.nodeId ? this.peers.get(from) : undefined;
    if (asker !== undefined) origins.push(asker.id);
    const entries = this.windowEntries(now, asker);
    return encodeSyncResponse({
      policies: this.wireTable,
      t0: dec.message.t0,
      t1: now,
      origins,
      entries,
    });
  }

  /**
   * Merge a sync response and take a clock-offset sample from its round trip.
   * Counts are credited only to the responder `from` (the transport's
   * authenticated peer, origin 0 of the answer). Entries the responder gives
   * for this node's own id (a restarted node's earlier admissions) go to the
   * unattributed floor: they count here, bounded like any origin's, but are
   * never gossiped as this node's own. Entries of any other origin are
   * skipped and counted (`sync-foreign-entry`): no name fills a peer slot here.
   */
  receiveSyncResponse(from: string, response: Uint8Array): ReceiveResult {
    const now = this.now();
    if (typeof from !== 'string' || from.length === 0 || from.length > 128)
      return this.drop('sync-bad-sender');
    if (from === this.nodeId) return this.drop('sync-self');
    const known = this.peers.get(from);
    if (known !== undefined && now < known.ignoredUntil) return this.drop('sync-peer-ignored');
    const dec = decodeMessage(response);
    if (!dec.ok) return this.drop(`sync-${dec.reason}`);
    const m = dec.message;
    if (m.type !== TYPE_SYNC_RESPONSE) return this.drop('sync-bad-type');
    if (m.origins[0] !== from) return this.drop('sync-wrong-origin');
    const map = this.mapTable(undefined, m.policies, now);
    const bad = this.validateEntries(m.entries, map);
    if (bad !== undefined) return this.drop(`sync-${bad}`);
    // an answer to a request of ours, each request answered once: no unsolicited or replayed state
    const open = this.pendingSync.get(m.t0);
    if (open === undefined || now - m.t0 > 60_000) return this.drop('sync-unsolicited');
    const peer = known ?? this.peers.ensure(from);
    if (peer === undefined) return this.drop('sync-too-many-peers');
    if (open > 1) this.pendingSync.set(m.t0, open - 1);
    else this.pendingSync.delete(m.t0);
    this.mapTable(peer, m.policies, now);
    const self = m.origins.indexOf(this.nodeId);
    if (m.t0 <= now && now - m.t0 < 60_000) {
      peer.clockOffsetMs = m.t1 - (m.t0 + now) / 2;
      peer.offsetMeasured = true;
      peer.syncLowerMs = Math.max(peer.syncLowerMs, m.t1 - now);
    }
    let capped = false;
    let foreign = 0;
    // its windows (and what it holds of ours) are in its buckets: moved by its offset
    const merge = this.checkSkew(peer, peer.clockOffsetMs);
    const off = merge ? this.appliedOffset(peer) : 0;
    for (const e of m.entries) {
      if (!merge) break;
      const rt = map[e.policy];
      if (rt === undefined) {
        this.counters.foreignEntries++;
        continue;
      }
      if (e.origin === 0) {
        if (this.mergeEntry(rt, peer.idx, e, now, off)) capped = true;
      } else if (e.origin === self) {
        if (this.mergeEntry(rt, FLOOR, e, now, off)) capped = true;
      } else foreign++;
    }
    if (foreign > 0)
      this.counters.dropped['sync-foreign-entry'] =
        (this.counters.dropped['sync-foreign-entry'] ?? 0) + foreign;
    if (capped) this.strike(peer, now);
    // A sync answer is direct contact: the responder is a live member, and its
    // window is as of its answer (half the round trip ago).
    if (peer.lastHeard < now) {
      peer.member = true;
      peer.lastHeard = now;
      peer.delayMs = Math.max(0, (now - m.t0) / 2);
    }
    this.stamp++;
    this.refresh(now);
    return { ok: true };
  }

  /**
   * This node's own windows (every global key with own counts), as bytes for
   * {@link restoreSnapshot}: a lone node that restarts keeps what it admitted.
   * The format is a sync response from this node (docs/wire-format.md).
   */
  snapshot(): Uint8Array {
    const now = this.now();
    const entries = this.windowEntries(now, undefined);
    return encodeSyncResponse({
      policies: this.wireTable,
      t0: now,
      t1: now,
      origins: [this.nodeId],
      entries,
    });
  }

  /**
   * Count what a snapshot holds (this node's admissions before a restart, whatever its id
   * was) on the unattributed floor: it counts here, bounded like any origin's counts, is
   * never gossiped as this node's own, and ages out with its buckets. A snapshot of other
   * policies, a malformed one, or one whose windows have passed restores nothing. Returns
   * the entries merged.
   */
  restoreSnapshot(bytes: Uint8Array): ReceiveResult & { restored?: number } {
    const now = this.now();
    if (!(bytes instanceof Uint8Array)) return this.drop('snapshot-bad-type');
    const dec = decodeMessage(bytes);
    if (!dec.ok) return this.drop(`snapshot-${dec.reason}`);
    const m = dec.message;
    if (m.type !== TYPE_SYNC_RESPONSE) return this.drop('snapshot-bad-type');
    // policies restore only at the version they were saved under (the table says which)
    const map = this.mapTable(undefined, m.policies, now);
    const bad = this.validateEntries(m.entries, map);
    if (bad !== undefined) return this.drop(`snapshot-${bad}`);
    let restored = 0;
    for (const e of m.entries) {
      const rt = map[e.policy];
      if (e.origin !== 0 || rt === undefined) continue;
      this.mergeEntry(rt, FLOOR, e, now, 0);
      restored++;
    }
    this.stamp++;
    return { ok: true, restored };
  }

  /** The transport saw a peer leave: it stops being a member (its counts age out). */
  /** Members this node counts, itself included (N of the L/N fallback): a relay decision compares it with a message's reach. */
  memberCount(): number {
    return this.peers.knownN;
  }

  peerDeparted(id: string): void {
    const p = this.peers.get(id);
    if (p === undefined) return;
    p.member = false;
    this.stamp++;
    this.refresh(this.now());
  }

  // ------------------------------------------------------------------ introspection

  peerViews(): PeerView[] {
    return this.peers.views(this.now());
  }

  /** Whether the stale-view fallback is in force now. */
  get fallbackActive(): boolean {
    this.now();
    return this.peers.allStale;
  }

  stats(): EngineStats {
    const now = this.now();
    void now;
    const c = this.counters;
    c.keys = this.budget.size;
    c.evictions = this.budget.evictions;
    c.peerTable = this.peers.size;
    let skewed = 0;
    for (const p of this.peers.byIdx) if (p?.skewed === true) skewed++;
    c.skewedPeers = skewed;
    let bytes = 0;
    for (const rt of this.rts) if (rt.sketch !== undefined) bytes += rt.sketch.bytes;
    c.sketchBytes = bytes;
    c.livePeers = this.peers.live.length;
    c.stalePeers = this.peers.stale.length;
    c.members = this.peers.knownN;
    c.fallback = this.peers.allStale;
    const fv: Record<string, number> = {};
    for (const rt of this.rtByWire) if (rt.foreign.length > 0) fv[rt.policy.name] = rt.foreign.length;
    return { ...c, byMode: { ...c.byMode }, dropped: { ...c.dropped }, foreignVersion: fv };
  }

  /** This node's estimate of the global count for a key now (for tests and tools). */
  estimate(policy: string, key: string): number {
    const rt = this.rtByName.get(policy);
    if (rt === undefined || rt.local) return 0;
    const now = this.now();
    const kw = rt.windows.get(key);
    if (kw === undefined) return 0;
    const c = Math.floor(now / rt.bw);
    if (c > kw.cur) kw.roll(c);
    return kw.estimate(1 - (now - kw.cur * rt.bw) / rt.bw);
  }
}

/**
 * This node's demand for a key in cost per window: what it was offered in the
 * window, scaled up while the key is younger than a window so that nodes that
 * compare demands compare rates.
 */
function demandPerWindow(kw: KeyWindow, now: number, W: number, bw: number): number {
  const w = Math.min(1, 1 - (now - kw.cur * bw) / bw);
  const offered = kw.offeredEstimate(w);
  const age = now - kw.created;
  return age >= W ? offered : (offered * W) / Math.max(age, bw);
}

function isValidKey(key: string): boolean {
  try {
    validateKey(key);
    return true;
  } catch {
    return false;
  }
}

/**
 * A peer's reported demand for a key (cost offered over a window), fading over
 * one window after the report, by the report's age at `at` (the peer's newest
 * message: a peer that keeps sending without the key fades it, a silent one does not).
 */
function reportedDemand(arr: Float64Array, r: number, at: number, W: number, cap: number): number {
  const age = at - arr[r + 1]!;
  if (!(age < W)) return 0;
  return Math.min(arr[r]!, cap) * (1 - age / W);
}
