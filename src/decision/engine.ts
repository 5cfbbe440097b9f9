import { type Clock, checkTime } from '../clock.js';
import { peekGossipReach, type WirePolicy } from '../crdt/codec.js';
import { ErrorCodes, RateMeshError } from '../errors.js';
import { validateKey } from '../keys/key.js';
import { checkCost, type PolicySet } from '../policy/index.js';
import type {
  Decision,
  DecisionRule,
  Explanation,
  KeyOutcome,
  OwnerInfo,
  Policy,
  PolicyKey,
  PolicySpec,
  RateLimiter,
} from '../types.js';
import { EngineCore, type PolicyRuntime } from './core.js';
import { Gossip } from './gossip.js';
import { type EngineOptions, parseEngineOptions, policySetOf } from './options.js';
// owner placement (issue 27): see the block "owner placement" below and owner.ts
import { type OwnerStats, Owners } from './owner.js';
import type { PeerView } from './peers.js';
import { replacePolicies, versionMismatches } from './replace.js';
import { type Eval, newEval, Rule } from './rule.js';
import { Sync } from './sync.js';
import type { EngineStats, PolicyReplacement, ReceiveResult, StartState, VersionMismatch } from './types.js';

export type { EngineOptions } from './options.js';
export type { EngineStats, PolicyReplacement, ReceiveResult, VersionMismatch } from './types.js';

/**
 * The decision core of one node: policies, the windowed G-counters of every
 * key, the peer view, and the decision rule. It is transport-free: a mesh feeds
 * it peers' gossip and publishes what it builds, the simulator does the same on
 * a virtual network.
 *
 * This class is the public face; the parts live beside it: the rule in
 * `rule.ts`, gossip in `gossip.ts`, sync and snapshots in `sync.ts`, policy
 * replacement in `replace.ts`, the state they share in `core.ts`, options and
 * defaults in `options.ts` and `constants.ts` (docs/architecture.md).
 *
 * Time is the clock's (`check`) or the caller's (`checkAt`); an earlier time
 * than one already used counts as standing still.
 */
export class Engine implements RateLimiter {
  readonly nodeId: string;
  readonly gossipIntervalMs: number;
  readonly expectedDelayMs: number;
  readonly staleAfterMs: number;
  readonly ready = true;
  private readonly core: EngineCore;
  private readonly rule: Rule;
  private readonly gossip: Gossip;
  private readonly sync: Sync;
  private readonly cur: Eval = newEval();
  private readonly clock: Clock;
  /** Owner placement (owner.ts): who owns a thin key, and the owner's exact decision. */
  private readonly owners: Owners;

  constructor(opts: EngineOptions) {
    const cfg = parseEngineOptions(opts);
    this.core = new EngineCore(cfg);
    this.rule = new Rule(this.core);
    this.gossip = new Gossip(this.core);
    this.sync = new Sync(this.core, this.gossip);
    this.owners = new Owners(this.core, this.rule);
    this.nodeId = cfg.nodeId;
    this.clock = cfg.clock;
    this.gossipIntervalMs = cfg.gossipIntervalMs;
    this.expectedDelayMs = cfg.expectedDelayMs;
    this.staleAfterMs = cfg.staleAfterMs;
  }

  /** The policies in force (replaced by {@link replacePolicies}). */
  get policies(): PolicySet {
    return this.core.policySet;
  }

  /**
   * The policy-set version hash (for operators: one figure for the whole set).
   * The wire carries one version per policy (see {@link policyVersions}).
   */
  get version(): string {
    return this.core.policySet.version;
  }

  /** The policy table this node's messages carry (global policies, name-sorted, with their versions). */
  policyTable(): WirePolicy[] {
    return this.core.wireTable.map((r) => ({ ...r }));
  }

  /** The version of each policy in force, by name ({@link policyVersion}: what the wire carries). */
  policyVersions(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const rt of this.core.rts) out[rt.policy.name] = rt.version;
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
  replacePolicies(policies: readonly PolicySpec[] | PolicySet, now?: number): PolicyReplacement {
    const next = policySetOf(policies, true);
    return replacePolicies(this.core, next, this.time(now));
  }

  /** Policies some members run at another version than ours, and which versions. */
  versionMismatches(now?: number): VersionMismatch[] {
    this.time(now);
    return versionMismatches(this.core);
  }

  /**
   * `now` validated (the clock's reading when not given) and never earlier than a time
   * already used: every method that takes an optional `now` decides at that time.
   */
  private time(now: number | undefined): number {
    return now === undefined ? this.core.now() : this.core.at(now);
  }

  policy(name: string): Policy | undefined {
    return this.core.rtByName.get(name)?.policy;
  }

  /**
   * Every term of the decision {@link check} would make now for `cost` on (`policy`, `key`), as
   * numbers, changing nothing (no key is created, no demand counted): the counts seen by origin
   * class, the reserves and why, the share of the headroom, and when the same request would pass.
   */
  explain(policy: string, key: string, cost = 1, time?: number): Explanation {
    const core = this.core;
    const rt = core.rtByName.get(policy);
    if (rt === undefined) throw unknownPolicy(policy);
    checkCost(cost, rt.policy);
    const now = core.at(time ?? this.clock.now());
    const p = rt.policy;
    const x: Explanation = {
      policy: p.name,
      key,
      cost,
      at: now,
      allowed: false,
      rule: 'allow',
      mode: 'global',
      reason: '',
      limit: p.limit,
      windowMs: p.windowMs,
      remaining: 0,
      retryAfterMs: 0,
      resetMs: 0,
    };
    this.rule.explainInto(rt, key, cost, now, newEval(), x);
    x.reason = explainReason(x);
    // a key placed on an owner (issue 27): who owns it in this view; a check here would ask it
    if (p.placement !== 'local' && this.owners.placed(rt)) {
      const owner = this.owners.ownerOf(rt, key, now);
      x.owner = owner;
      if (owner !== this.nodeId && cost > 0 && this.owners.seenFull(rt, key, cost, now, this.scratch)) {
        const e = this.scratch;
        x.allowed = false;
        x.rule = e.rule;
        x.remaining = e.remaining;
        x.retryAfterMs = e.retryAfterMs;
        x.reason = `denied here without asking the key's owner ${owner}: the counts seen in the window's full buckets already fill L`;
      } else if (owner !== this.nodeId)
        x.reason = `asked of the key's owner ${owner}; this node's own rule: ${x.reason}`;
    }
    return x;
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
    const core = this.core;
    let rt = core.lastRt;
    if (rt === undefined || policy !== rt.policy.name) rt = core.rtByName.get(policy);
    if (rt === undefined) throw unknownPolicy(policy);
    core.lastRt = rt;
    checkCost(cost, rt.policy);
    const now = core.at(time);
    if (typeof keys === 'string') {
      const e = this.cur;
      // owner placement (issue 27): a key placed on an owner is evaluated by owner.ts
      const info =
        rt.policy.placement !== 'local' && this.owners.placed(rt)
          ? this.owners.evaluate(rt, keys, cost, now, e)
          : undefined;
      if (info === undefined && !this.rule.evaluateFast(rt, keys, cost, now, e))
        this.rule.evaluate(rt, keys, cost, now, e, true);
      if (e.allowed) {
        this.rule.commit(e, cost, now);
        if (info !== undefined) this.owners.committed(e, cost, now);
      }
      const d = this.finish(e, e.allowed || rt.policy.shadow);
      if (info !== undefined) d.owner = info;
      return d;
    }
    return this.checkKeys(rt, keys, cost, now);
  }

  /**
   * {@link checkAt} of several keys of one policy. Apart from it: its closures would make every
   * single key's check allocate their variables' context.
   */
  private checkKeys(rt: PolicyRuntime, keys: readonly string[], cost: number, now: number): Decision {
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
    const costs = typeof cost === 'number' ? undefined : cost;
    const rts = this.pairRuntimes(pairs, cost);
    const now = this.core.at(time);
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
    rtAt: (i: number) => PolicyRuntime,
    keyAt: (i: number) => string,
    costAt: (i: number) => number,
    now: number,
    outcomes?: KeyOutcome[],
  ): Decision {
    let worst: Eval | undefined;
    let best: Eval | undefined;
    let blocked = false;
    const evals: Eval[] = [];
    // owner placement (issue 27): per pair, how a key placed on an owner was evaluated
    let infos: (OwnerInfo | undefined)[] | undefined;
    for (let i = 0; i < n; i++) {
      const rt = rtAt(i);
      const e = newEval();
      if (rt.policy.placement !== 'local' && this.owners.placed(rt)) {
        if (infos === undefined) infos = new Array<OwnerInfo | undefined>(n);
        infos[i] = this.owners.evaluate(rt, keyAt(i), costAt(i), now, e);
      } else this.rule.evaluate(rt, keyAt(i), costAt(i), now, e);
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
        if (evals[i]!.allowed && c > 0) {
          this.rule.commit(evals[i]!, c, now);
          if (infos?.[i] !== undefined) this.owners.committed(evals[i]!, c, now);
        }
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
    const decider = worst ?? best!;
    const d =
      worst !== undefined
        ? this.finish(worst, !blocked, blocked ? retry : worst.retryAfterMs)
        : this.finish(best!, true);
    const info = infos?.[evals.indexOf(decider)];
    if (info !== undefined) d.owner = info;
    return d;
  }

  /** Turn an evaluation into the Decision value and count it. */
  private finish(e: Eval, allowed: boolean, retryAfterMs = e.retryAfterMs): Decision {
    const p = e.rt!.policy;
    const limited = !e.allowed;
    const c = this.core.counters;
    c.decisions++;
    if (e.mode === 'global') c.byMode.global++;
    else if (e.mode === 'fallback') c.byMode.fallback++;
    else c.byMode.local++;
    if (limited) {
      c.limitedByRule[e.rule as Exclude<DecisionRule, 'allow'>]++;
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

  // ---- gossip and sync (bytes in, bytes out)

  /** True when some key's unsynced own count crossed the early-publish threshold. */
  wantsEarlyPublish(): boolean {
    return this.core.early;
  }

  /**
   * True while some key is tight (a request's allowance holds it, and this node's own counts at
   * their average rate over the window would take half of it over two horizons at the configured
   * interval), and for two intervals after: the mesh then gossips every `fastGossipIntervalMs`
   * (docs/decision-rule.md, "Rounds, and tight keys").
   */
  wantsFastGossip(): boolean {
    return this.core.lastNow < this.core.tightUntil;
  }

  /**
   * The mesh's join rule says this node has joined (src/mesh/join.ts: the first pod of a mesh,
   * or the join timeout passed): a starting node that hears no member stops waiting for one and
   * decides as a node cut off does (L/N). A node that hears members still waits until they have
   * heard it (docs/decision-rule.md, "Starting").
   */
  joined(): void {
    this.core.joinedSaid = true;
  }

  /**
   * When the mesh's join wait ends (its start plus `joinTimeoutMs`): hearing no member, the node
   * decides from then on as if {@link joined} were said (the mesh says it on its next tick), and
   * a `starting` denial's `Retry-After` is what is left of it.
   */
  joinWaitEnds(at: number): void {
    this.core.joinEndsAt = checkTime(at);
  }

  /**
   * The mesh's discovery has resolved its name to this node alone for a join wait, and no peer
   * was ever heard (a single replica, or the first pod until a second appears): it expects no
   * member, and decides every key on the whole of L as a lone node does, where it held L/N for
   * the members its bootstrap entries might be. One heard later is a member as any (its start
   * gate keeps it from deciding until this node has heard it). Nothing once a peer was heard.
   */
  alone(): void {
    const core = this.core;
    if (!core.peers.expectAlone()) return;
    core.joinedSaid = true;
    core.stamp++;
  }

  /** The start gate's state, for an engine rebuilt in place while this node starts (EngineSlot.rebuild). */
  startState(): StartState {
    const core = this.core;
    const peers: StartState['peers'] = [];
    for (const p of core.peers.byIdx)
      if (p !== undefined) peers.push({ id: p.id, heardUs: p.heardUs, sentToAt: p.sentToAt });
    return { firstSentAt: core.firstSentAt, joined: core.joinedSaid, joinEndsAt: core.joinEndsAt, peers };
  }

  /**
   * Take on the start gate's state of the engine this one replaces (EngineSlot.rebuild, after its
   * handover): which members have heard the node, and when. The handover's answers are the old
   * engine's, relabelled: they prove nothing about the members.
   */
  adoptStart(state: StartState): void {
    const core = this.core;
    const byId = new Map(state.peers.map((x) => [x.id, x]));
    for (const p of core.peers.byIdx) {
      if (p === undefined) continue;
      const x = byId.get(p.id);
      p.heardUs = x?.heardUs === true;
      p.sentToAt = x?.sentToAt ?? Number.POSITIVE_INFINITY;
    }
    core.firstSentAt = state.firstSentAt;
    if (state.joined) core.joinedSaid = true;
    core.joinEndsAt = state.joinEndsAt ?? Number.POSITIVE_INFINITY;
  }

  /**
   * True while the start gate is shut: this node expects peers and decides no global policy
   * until the members it hears have heard it (see {@link joined}; docs/decision-rule.md,
   * "Starting"). False for good once open.
   */
  starting(now?: number): boolean {
    return !this.core.startGate(this.time(now));
  }

  /**
   * Still starting, `members` (this node included) are expected, more than `expectedMembers`
   * said: a bootstrap name that resolves to several addresses (a headless Service) counts as one
   * entry until discovery resolves it. The start-up share is then L over that many. Ignored once
   * the start is over, and never lowers what is expected.
   */
  expectMembers(members: number): void {
    if (!Number.isInteger(members) || members < 1) return;
    if (this.core.peers.expect(members)) this.core.stamp++;
  }

  /**
   * True once, a staleness period, the data's age and a gossip interval after this node's first
   * sync answer: the caller should then pull every member's state again. A pod replaced at about
   * the time this one joined (a rolling deploy) may still have been live at its peers when they
   * first answered; by now it is stale there, and their answers carry its counts (see
   * {@link answerSync}). False on a node that never synced (alone, or the first of a mesh).
   */
  lateSyncDue(now?: number): boolean {
    const core = this.core;
    if (!(this.time(now) >= core.lateSyncAt)) return false;
    core.lateSyncAt = Number.NaN;
    core.lateAskedAt = core.lastNow;
    return true;
  }

  /**
   * The message for this tick: what changed since the last one (each changed
   * key's own counts from the bucket of its send before last on, and its
   * demand), repairs peers asked for, and now and then every key whole; an idle
   * node sends only the header (a heartbeat). See {@link Gossip.build}.
   *
   * `reach` is how many members the caller will hand the message to directly,
   * this node included (the mesh: its connected subscribers + 1); it goes in the
   * header so receivers can tell whether anyone they know still needs a relay.
   * Default: every live member (a network that delivers to all).
   */
  buildGossip(now?: number, reach?: number): Uint8Array {
    const t = this.time(now);
    this.owners.refreshView(t); // owner placement (issue 27): date changes of the live members
    // once left, a message that made the peers count this node live again would have them keep a share for it
    if (this.core.left) {
      const bye = this.gossip.farewell(t, reach);
      if (bye !== undefined) return bye;
    }
    return this.gossip.build(t, reach);
  }

  /**
   * Leave the mesh (a graceful stop): from now on this engine decides no global policy (each
   * such check is refused, rule `fallback-share` in mode `fallback`, retry -1: this node holds
   * no share any more), and the message returned is its farewell, to gossip as its last. It
   * says 0 members and carries the whole window of every global key with own counts (docs/wire-format.md).
   * A peer that merges it counts this node as departed at once instead of keeping L/N for it
   * while it turns stale and departs (`departAfterMs`, 5 s or more), and passes its counts on in
   * sync answers as a member gone's, so a pod that replaces this one sees them. Later
   * {@link buildGossip} calls return a farewell again. Undefined when the keys do not fit one
   * message (`maxKeysPerMessage`, `maxGossipBytes`): the engine still stops deciding, and its
   * peers treat it as before (stale, then departed). Local policies keep deciding.
   */
  farewell(now?: number, reach?: number): Uint8Array | undefined {
    const t = this.time(now);
    this.core.left = true;
    return this.gossip.farewell(t, reach);
  }

  /** Whether {@link farewell} was called (and no {@link rejoin} since): the engine decides no global policy. */
  get left(): boolean {
    return this.core.left;
  }

  /**
   * Back in the mesh after a farewell (a mesh node started again): global policies are decided
   * again, and the next message is an ordinary one (its peers count this node a member again).
   */
  rejoin(): void {
    this.core.left = false;
  }

  /**
   * How many members a gossip message's origin handed it to directly, itself included (the
   * header's `reach`, docs/wire-format.md); 0 when the bytes are not a gossip message of this
   * format. Read from the header alone, nothing merged: a transport's relay decision.
   */
  gossipReach(bytes: Uint8Array): number {
    return peekGossipReach(bytes);
  }

  /**
   * Merge a peer's gossip. The message is decoded and every entry validated
   * before anything is merged: a bad message is dropped whole and counted by
   * reason. Counts above what the origin could have admitted are capped.
   * `relayed`: the copy came through another node, not straight from its origin `from` (a
   * relay checked the origin's signature); its delay then says nothing of the clock offset,
   * so it takes no offset sample.
   */
  receiveGossip(from: string, bytes: Uint8Array, now?: number, relayed = false): ReceiveResult {
    const t = this.time(now);
    const r = this.gossip.receive(from, bytes, t, relayed);
    this.owners.refreshView(t); // owner placement (issue 27): date changes of the live members
    return r;
  }

  /** A request for a peer's full state; carries our time for the clock-offset estimate. */
  buildSyncRequest(now?: number): Uint8Array {
    return this.sync.request(this.time(now));
  }

  /** Answer a sync request with every key's window of every origin we hold. */
  answerSync(from: string, request: Uint8Array, now?: number): Uint8Array | ReceiveResult {
    return this.sync.answer(from, request, this.time(now));
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
  receiveSyncResponse(from: string, response: Uint8Array, now?: number): ReceiveResult {
    return this.sync.receive(from, response, this.time(now));
  }

  /**
   * This node's own windows (every global key with own counts), as bytes for
   * {@link restoreSnapshot}: a lone node that restarts keeps what it admitted.
   * The format is a sync response from this node (docs/wire-format.md).
   */
  snapshot(now?: number, withFloor = false): Uint8Array {
    return this.sync.snapshot(this.time(now), withFloor);
  }

  /**
   * Count what a snapshot holds (this node's admissions before a restart, whatever its id
   * was) on the unattributed floor: it counts here, bounded like any origin's counts, is
   * never gossiped as this node's own, and ages out with its buckets. A snapshot of other
   * policies, a malformed one, or one whose windows have passed restores nothing. Returns
   * the entries merged.
   *
   * `asOwn`: the snapshot is this engine's own node's, taken in this process under the same id
   * (a rebuilt engine taking over from the one before it, src/mesh/engine-slot.ts): its own
   * counts are restored as own (gossiped as this node's, which its peers hold already) and
   * its floor (origin 1 of `snapshot(now, true)`) on the floor.
   */
  restoreSnapshot(bytes: Uint8Array, now?: number, asOwn = false): ReceiveResult & { restored?: number } {
    return this.sync.restore(bytes, this.time(now), asOwn);
  }

  // ---- membership and introspection

  /** Members this node counts, itself included (N of the L/N fallback): a relay decision compares it with a message's reach. */
  memberCount(): number {
    return this.core.peers.knownN;
  }

  /**
   * The transport's view of its connection to a peer (the mesh reports every member on each
   * sweep). Membership stays the engine's call (peers.ts): a member departs once it has been
   * silent for departAfterMs; while no other member is live, only when its connection has
   * also been gone that long (a lone survivor stops reserving L/N for a peer that left, not
   * for one that is only quiet).
   */
  peerConnection(id: string, connected: boolean, now?: number): void {
    const t = this.time(now);
    const p = this.core.peers.get(id);
    if (p === undefined) return;
    if (connected) p.linkLostAt = Number.POSITIVE_INFINITY;
    else if (p.linkLostAt === Number.POSITIVE_INFINITY) p.linkLostAt = t;
  }

  /** Make a peer leave now, whatever the depart rule says (an operator's or a test's command). */
  peerDeparted(id: string, now?: number): void {
    const core = this.core;
    const p = core.peers.get(id);
    if (p === undefined) return;
    if (p.member) core.departed(p.id);
    p.member = false;
    core.stamp++;
    core.refresh(this.time(now));
  }

  peerViews(now?: number): PeerView[] {
    return this.core.peers.views(this.time(now));
  }

  /** Whether the stale-view fallback is in force now. */
  get fallbackActive(): boolean {
    this.core.now();
    return this.core.peers.allStale;
  }

  stats(now?: number): EngineStats {
    const core = this.core;
    this.time(now);
    const c = core.counters;
    const peers = core.peers;
    c.keys = core.budget.size;
    c.evictions = core.budget.evictions;
    c.peerTable = peers.size;
    let skewed = 0;
    for (const p of peers.byIdx) if (p?.skewed === true) skewed++;
    c.skewedPeers = skewed;
    let bytes = 0;
    for (const rt of core.rts) if (rt.sketch !== undefined) bytes += rt.sketch.bytes;
    c.sketchBytes = bytes;
    c.livePeers = peers.live.length;
    c.stalePeers = peers.stale.length;
    c.members = peers.knownN;
    c.fallback = peers.allStale;
    c.starting = !core.startGate(core.lastNow);
    const fv: Record<string, number> = {};
    for (const rt of core.rtByWire) if (rt.foreign.length > 0) fv[rt.policy.name] = rt.foreign.length;
    const slowGossip: string[] = [];
    for (const rt of core.rtByWire) if (core.slowGossip(rt.policy)) slowGossip.push(rt.policy.name);
    return {
      ...c,
      byMode: { ...c.byMode },
      limitedByRule: { ...c.limitedByRule },
      dropped: { ...c.dropped },
      foreignVersion: fv,
      slowGossip,
    };
  }

  // ---- owner placement (issue 27: owner.ts, docs/owner.md) -------------------------------

  /**
   * The member that owns (`policy`, `key`) when the key is placed on an owner other than this
   * node (ask it: {@link answerAsk} there); undefined when this node decides it (a local
   * placement, a local-scope policy, this node the owner, an unknown policy, or the counts seen
   * already fill L for `cost` (Owners.seenFull: the check here denies it without asking)).
   */
  remoteOwner(policy: string, key: string, now?: number, cost = 1): string | undefined {
    const rt = this.core.rtByName.get(policy);
    if (rt === undefined || rt.policy.placement === 'local' || !this.owners.placed(rt)) return undefined;
    const t = this.time(now);
    const owner = this.owners.ownerOf(rt, key, t);
    if (owner === this.nodeId) return undefined;
    return cost > 0 && this.owners.seenFull(rt, key, cost, t, this.scratch) ? undefined : owner;
  }
  /** An evaluation nothing keeps (remoteOwner's look at the counts). */
  private readonly scratch = newEval();

  /**
   * An ask from member `from` (the transport's authenticated peer): decide `cost` on (`policy`,
   * `key`) as its owner and spend it here when allowed (cost 0: look without spending). Refused
   * with a reason, nothing spent, when `from` is not a live member, the input is bad, the policy
   * is not placed on owners, this node is not the key's owner in its own view (`not-owner`), or
   * it is still starting (`starting`: the start gate).
   */
  answerAsk(
    from: string,
    policy: string,
    key: string,
    cost: number,
    now?: number,
  ): Decision | { refused: string } {
    const owners = this.owners;
    const t = this.time(now);
    const refuse = (reason: string): { refused: string } => {
      owners.refuse(reason);
      return { refused: reason };
    };
    const peer = this.core.peers.get(from);
    if (peer === undefined || !peer.member) return refuse('not-member');
    const rt = this.core.rtByName.get(policy);
    if (rt === undefined) return refuse('bad-policy');
    if (rt.policy.placement === 'local' || !owners.placed(rt)) return refuse('not-placed');
    try {
      validateKey(key);
    } catch {
      return refuse('bad-key');
    }
    try {
      if (cost !== 0) checkCost(cost, rt.policy);
    } catch {
      return refuse('bad-cost');
    }
    if (owners.ownerOf(rt, key, t) !== this.nodeId) return refuse('not-owner');
    // starting (the start gate): it decides nothing yet, as owner neither
    if (!this.core.startGate(t)) return refuse('starting');
    const e = newEval();
    const info = owners.evaluate(rt, key, cost, t, e);
    if (e.allowed && cost > 0) {
      this.rule.commit(e, cost, t);
      owners.committed(e, cost, t);
    }
    owners.stats.answered++;
    const d = this.finish(e, e.allowed || rt.policy.shadow);
    d.owner = info;
    return d;
  }

  /**
   * Decide (`policy`, `key`) here without its owner's answer (`reason`: timeout, unreachable,
   * not-owner, refused): the policy's failure mode decides. `closed`: denied, rule
   * `owner-unreachable`, Retry-After one hold period (a change of owner is settled by then);
   * `open`: the local rule decides (it never passes L on its own). Counted in ownerStats().
   */
  decideWithoutOwner(
    policy: string,
    key: string,
    cost: number,
    reason: NonNullable<OwnerInfo['reason']>,
    now?: number,
  ): Decision {
    const rt = this.core.rtByName.get(policy);
    if (rt === undefined || rt.policy.placement === 'local' || !this.owners.placed(rt))
      return this.checkAt(this.time(now), policy, key, cost);
    const t = this.time(now);
    checkCost(cost, rt.policy);
    const owners = this.owners;
    if (rt.policy.failureMode === 'closed') {
      owners.stats.fallback[reason] = (owners.stats.fallback[reason] ?? 0) + 1;
      owners.stats.failedClosed++;
      const e = newEval();
      e.rt = rt;
      e.key = validateKey(key);
      e.allowed = false;
      e.rule = 'owner-unreachable';
      e.mode = 'global';
      e.remaining = 0;
      e.retryAfterMs = Math.ceil(owners.holdMs);
      e.resetMs = 0;
      e.delayMs = 0;
      const d = this.finish(e, rt.policy.shadow);
      d.owner = { id: owners.ownerOf(rt, key, t), decidedBy: 'local', reason };
      return d;
    }
    const e = newEval();
    const info = owners.evaluate(rt, key, cost, t, e, reason);
    if (e.allowed) {
      this.rule.commit(e, cost, t);
      owners.committed(e, cost, t);
    }
    const d = this.finish(e, e.allowed || rt.policy.shadow);
    d.owner = info;
    return d;
  }

  /**
   * Turn owner placement on: the caller's transport carries asks to owners (a mesh node with the
   * owner protocol, the simulator's OwnerSim) and routes checks of keys owned elsewhere through
   * them. Off by default: an engine that only answers synchronous checks decides every key by
   * the local rule (no node could ask an owner, and an owner deciding alone beside nodes that
   * decide by the local rule would not count what they admit unseen).
   */
  enableOwnerPlacement(on = true): void {
    this.owners.enabled = on;
  }

  /**
   * Key the owner hash with a secret every member holds (the mesh's psk): who owns which key is
   * then unknown to anyone without it (docs/security.md). Set before the first decision.
   */
  setOwnerSecret(secret: Uint8Array): void {
    this.owners.setSecret(secret);
  }

  /**
   * Whether any policy's keys are placed on owners now (placement on, and a policy `owner`, or
   * `auto` and thin at the live membership): the transport then keeps a link open to every live
   * member, so a key's first ask does not wait for one to open.
   */
  ownerPlacedAny(): boolean {
    const rts = this.core.rts;
    for (let i = 0; i < rts.length; i++) if (this.owners.placed(rts[i]!)) return true;
    return false;
  }

  /** Counters of owner placement: decisions as owner, settling, asks answered and refused, fallbacks. */
  ownerStats(): OwnerStats {
    const s = this.owners.stats;
    return { ...s, refused: { ...s.refused }, fallback: { ...s.fallback } };
  }

  // ---- end of owner placement --------------------------------------------------------------

  /** This node's estimate of the global count for a key now (for tests and tools). */
  estimate(policy: string, key: string): number {
    const core = this.core;
    const rt = core.rtByName.get(policy);
    if (rt === undefined || rt.local) return 0;
    const now = core.now();
    const ks = rt.windows.get(key);
    if (ks === undefined) return 0;
    const kw = ks.window;
    const c = Math.floor(now / rt.bw);
    if (c > kw.cur) kw.roll(c);
    return kw.estimate(1 - (now - kw.cur * rt.bw) / rt.bw);
  }

  // ---- counting as envoyproxy/ratelimit (src/envoy/counting.ts, used by src/envoy/service.ts)

  /**
   * The policies of `pairs`, validated as checkAll takes them (a non-empty list of [policy, key];
   * one cost, or one per pair, 0 in a list being a look without spending).
   */
  private pairRuntimes(pairs: readonly PolicyKey[], cost: number | readonly number[]): PolicyRuntime[] {
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
    const rts: PolicyRuntime[] = [];
    for (let i = 0; i < pairs.length; i++) {
      const pair = pairs[i];
      const rt = Array.isArray(pair) ? this.core.rtByName.get(pair[0]) : undefined;
      if (rt === undefined) throw unknownPolicy(Array.isArray(pair) ? pair[0] : pair, `pairs[${i}]`);
      // In a list of costs, 0 evaluates the pair without spending on it (a peek).
      if (costs === undefined) checkCost(cost, rt.policy);
      else if (costs[i] !== 0) checkCost(costs[i], rt.policy);
      rts.push(rt);
    }
    return rts;
  }

  /**
   * {@link checkAll} with one cost per pair, then the costs spent whatever the decision, as
   * envoyproxy/ratelimit counts (see CountingLimiter in src/envoy/counting.ts): `every` spends
   * on every pair; `refused`, when any pair refused or `over` (the caller's own refusal), on
   * the refused pairs only, else on every pair. The rule decides as in checkAll; only what is
   * spent differs. A global pair's forced spend is cut where this node's own count over the
   * window's full buckets reaches L: peers cap an origin at what it could have admitted
   * (gossip.ts merge), so an honest node never sends more.
   */
  checkAllCounted(
    pairs: readonly PolicyKey[],
    costs: readonly number[],
    mode: 'every' | 'refused',
    over = false,
  ): Decision & { outcomes: KeyOutcome[] } {
    // a list of costs always (a number here would be one cost for every pair)
    const rts = this.pairRuntimes(pairs, Array.isArray(costs) ? costs : [Number.NaN]);
    const now = this.core.at(this.clock.now());
    const evals: Eval[] = [];
    let worst: Eval | undefined;
    let best: Eval | undefined;
    let blocked = over;
    let refused = over;
    for (let i = 0; i < pairs.length; i++) {
      const rt = rts[i]!;
      const e = newEval();
      this.rule.evaluate(rt, pairs[i]![1], costs[i]!, now, e);
      evals.push(e);
      if (!e.allowed) {
        refused = true;
        if (worst === undefined || (!rt.policy.shadow && worst.rt!.policy.shadow)) worst = e;
        if (!rt.policy.shadow) blocked = true;
      } else if (
        best === undefined ||
        e.remaining / rt.policy.limit < best.remaining / best.rt!.policy.limit
      ) {
        best = e;
      }
    }
    const outcomes: KeyOutcome[] = [];
    let retry = 0;
    for (let i = 0; i < evals.length; i++) {
      const ev = evals[i]!;
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
      if (!ev.allowed && !p.shadow && retry >= 0)
        retry = ev.retryAfterMs < 0 ? -1 : Math.max(retry, ev.retryAfterMs);
      let c = costs[i]!;
      if (c <= 0 || (mode === 'refused' && refused && ev.allowed)) continue;
      const kw = ev.ks?.window;
      // a forced spend never takes this node's own count past L (see above)
      if (!ev.allowed && kw !== undefined) c = Math.min(c, Math.floor(p.limit - kw.ownFull));
      if (c > 0) this.rule.commit(ev, c, now);
    }
    const d = (
      worst !== undefined
        ? this.finish(worst, !blocked, blocked ? retry : worst.retryAfterMs)
        : this.finish(best!, !blocked)
    ) as Decision & { outcomes: KeyOutcome[] };
    d.outcomes = outcomes;
    return d;
  }
}

/** A check naming no policy in force. */
function unknownPolicy(policy: unknown, field = 'policy'): RateMeshError {
  return new RateMeshError(
    ErrorCodes.POLICY_UNKNOWN,
    `no policy named ${JSON.stringify(String(policy))}`,
    field,
  );
}

/** The rule of an explained decision in words, with its numbers. */
function explainReason(x: Explanation): string {
  const n = (v: number) => String(Math.round(v * 100) / 100);
  switch (x.rule) {
    case 'allow':
      return `allowed (${x.mode}): ${n(x.remaining)} left of ${x.limit} after this request`;
    case 'cost-exceeds-limit':
      return `cost ${x.cost} is more than the limit ${x.limit}: never admitted`;
    case 'left-mesh':
      return 'this node has said its farewell (a graceful stop): it decides no global policy';
    case 'fallback-share': {
      const f = x.fallback;
      return f === undefined
        ? 'every peer is stale or not heard yet: this node keeps its own counts within L/N'
        : `every peer is stale or not heard yet: own counts ${n(f.own)} + cost ${x.cost} pass this node's part of L, L/N = ${n(f.share)}`;
    }
    case 'startup-hold': {
      const h = x.startupHold;
      return h === undefined
        ? 'just joined: the start-up share holds until the members named are heard'
        : `just joined, a member named by the mesh not heard yet: own counts ${n(h.own)} + cost ${x.cost} pass the start-up share ${n(h.share)} for ${n(h.untilMs)} ms more`;
    }
    case 'starting': {
      const st = x.starting;
      return st === undefined
        ? 'starting: the members heard have not all heard this node yet; it decides no global policy until they have'
        : st.heard <= 1
          ? `starting: no member of the ${n(st.expected)} expected heard yet; it decides no global policy until one has heard it or the join wait ends`
          : `starting: ${n(st.heard)} of ${n(st.expected)} members heard (this node included); it decides no global policy until every member it knows of has heard it (its sync answer names this node, or its gossip comes D after our first message with it live)`;
    }
    case 'global-limit': {
      const s = x.seen;
      const r = x.reserves;
      return `the window's counts ${s === undefined ? '?' : n(s.total)} (own ${s === undefined ? '?' : n(s.own)}, peers ${s === undefined ? '?' : n(s.peers)}) + reserves ${r === undefined ? 0 : n(r.stale + r.otherVersion)} + cost ${x.cost} pass the limit ${x.limit}`;
    }
    case 'headroom-share': {
      const h = x.share;
      return h === undefined
        ? "this node's share of the headroom is spent"
        : `own recent counts ${n(h.ownRecent)} + cost ${x.cost} pass this node's share of the headroom: ${n(h.share)} (weight ${n(h.weight)} of ${n(h.weights)}, ${h.sharers} sharers) of ${n(h.headroom)} = ${n(h.allowance)}; peers may have admitted unseen for the last ${n(h.horizonMs)} ms`;
    }
    case 'local-limit':
      return 'the local algorithm refused (local scope, or the front limiter)';
    case 'owner-unreachable':
      return "the key's owner did not answer within the policy's ownerDeadlineMs, and the policy fails closed";
  }
}
