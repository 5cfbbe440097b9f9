import './polyfill.js';
import type { PeerView } from '../decision/peers.js';
import type { PolicyReplacement } from '../decision/types.js';
import type { PolicySet } from '../policy/index.js';
import type {
  CountingLimiter,
  CountMode,
  Decision,
  Explanation,
  KeyOutcome,
  OwnerInfo,
  Policy,
  PolicyKey,
  PolicySpec,
} from '../types.js';
import { autoRelayFanout, fastGossipIntervalMs, fastTickLateness, relayHopsFor } from './auto-relay.js';
import { MAX_PUBLISHES_IN_FLIGHT, RPC_FRAME_MESSAGES, SYNC_MAX_INBOUND_STREAMS, TOPIC } from './constants.js';
import { defaultEngineFactory } from './default-engine.js';
import { Discovery, emptyDiscoveryStats, systemResolver } from './discovery.js';
import type { EngineFactory, MeshEngine } from './engine-port.js';
import { EngineSlot } from './engine-slot.js';
import { bump, GossipIn } from './gossip-in.js';
import { peerIdOf } from './identity.js';
import { JoinWatch, STARTING_REASON } from './join.js';
import { PeerLinks } from './links.js';
import { createMeshNode, directGossipOf, type MeshNode } from './node.js';
import { type MeshConfig, parseOptions } from './options.js';
import { type AskFailure, type OwnerAnswer, OwnerService } from './owner-service.js';
import { closeServers, type ShutdownOptions, shutdownOptions, sleep } from './shutdown.js';
import { loadSnapshot, saveSnapshot } from './snapshot-file.js';
import { explainStartError } from './start-errors.js';
import { SyncService } from './sync.js';
import type {
  EmbeddedMeshLimiter,
  MeshHealth,
  MeshLimiter,
  MeshLimiterOptions,
  MeshState,
  MeshStats,
} from './types.js';
import { warmUp } from './warm.js';

type State = MeshState;

/** How long a graceful stop waits for its farewell to be handed to the links. */
const FAREWELL_WAIT_MS = 1_000;
/**
 * Intervals (gossipIntervalMs) a node ticks at its configured interval once its fast ticks ran
 * late by half their interval on average (short of CPU: fastTickLateness), before it ticks fast
 * again.
 */
const FAST_HOLD_INTERVALS = 10;

class MeshLimiterImpl implements EmbeddedMeshLimiter {
  readonly peerId: string;
  readonly topic: string;
  /** The engine, in a slot: 'auto' relay replaces it when it switches mode (engine-slot.ts). */
  private readonly engine: EngineSlot;
  private readonly factory: EngineFactory;
  private state: State = 'idle';
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private shuttingDown: Promise<void> | undefined;
  private node: MeshNode | undefined;
  private sync: SyncService | undefined;
  /** Owner placement (issue 27): asks to the owners of thin keys, answers as owner. */
  private owners: OwnerService | undefined;
  private discovery: Discovery | undefined;
  /** Readiness at start (join.ts, the daemon's `/readyz` rule): made when the node runs. */
  private join: JoinWatch | undefined;
  /** Since when every discovery round resolved the bootstrap to this node alone (undefined: not now). */
  private aloneSince: number | undefined;
  private tickTimer: NodeJS.Timeout | undefined;
  /** When (the clock's) the armed tick is due, after what interval, and whether the fast one. */
  private tickAt = 0;
  private tickMs = 0;
  private tickFast = false;
  /** No fast tick before this (the clock's): fast ticks came late (onTick); their lateness, averaged, ms. */
  private fastHeldUntil = Number.NEGATIVE_INFINITY;
  private fastLate = 0;
  private sweepTimer: NodeJS.Timeout | undefined;
  private earlyImmediate: NodeJS.Immediate | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  private publishesInFlight = 0;
  /** TESTS/DRILLS ONLY (mesh-test): drop all gossip in and out; see {@link isolateForTests}. */
  private isolated = false;
  private readonly links: PeerLinks;
  private readonly gossipIn: GossipIn;
  private readonly counters: Omit<
    MeshStats,
    'peerId' | 'topic' | 'running' | 'peers' | 'sync' | 'discovery' | 'engine' | 'versionMismatch' | 'relay'
  >;
  /** 'auto' relay: switches made (and rebuilds for more hops while relaying). */
  private relaySwitches = 0;

  constructor(private readonly cfg: MeshConfig) {
    this.peerId = peerIdOf(cfg.privateKey);
    this.factory = cfg.engineFactory ?? defaultEngineFactory;
    this.engine = new EngineSlot(this.factory, {
      policies: cfg.policies,
      nodeId: this.peerId,
      clock: cfg.clock,
      gossipIntervalMs: cfg.gossipIntervalMs,
      expectedDelayMs: cfg.expectedDelayMs,
      departAfterMs: cfg.departAfterMs,
      expectedMembers: 1 + cfg.bootstrap.length,
      freshId: cfg.freshId,
      joinTimeoutMs: cfg.joinTimeoutMs,
      relayHops: cfg.relayHops,
      logger: cfg.logger,
    });
    // owner placement: who owns which key is keyed with the psk, unknown without it (docs/security.md)
    if (cfg.psk !== undefined) this.engine.setOwnerSecret?.(cfg.psk);
    this.topic = TOPIC;
    this.counters = {
      gossip: {
        ticks: 0,
        fastTicks: 0,
        fastHeld: 0,
        earlyPublishes: 0,
        msgsOut: 0,
        bytesOut: 0,
        publishErrors: 0,
        msgsIn: 0,
        bytesIn: 0,
        dropped: {},
        relayed: 0,
        notRelayed: 0,
        relayedIn: 0,
      },
      dropped: {},
      injected: { delayMs: cfg.injectDelayMs, loss: cfg.injectLoss, delayed: 0, dropped: 0 },
      otherTopics: { events: 0, peers: {} },
    };
    this.links = new PeerLinks({
      engine: this.engine,
      clock: cfg.clock,
      logger: cfg.logger,
      topic: this.topic,
      timers: this.timers,
      otherTopics: this.counters.otherTopics,
      running: () =>
        this.state === 'running' && this.node !== undefined && this.sync !== undefined
          ? { node: this.node, sync: this.sync }
          : undefined,
    });
    this.gossipIn = new GossipIn({
      cfg,
      engine: this.engine,
      links: this.links,
      peerId: this.peerId,
      topic: this.topic,
      timers: this.timers,
      counters: this.counters,
      running: () => this.state === 'running',
      relayFanout: () => this.relayFanout(),
      isolated: () => this.isolated,
    });
  }

  // ---- RateLimiter: synchronous, no network ----

  check(policy: string, keys: string | readonly string[], cost?: number): Decision {
    const d = this.engine.check(policy, keys, cost);
    this.pollEarlyPublish();
    return d;
  }

  explain(policy: string, key: string, cost?: number): Explanation {
    return this.engine.explain(policy, key, cost);
  }

  checkAll(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): Decision & { outcomes: KeyOutcome[] } {
    const d = this.engine.checkAll(pairs, cost);
    this.pollEarlyPublish();
    return d;
  }

  /**
   * The engine's counted check (src/envoy/counting.ts), for the Envoy RLS service; an engine
   * without it (a test's) answers as checkAll, spending all or nothing.
   */
  checkAllCounted(
    pairs: readonly PolicyKey[],
    costs: readonly number[],
    mode: CountMode,
    over = false,
  ): Decision & { outcomes: KeyOutcome[] } {
    const e = this.engine as MeshEngine & Partial<CountingLimiter>;
    const d =
      e.checkAllCounted === undefined
        ? this.engine.checkAll(pairs, over ? costs.map(() => 0) : costs)
        : e.checkAllCounted(pairs, costs, mode, over);
    this.pollEarlyPublish();
    return d;
  }

  policy(name: string): Policy | undefined {
    return this.engine.policy(name);
  }

  // ---- owner placement (issue 27, docs/owner.md): async checks that may ask an owner ----

  checkAsync(policy: string, keys: string | readonly string[], cost = 1): Promise<Decision> {
    try {
      if (typeof keys !== 'string') {
        if (!Array.isArray(keys) || keys.length === 0) return Promise.resolve(this.check(policy, keys, cost));
        return this.checkAllAsync(
          keys.map((k) => [policy, k] as const),
          cost,
        );
      }
      const owner = this.remoteOwnerOf(policy, keys, cost);
      if (owner === undefined) return Promise.resolve(this.check(policy, keys, cost));
      return this.askOne(owner, policy, keys, cost);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  checkOrAsk(
    pairs: readonly PolicyKey[],
    cost: number | readonly number[] = 1,
  ): (Decision & { outcomes?: KeyOutcome[] }) | Promise<Decision & { outcomes: KeyOutcome[] }> {
    if (this.ownedElsewhere(pairs)) return this.checkAllAsync(pairs, cost);
    if (Array.isArray(pairs) && pairs.length === 1 && typeof cost === 'number' && Array.isArray(pairs[0]))
      return this.check(pairs[0][0], pairs[0][1], cost);
    return this.checkAll(pairs, cost);
  }

  async checkAllAsync(
    pairs: readonly PolicyKey[],
    cost: number | readonly number[] = 1,
  ): Promise<Decision & { outcomes: KeyOutcome[] }> {
    const costs = typeof cost === 'number' ? undefined : cost;
    const remote: number[] = [];
    const owners: string[] = [];
    if (Array.isArray(pairs)) {
      for (let i = 0; i < pairs.length; i++) {
        const pr = pairs[i];
        if (!Array.isArray(pr) || typeof pr[0] !== 'string' || typeof pr[1] !== 'string') continue;
        const owner = this.remoteOwnerOf(pr[0], pr[1], costs === undefined ? (cost as number) : costs[i]!);
        if (owner !== undefined) {
          remote.push(i);
          owners.push(owner);
        }
      }
    }
    // every key decided here (or input the sync check refuses with a clear error)
    if (remote.length === 0) return this.checkAll(pairs, cost);
    const costAt = (i: number): number => (costs === undefined ? (cost as number) : costs[i]!);
    // 1. the keys decided here, looked at without spending: a refusal spends nowhere
    const localIdx: number[] = [];
    for (let i = 0; i < pairs.length; i++) if (!remote.includes(i)) localIdx.push(i);
    if (localIdx.length > 0) {
      const peek = this.engine.checkAll(
        localIdx.map((i) => pairs[i]!),
        localIdx.map(() => 0),
      );
      if (!peek.allowed) return peek;
    }
    // 2. each owner decides and spends its key (all at once; a refusal of one leaves the others'
    //    spending counted: over-counted, never under-counted)
    const remoteDecisions = await Promise.all(
      remote.map((i, j) => {
        const c = costAt(i);
        return c === 0
          ? this.askOne(owners[j]!, pairs[i]![0], pairs[i]![1], 0)
          : this.askOne(owners[j]!, pairs[i]![0], pairs[i]![1], c);
      }),
    );
    // 3. the keys decided here spend, unless an owner refused
    const refused = remoteDecisions.find((d) => !d.allowed);
    let local: (Decision & { outcomes: KeyOutcome[] }) | undefined;
    if (localIdx.length > 0) {
      local = this.engine.checkAll(
        localIdx.map((i) => pairs[i]!),
        localIdx.map((i) => (refused !== undefined ? 0 : costAt(i))),
      );
      this.pollEarlyPublish();
    }
    const outcomes: KeyOutcome[] = new Array(pairs.length);
    localIdx.forEach((i, j) => {
      outcomes[i] = local!.outcomes[j]!;
    });
    remote.forEach((i, j) => {
      const d = remoteDecisions[j]!;
      const p = this.engine.policy(d.policy);
      outcomes[i] = {
        policy: d.policy,
        key: d.key,
        limit: d.limit,
        windowMs: p?.windowMs ?? 0,
        remaining: d.remaining,
        resetMs: d.resetMs,
        retryAfterMs: d.limited ? d.retryAfterMs : 0,
        limited: d.limited,
        shadow: d.shadow,
      };
    });
    const decider = refused ?? (local !== undefined && !local.allowed ? local : undefined);
    if (decider !== undefined) return { ...decider, outcomes };
    // allowed: the pair with the least room decides, as checkAll has it
    let best: Decision = remoteDecisions[0]!;
    for (const d of remoteDecisions) if (d.remaining / d.limit < best.remaining / best.limit) best = d;
    if (local !== undefined && local.remaining / local.limit < best.remaining / best.limit) best = local;
    return { ...best, outcomes };
  }

  ownedElsewhere(pairs: readonly PolicyKey[]): boolean {
    if (this.owners === undefined || !Array.isArray(pairs)) return false;
    for (const pr of pairs)
      if (
        Array.isArray(pr) &&
        typeof pr[0] === 'string' &&
        typeof pr[1] === 'string' &&
        this.remoteOwnerOf(pr[0], pr[1]) !== undefined
      )
        return true;
    return false;
  }

  /** The member owning (policy, key) when it is decided elsewhere; undefined while not running. */
  private remoteOwnerOf(policy: string, key: string, cost = 1): string | undefined {
    if (this.owners === undefined || this.state !== 'running') return undefined;
    return this.engine.remoteOwner?.(policy, key, this.cfg.clock.now(), cost);
  }

  /** Ask `owner` to decide `cost` on (policy, key); without an answer the policy's failure mode decides. */
  private async askOne(owner: string, policy: string, key: string, cost: number): Promise<Decision> {
    const p = this.engine.policy(policy);
    const service = this.owners;
    if (p === undefined || service === undefined) return this.check(policy, key, cost);
    const r: OwnerAnswer | AskFailure = await service.ask(owner, policy, key, cost, p.ownerDeadlineMs ?? 50);
    if (typeof r === 'string') {
      const d =
        this.engine.decideWithoutOwner?.(policy, key, cost === 0 ? 1 : cost, r, this.cfg.clock.now()) ??
        this.engine.check(policy, key, cost === 0 ? 1 : cost);
      this.pollEarlyPublish();
      return d;
    }
    const info: OwnerInfo = {
      id: owner,
      decidedBy: 'asked',
      ...(r.reason === undefined ? {} : { reason: r.reason }),
      rttMs: Math.round(r.rttMs * 1000) / 1000,
    };
    return {
      allowed: !r.limited || p.shadow,
      limited: r.limited,
      policy,
      key,
      rule: r.rule,
      mode: 'global',
      limit: p.limit,
      remaining: r.remaining,
      retryAfterMs: r.limited ? r.retryAfterMs : 0,
      resetMs: r.resetMs,
      delayMs: 0,
      shadow: p.shadow,
      owner: info,
    };
  }

  // ---- end of owner placement ----

  get policyVersion(): string {
    return this.engine.version;
  }

  policyVersions(): Record<string, string> {
    return this.engine.policyVersions();
  }

  replacePolicies(policies: readonly PolicySpec[] | PolicySet): PolicyReplacement {
    const r = this.engine.replacePolicies(policies, this.cfg.clock.now());
    this.cfg.logger.info(
      { kept: r.kept, changed: r.changed, added: r.added, removed: r.removed, version: r.version },
      'ratemesh policies replaced',
    );
    return r;
  }

  get ready(): boolean {
    return this.state === 'running' && this.engine.ready;
  }

  get lifecycle(): MeshState {
    return this.state;
  }

  health(): MeshHealth {
    const state = this.state;
    let live = 0;
    let stale = 0;
    let fallback = false;
    if (state === 'running') {
      for (const p of this.engine.peerViews(this.cfg.clock.now())) {
        if (p.stale) stale++;
        else live++;
      }
      fallback = this.engine.stats(this.cfg.clock.now()).fallback;
    }
    const joined = state === 'running' && this.joined();
    const starting = state === 'running' && this.engine.starting();
    let reason: string | undefined;
    if (this.shuttingDown !== undefined) reason = 'draining: shutting down';
    else if (state !== 'running') reason = `node ${state}`;
    else if (!this.engine.ready) reason = 'engine not ready';
    else if (!joined)
      reason = 'joining: other members found, waiting for the first sync answer from one of them';
    else if (starting) reason = STARTING_REASON;
    const h: MeshHealth = {
      live: state !== 'stopped',
      ready: reason === undefined,
      joined,
      starting,
      state,
      draining: this.shuttingDown !== undefined,
      fallback,
      peers: { live, stale },
    };
    if (reason !== undefined) h.reason = reason;
    return h;
  }

  /**
   * The daemon's join rule (join.ts) over this node's sync and discovery counters; once it says
   * joined, the engine is told (with no member heard, its start gate opens: Engine.joined).
   */
  private joined(): boolean {
    const join = this.join;
    if (join === undefined) return false;
    const joined = join.joined(this.cfg.clock.now(), () => ({
      sync: this.sync?.stats ?? { pullsOk: 0 },
      discovery: this.discovery?.stats ?? emptyDiscoveryStats(),
    }));
    if (joined && this.engine.starting()) this.engine.joined();
    return joined;
  }

  shutdown(options?: ShutdownOptions): Promise<void> {
    if (this.shuttingDown !== undefined) return this.shuttingDown;
    const o = shutdownOptions(options);
    const log = this.cfg.logger;
    this.shuttingDown = (async () => {
      log.info(
        { delayMs: o.delayMs, graceMs: o.graceMs, servers: o.servers.length },
        'ratemesh shutdown: readiness off, draining',
      );
      await sleep(o.delayMs);
      const forced = await closeServers(o.servers, o.graceMs);
      if (forced > 0)
        log.warn(
          { servers: forced, graceMs: o.graceMs },
          'ratemesh shutdown: grace over, connections closed',
        );
      await this.stop();
    })();
    return this.shuttingDown;
  }

  // ---- lifecycle ----

  start(): Promise<void> {
    if (this.state === 'running') return Promise.resolve();
    if (this.starting !== undefined) return this.starting;
    if (this.stopping !== undefined) {
      this.starting = this.stopping.then(() => this.doStart());
    } else {
      this.starting = this.doStart();
    }
    const p = this.starting;
    void p.then(
      () => {
        this.starting = undefined;
      },
      () => {
        this.starting = undefined;
      },
    );
    return p;
  }

  private async doStart(): Promise<void> {
    const cfg = this.cfg;
    this.state = 'starting';
    // a start after a shutdown serves again
    if (this.stopping === undefined) this.shuttingDown = undefined;
    // a start after a stop: the farewell said then is taken back
    this.engine.rejoin?.();
    try {
      // compile the decision path before the first request (throwaway engines; no state shared)
      const warm = warmUp(this.factory, cfg.policies);
      cfg.logger.debug(
        { decisions: warm.decisions, ms: Math.round(warm.ms) },
        'ratemesh decision path warmed up',
      );
      const node = await createMeshNode({
        listen: cfg.listen,
        privateKey: cfg.privateKey,
        psk: cfg.psk,
        degree: cfg.meshDegree,
        heartbeatMs: cfg.heartbeatMs,
        maxRpcBytes: cfg.maxMessageBytes * RPC_FRAME_MESSAGES + 64 * 1024,
        inboundConnectionThreshold: cfg.inboundConnectionThreshold,
        maxConnections: cfg.maxConnections,
        dialTimeoutMs: cfg.dialTimeoutMs,
        relayFanout: cfg.relayFanout,
        relaySwitchable: cfg.relayAuto,
        relayMacPeers: cfg.relayMacPeers,
      });
      this.node = node;
      const pubsub = node.services.pubsub;
      pubsub.addEventListener('subscription-change', this.links.onSubscriptionChange);
      node.addEventListener('peer:disconnect', this.links.onPeerDisconnect);
      pubsub.topicValidators.set(this.topic, this.gossipIn.validate);
      this.sync = new SyncService(
        node,
        this.engine,
        cfg.clock,
        {
          maxFrameBytes: cfg.maxSyncBytes,
          timeoutMs: cfg.syncTimeoutMs,
          maxInboundStreams: SYNC_MAX_INBOUND_STREAMS,
        },
        cfg.logger,
      );
      await this.sync.start();
      // owner placement (issue 27): the ask protocol, then the engine may place keys on owners
      if (this.engine.answerAsk !== undefined) {
        const engine = this.engine as Required<Pick<MeshEngine, 'answerAsk'>>;
        this.owners = new OwnerService(
          node,
          { answerAsk: (f, p, k, c, n) => engine.answerAsk(f, p, k, c, n) },
          () => cfg.clock.now(),
          cfg.logger,
        );
        await this.owners.start();
      }
      await node.start();
      pubsub.subscribe(this.topic);
      this.discovery = new Discovery(node, {
        entries: cfg.bootstrap,
        intervalMs: cfg.discoveryIntervalMs,
        dialTimeoutMs: cfg.dialTimeoutMs,
        maxPeers: cfg.dialPeers,
        resolve: systemResolver,
        logger: cfg.logger,
        // a bootstrap name counts as one member until it resolves: a start-up share of L over
        // every address it resolves to, not over 1 + the entries
        onRound: (others) => {
          this.engine.expectMembers(1 + others);
          // resolved, to this node alone (not a failed or empty lookup)
          if (others > 0 || (this.discovery?.stats.lastResolved ?? 0) === 0) {
            this.aloneSince = undefined;
            return;
          }
          // the first pod: its start gate opens now, not on the next tick (a starting node's
          // Retry-After is the whole join wait)
          this.joined();
          // alone for a join wait, every round: a single replica, whose L is its own (two pods
          // started together find each other within a discovery interval and DNS's cache)
          const now = this.cfg.clock.now();
          this.aloneSince ??= now;
          if (now - this.aloneSince >= this.cfg.joinTimeoutMs) this.engine.alone();
        },
      });
      loadSnapshot(this.engine, cfg.snapshotFile, cfg.logger, cfg.clock.now());
      const joinSince = cfg.clock.now();
      this.aloneSince = undefined;
      this.join = new JoinWatch(cfg.bootstrap.length === 0, cfg.joinTimeoutMs, joinSince);
      this.engine.joinWaitEnds(joinSince + cfg.joinTimeoutMs);
      this.state = 'running';
      if (this.owners !== undefined) this.engine.enableOwnerPlacement?.(true);
      this.armTick();
      this.sweepTimer = setInterval(this.links.onSweep, Math.min(1_000, Math.max(50, cfg.departAfterMs / 4)));
      this.discovery.start();
      this.warnKnobs();
      cfg.logger.info(
        { peerId: this.peerId, topic: this.topic, addrs: this.multiaddrs() },
        'ratemesh mesh node started',
      );
    } catch (err) {
      await this.teardown();
      this.state = 'stopped';
      throw explainStartError(err, cfg.logger);
    }
  }

  stop(): Promise<void> {
    if (this.stopping !== undefined) return this.stopping;
    if (this.state === 'idle' || this.state === 'stopped') return Promise.resolve();
    const after = this.starting ?? Promise.resolve();
    this.stopping = after
      .catch(() => undefined)
      .then(async () => {
        this.state = 'stopping';
        await this.sayFarewell();
        await this.teardown();
        saveSnapshot(this.engine, this.cfg.snapshotFile, this.cfg.logger, this.cfg.clock.now());
        this.state = 'stopped';
        this.cfg.logger.info({ peerId: this.peerId }, 'ratemesh mesh node stopped');
      })
      .finally(() => {
        this.stopping = undefined;
      });
    return this.stopping;
  }

  /**
   * A graceful stop's last message: the engine's farewell (Engine.farewell: it decides no global
   * policy from now on, and the message carries the whole window of every key with own counts),
   * published before the links close, so the peers count this node as departed at once and
   * keep no share of L for it. Bounded: at most FAREWELL_WAIT_MS; a farewell lost leaves the
   * peers to see this node stale, then departed, as after a kill.
   */
  private async sayFarewell(): Promise<void> {
    const node = this.node;
    const farewell = this.engine.farewell;
    if (node === undefined || farewell === undefined || this.isolated) return;
    const pubsub = node.services.pubsub;
    let data: Uint8Array | undefined;
    try {
      data = farewell.call(this.engine, this.cfg.clock.now(), pubsub.getSubscribers(this.topic).length + 1);
    } catch (err) {
      this.cfg.logger.warn({ err: String(err) }, 'ratemesh farewell not built');
      return;
    }
    if (data === undefined) {
      bump(this.counters.dropped, 'farewell-too-large');
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((res) => {
      timer = setTimeout(() => res(false), FAREWELL_WAIT_MS);
    });
    const errors = this.counters.gossip.publishErrors;
    const handed = await Promise.race([this.send(node, data).then(() => true), timeout]);
    clearTimeout(timer);
    // counted: the peers then see this node stale, then departed, as after a kill
    if (!handed) bump(this.counters.dropped, 'farewell-timeout');
    else if (this.counters.gossip.publishErrors > errors) bump(this.counters.dropped, 'farewell-failed');
  }

  /** Releases everything start() took: timers, discovery, sync streams, libp2p. */
  private async teardown(): Promise<void> {
    if (this.tickTimer !== undefined) clearTimeout(this.tickTimer);
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    if (this.earlyImmediate !== undefined) clearImmediate(this.earlyImmediate);
    this.tickTimer = undefined;
    this.sweepTimer = undefined;
    this.earlyImmediate = undefined;
    for (const t of this.timers) clearTimeout(t);
    // messages the injected delay still held are lost with the stop
    const held = this.gossipIn.dropDelayed();
    if (held > 0) this.counters.dropped.stopped = (this.counters.dropped.stopped ?? 0) + held;
    this.timers.clear();
    await this.discovery?.stop();
    const node = this.node;
    if (node !== undefined) {
      const pubsub = node.services.pubsub;
      pubsub.removeEventListener('subscription-change', this.links.onSubscriptionChange);
      node.removeEventListener('peer:disconnect', this.links.onPeerDisconnect);
      pubsub.topicValidators.delete(this.topic);
    }
    // owner placement off: every key decided here again (asks cannot travel)
    this.engine.enableOwnerPlacement?.(false);
    await this.owners?.stop();
    this.owners = undefined;
    await this.sync?.stop();
    await node?.stop();
    this.node = undefined;
    this.links.reset();
  }

  private warnKnobs(): void {
    const { injectDelayMs, injectLoss, injectSeed } = this.cfg;
    if (injectDelayMs > 0 || injectLoss > 0) {
      this.cfg.logger.warn(
        { injectDelayMs, injectLoss, injectSeed, peerId: this.peerId },
        '!!! ratemesh EXPERIMENT KNOBS ON: received gossip is artificially delayed and/or dropped; never use in production !!!',
      );
    }
    if (this.cfg.insecure) {
      this.cfg.logger.warn(
        { listen: this.cfg.listen, bootstrap: this.cfg.bootstrap.map((b) => b.text), peerId: this.peerId },
        'INSECURE: no psk on a non-loopback address (insecure: true): anyone who reaches this port can join the mesh and gossip counts; give every member a psk (ratemesh psk)',
      );
    }
  }

  // ---- gossip out ----

  /**
   * The next tick: one interval on (each node on its own phase: spread rounds), the fast one
   * while the engine asks for it (a tight key: Engine.wantsFastGossip).
   */
  private armTick(): void {
    const now = this.cfg.clock.now();
    const f = now < this.fastHeldUntil ? 0 : this.fastInterval();
    const fast = f > 0 && this.engine.wantsFastGossip();
    this.setTick(now, fast ? f : this.cfg.gossipIntervalMs, fast);
  }

  /** The tick timer, `ms` from `now`, at the fast interval or not (what onTick reads back). */
  private setTick(now: number, ms: number, fast: boolean): void {
    this.tickFast = fast;
    this.tickMs = ms;
    this.tickAt = now + ms;
    this.tickTimer = setTimeout(this.onTick, ms);
  }

  /** The tick interval while a key is tight, now (0: off): MeshOptions.fastGossipIntervalMs. */
  private fastInterval(): number {
    const f = this.cfg.fastGossipIntervalMs;
    if (f !== 'auto') return f;
    if (this.relayFanout() > 0) return 0;
    return fastGossipIntervalMs(
      this.engine.memberCount(),
      this.cfg.gossipIntervalMs,
      this.cfg.expectedDelayMs,
    );
  }

  /** A key turned tight with the next tick further off than the fast interval: tick sooner. */
  private hurryTick(): void {
    if (this.tickTimer === undefined || !this.engine.wantsFastGossip()) return;
    const now = this.cfg.clock.now();
    if (now < this.fastHeldUntil) return;
    const f = this.fastInterval();
    if (f === 0 || this.tickAt <= now + f) return;
    clearTimeout(this.tickTimer);
    this.setTick(now, f, true);
  }

  private readonly onTick = (): void => {
    this.tickTimer = undefined;
    if (this.state !== 'running') return;
    if (this.tickFast) {
      this.counters.gossip.fastTicks++;
      // Fast ticks late by half their interval on average (a moving average over about five):
      // this node cannot keep them on time (its CPU is short), so it ticks at gossipIntervalMs for
      // ten of those before it tries again: fast gossip does not take the CPU its requests need.
      const now = this.cfg.clock.now();
      this.fastLate = fastTickLateness(this.fastLate, now - this.tickAt, this.tickMs);
      if (this.fastLate < 0) {
        this.counters.gossip.fastHeld++;
        this.fastLate = 0;
        this.fastHeldUntil = now + FAST_HOLD_INTERVALS * this.cfg.gossipIntervalMs;
      }
    }
    // the start gate: with no member heard, the join rule ends the wait (the first pod; its timeout)
    this.joined();
    this.armTick();
    this.counters.gossip.ticks++;
    if (this.cfg.relayAuto) this.followMembership();
    this.publish();
    if (this.state === 'running' && this.engine.lateSyncDue(this.cfg.clock.now())) this.links.resyncAll();
    this.warmOwnerLinks();
  };

  /**
   * While any policy's keys are placed on owners, keep a link open to every live member (the
   * owner of some key), so a key's first ask goes out on an open stream (OwnerService.warm).
   */
  private warmOwnerLinks(): void {
    const owners = this.owners;
    if (owners === undefined || this.state !== 'running' || this.engine.ownerPlacedAny?.() !== true) return;
    const live: string[] = [];
    for (const p of this.engine.peerViews(this.cfg.clock.now())) if (!p.stale) live.push(p.id);
    owners.warm(live);
  }

  /** Relay mode's fanout now: the transport's (0: broadcast). */
  private relayFanout(): number {
    const node = this.node;
    const direct = node === undefined ? undefined : directGossipOf(node);
    return direct?.relayFanout ?? this.cfg.relayFanout;
  }

  /**
   * `relayFanout: 'auto'`: broadcast or relay as the membership the engine counts says
   * (src/mesh/auto-relay.ts). A switch, and a membership grown while relaying past what the
   * engine's relayHops allows for, first rebuilds the engine with the relayHops of the new mode
   * (engine-slot.ts: whole windows and the longer data delay while relaying; deltas and d when
   * broadcasting), then switches the transport. No state pull: the new engine has what the old
   * one held, and its late sync comes as after a join (an answer now would echo this node's
   * admissions, which it holds already, as counts from before a restart).
   */
  private followMembership(): void {
    const node = this.node;
    const direct = node === undefined ? undefined : directGossipOf(node);
    if (this.state !== 'running' || direct === undefined) return;
    const members = this.engine.memberCount();
    const f = direct.relayFanout;
    const want = autoRelayFanout(members, this.cfg.autoRelayMembers, f > 0);
    const hops =
      want === 0
        ? 0
        : Math.max(1, this.cfg.relayHopsOption ?? relayHopsFor(members, want), this.engine.relayHops);
    if (want === f && hops === this.engine.relayHops) return;
    const now = this.cfg.clock.now();
    const handed = hops === this.engine.relayHops ? 0 : this.engine.rebuild(hops, now);
    direct.setRelayFanout(want);
    this.relaySwitches++;
    this.cfg.logger.info(
      {
        members,
        relayFanout: want,
        relayHops: hops,
        handedOver: handed,
        autoRelayMembers: this.cfg.autoRelayMembers,
      },
      want > 0 ? 'ratemesh relays (relayFanout auto)' : 'ratemesh broadcasts (relayFanout auto)',
    );
  }

  private pollEarlyPublish(): void {
    if (this.state !== 'running') return;
    this.hurryTick();
    if (this.earlyImmediate !== undefined) return;
    if (!this.engine.wantsEarlyPublish()) return;
    this.earlyImmediate = setImmediate(() => {
      this.earlyImmediate = undefined;
      this.counters.gossip.earlyPublishes++;
      this.publish();
    });
  }

  private publish(): void {
    const node = this.node;
    if (this.state !== 'running' || node === undefined) return;
    if (this.isolated) {
      bump(this.counters.dropped, 'isolated-out');
      return;
    }
    if (this.publishesInFlight >= MAX_PUBLISHES_IN_FLIGHT) {
      // The next message carries the same full window, so skipping one loses nothing for good.
      bump(this.counters.dropped, 'publish-backlog');
      return;
    }
    const pubsub = node.services.pubsub;
    // floodPublish hands the message to every connected subscriber: that, plus us, is its reach;
    // a relay's batch goes to relayFanout of them (a broadcasting receiver then forwards it)
    const subscribers = pubsub.getSubscribers(this.topic).length;
    const f = this.relayFanout();
    const reach = f > 0 ? Math.min(f, subscribers) + 1 : subscribers + 1;
    const data = this.engine.buildGossip(this.cfg.clock.now(), reach);
    void this.send(node, data);
  }

  /** Publishes `data` on our topic, counted (messages in flight, sent, errors); never rejects. */
  private send(node: MeshNode, data: Uint8Array): Promise<void> {
    this.publishesInFlight++;
    return node.services.pubsub.publish(this.topic, data).then(
      () => {
        this.publishesInFlight--;
        this.counters.gossip.msgsOut++;
        this.counters.gossip.bytesOut += data.byteLength;
      },
      (err: unknown) => {
        this.publishesInFlight--;
        this.counters.gossip.publishErrors++;
        this.cfg.logger.debug({ err: String(err), state: this.state }, 'ratemesh publish failed');
      },
    );
  }

  /** TESTS/DRILLS ONLY: see {@link isolateForTests}. */
  setIsolated(on: boolean): void {
    if (this.isolated === on) return;
    this.isolated = on;
    this.cfg.logger.warn(
      { peerId: this.peerId, isolated: on },
      on
        ? '!!! ratemesh TEST KNOB: gossip isolation ON (all gossip in and out dropped) !!!'
        : 'ratemesh TEST KNOB: gossip isolation OFF',
    );
  }

  // ---- introspection ----

  multiaddrs(): string[] {
    return this.node?.getMultiaddrs().map((a) => a.toString()) ?? [];
  }

  peers(): PeerView[] {
    const addrs = new Map<string, string[]>();
    for (const c of this.node?.getConnections() ?? []) {
      const id = c.remotePeer.toString();
      const list = addrs.get(id) ?? [];
      list.push(c.remoteAddr.toString());
      addrs.set(id, list);
    }
    const views = this.engine.peerViews(this.cfg.clock.now());
    for (const p of views) p.addrs = addrs.get(p.id) ?? [];
    return views;
  }

  stats(): MeshStats {
    const c = this.counters;
    const now = this.cfg.clock.now();
    const engine = this.engine.stats(now);
    const direct = this.node === undefined ? undefined : directGossipOf(this.node);
    return {
      peerId: this.peerId,
      topic: this.topic,
      running: this.state === 'running',
      peers: {
        connected: this.node?.getPeers().length ?? 0,
        members: engine.livePeers + engine.stalePeers,
        departed: engine.peersDeparted,
      },
      gossip: { ...c.gossip, dropped: { ...c.gossip.dropped } },
      dropped: { ...c.dropped },
      injected: { ...c.injected },
      sync:
        this.sync === undefined
          ? emptySync()
          : { ...this.sync.stats, failures: { ...this.sync.stats.failures } },
      versionMismatch: Object.fromEntries(
        this.engine.versionMismatches(now).map((m) => [m.policy, { ours: m.ours, peers: m.peers }]),
      ),
      otherTopics: { events: c.otherTopics.events, peers: { ...c.otherTopics.peers } },
      discovery:
        this.discovery === undefined
          ? emptyDiscoveryStats()
          : { ...this.discovery.stats, dialFailures: { ...this.discovery.stats.dialFailures } },
      ...(this.owners === undefined
        ? {}
        : {
            owner: {
              ...this.owners.stats,
              failed: { ...this.owners.stats.failed },
              dropped: { ...this.owners.stats.dropped },
              ...(this.engine.ownerStats === undefined ? {} : { engine: this.engine.ownerStats() }),
            },
          }),
      engine,
      relay: {
        auto: this.cfg.relayAuto,
        fanout: this.relayFanout(),
        relayHops: this.engine.relayHops,
        switches: this.relaySwitches,
      },
      ...(direct === undefined
        ? {}
        : { transport: { ...direct.stats, dropped: { ...direct.stats.dropped } } }),
    };
  }
}

function emptySync(): MeshStats['sync'] {
  return { pulls: 0, pullsOk: 0, pullsFailed: 0, served: 0, bytesIn: 0, bytesOut: 0, failures: {} };
}

/**
 * TESTS/DRILLS ONLY (mesh-test fault drills; not exported from the package):
 * while `on`, the node drops every gossip message it would publish or receive,
 * counted under `stats().dropped['isolated-out' | 'isolated-in']`; connections
 * stay up, so healing needs no redial. A network cut without root privileges.
 */
export function isolateForTests(limiter: MeshLimiter, on: boolean): void {
  if (!(limiter instanceof MeshLimiterImpl))
    throw new TypeError('not a mesh limiter made by createMeshLimiter');
  limiter.setIsolated(on);
}

/**
 * Creates one mesh node (not yet started). Every option is validated here;
 * errors are RateMeshError CONFIG_INVALID naming the field. `check` works at
 * once and never touches the network; `start()` joins the mesh.
 */
export function createMeshLimiter(opts: MeshLimiterOptions): EmbeddedMeshLimiter {
  return new MeshLimiterImpl(parseOptions(opts));
}
