import './polyfill.js';
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import type { Message, SubscriptionChangeData, TopicValidatorFn } from '@libp2p/gossipsub';
import { TopicValidatorResult } from '@libp2p/gossipsub';
import type { PeerId } from '@libp2p/interface';
import type { PeerView } from '../decision/peers.js';
import type { PolicyReplacement } from '../decision/types.js';
import type { PolicySet } from '../policy/index.js';
import type { Decision, KeyOutcome, Policy, PolicyKey, PolicySpec } from '../types.js';
import {
  MAX_PUBLISHES_IN_FLIGHT,
  MAX_SNAPSHOT_BYTES,
  RPC_FRAME_MESSAGES,
  SYNC_ATTEMPTS,
  SYNC_MAX_INBOUND_STREAMS,
  SYNC_RETRY_MS,
  TOPIC,
  TOPIC_PREFIX,
} from './constants.js';
import { defaultEngineFactory } from './default-engine.js';
import { Discovery, systemResolver } from './discovery.js';
import type { EngineFactory, MeshEngine } from './engine-port.js';
import { peerIdOf } from './identity.js';
import { createMeshNode, type MeshNode } from './node.js';
import { type MeshConfig, parseOptions } from './options.js';
import { SyncService } from './sync.js';
import type { MeshLimiter, MeshLimiterOptions, MeshStats } from './types.js';
import { warmUp } from './warm.js';

/**
 * The sync bookkeeping of one peer on our topic or heard in our gossip. Membership itself is
 * the engine's (its peer table and depart rule): this is only what the transport needs to pull
 * a peer's state once per connection.
 */
interface SyncState {
  peerId: PeerId | undefined;
  synced: boolean;
  syncing: boolean;
  attempts: number;
}

type State = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

/** xorshift32: the injected-loss draw, seeded so experiment runs repeat. */
function xorshift32(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x1_0000_0000;
  };
}

function bump(counts: Record<string, number>, reason: string): void {
  counts[reason] = (counts[reason] ?? 0) + 1;
}

class MeshLimiterImpl implements MeshLimiter {
  readonly peerId: string;
  readonly topic: string;
  private readonly engine: MeshEngine;
  private readonly factory: EngineFactory;
  private readonly rng: () => number;
  private state: State = 'idle';
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private node: MeshNode | undefined;
  private sync: SyncService | undefined;
  private discovery: Discovery | undefined;
  private tickTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private earlyImmediate: NodeJS.Immediate | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  private publishesInFlight = 0;
  /** TESTS/DRILLS ONLY (mesh-test): drop all gossip in and out; see {@link isolateForTests}. */
  private isolated = false;
  private readonly syncStates = new Map<string, SyncState>();
  private readonly warnedVersions = new Set<string>();
  private readonly counters: Omit<
    MeshStats,
    'peerId' | 'topic' | 'running' | 'peers' | 'sync' | 'discovery' | 'engine' | 'versionMismatch'
  >;

  constructor(private readonly cfg: MeshConfig) {
    this.peerId = peerIdOf(cfg.privateKey);
    this.factory = cfg.engineFactory ?? defaultEngineFactory;
    this.engine = this.factory({
      policies: cfg.policies,
      nodeId: this.peerId,
      clock: cfg.clock,
      gossipIntervalMs: cfg.gossipIntervalMs,
      expectedDelayMs: cfg.expectedDelayMs,
      departAfterMs: cfg.departAfterMs,
      expectedMembers: 1 + cfg.bootstrap.length,
      logger: cfg.logger,
    });
    this.topic = TOPIC;
    this.rng = xorshift32(cfg.injectSeed);
    this.counters = {
      gossip: {
        ticks: 0,
        earlyPublishes: 0,
        msgsOut: 0,
        bytesOut: 0,
        publishErrors: 0,
        msgsIn: 0,
        bytesIn: 0,
        dropped: {},
        relayed: 0,
        notRelayed: 0,
      },
      dropped: {},
      injected: { delayMs: cfg.injectDelayMs, loss: cfg.injectLoss, delayed: 0, dropped: 0 },
      otherTopics: { events: 0, peers: {} },
    };
  }

  // ---- RateLimiter: synchronous, no network ----

  check(policy: string, keys: string | readonly string[], cost?: number): Decision {
    const d = this.engine.check(policy, keys, cost);
    this.pollEarlyPublish();
    return d;
  }

  checkAll(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): Decision & { outcomes: KeyOutcome[] } {
    const d = this.engine.checkAll(pairs, cost);
    this.pollEarlyPublish();
    return d;
  }

  policy(name: string): Policy | undefined {
    return this.engine.policy(name);
  }

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
      });
      this.node = node;
      const pubsub = node.services.pubsub;
      pubsub.addEventListener('subscription-change', this.onSubscriptionChange);
      node.addEventListener('peer:disconnect', this.onPeerDisconnect);
      pubsub.topicValidators.set(this.topic, this.validate);
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
      await node.start();
      pubsub.subscribe(this.topic);
      this.discovery = new Discovery(node, {
        entries: cfg.bootstrap,
        intervalMs: cfg.discoveryIntervalMs,
        dialTimeoutMs: cfg.dialTimeoutMs,
        resolve: systemResolver,
        logger: cfg.logger,
      });
      this.loadSnapshot();
      this.state = 'running';
      this.tickTimer = setInterval(this.onTick, cfg.gossipIntervalMs);
      this.sweepTimer = setInterval(this.onSweep, Math.min(1_000, Math.max(50, cfg.departAfterMs / 4)));
      this.discovery.start();
      this.warnKnobs();
      cfg.logger.info(
        { peerId: this.peerId, topic: this.topic, addrs: this.multiaddrs() },
        'ratemesh mesh node started',
      );
    } catch (err) {
      await this.teardown();
      this.state = 'stopped';
      throw err;
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
        await this.teardown();
        this.saveSnapshot();
        this.state = 'stopped';
        this.cfg.logger.info({ peerId: this.peerId }, 'ratemesh mesh node stopped');
      })
      .finally(() => {
        this.stopping = undefined;
      });
    return this.stopping;
  }

  /**
   * `snapshotFile`: what this node admitted, restored at start when still in the window (a
   * lone node's restart does not reopen its limits). A missing file is a first start; a bad
   * one is logged and ignored (it can only have under-counted, never opened a limit wider
   * than a restart without it).
   */
  private loadSnapshot(): void {
    const file = this.cfg.snapshotFile;
    if (file === undefined || !existsSync(file)) return;
    try {
      if (statSync(file).size > MAX_SNAPSHOT_BYTES)
        throw new Error(`larger than ${MAX_SNAPSHOT_BYTES} bytes`);
      const r = this.engine.restoreSnapshot(new Uint8Array(readFileSync(file)));
      if (r.ok)
        this.cfg.logger.info(
          { file, entries: r.restored },
          'ratemesh restored its windows from the snapshot',
        );
      else this.cfg.logger.warn({ file, reason: r.reason }, 'ratemesh snapshot not restored');
    } catch (err) {
      this.cfg.logger.warn({ file, err: String(err) }, 'ratemesh snapshot not readable');
    }
  }

  /** Writes the snapshot (to a temporary file, then renamed over the old one). */
  private saveSnapshot(): void {
    const file = this.cfg.snapshotFile;
    if (file === undefined) return;
    try {
      const tmp = `${file}.${process.pid}.tmp`;
      writeFileSync(tmp, this.engine.snapshot(), { mode: 0o600 });
      renameSync(tmp, file);
      this.cfg.logger.info({ file }, 'ratemesh wrote its windows to the snapshot');
    } catch (err) {
      this.cfg.logger.warn({ file, err: String(err) }, 'ratemesh could not write the snapshot');
    }
  }

  /** Releases everything start() took: timers, discovery, sync streams, libp2p. */
  private async teardown(): Promise<void> {
    if (this.tickTimer !== undefined) clearInterval(this.tickTimer);
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    if (this.earlyImmediate !== undefined) clearImmediate(this.earlyImmediate);
    this.tickTimer = undefined;
    this.sweepTimer = undefined;
    this.earlyImmediate = undefined;
    for (const t of this.timers) clearTimeout(t);
    if (this.timers.size > 0)
      this.counters.dropped.stopped = (this.counters.dropped.stopped ?? 0) + this.timers.size;
    this.timers.clear();
    await this.discovery?.stop();
    const node = this.node;
    if (node !== undefined) {
      const pubsub = node.services.pubsub;
      pubsub.removeEventListener('subscription-change', this.onSubscriptionChange);
      node.removeEventListener('peer:disconnect', this.onPeerDisconnect);
      pubsub.topicValidators.delete(this.topic);
    }
    await this.sync?.stop();
    await node?.stop();
    this.node = undefined;
    for (const m of this.syncStates.values()) {
      m.synced = false;
      m.syncing = false;
      m.attempts = 0;
    }
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

  private readonly onTick = (): void => {
    this.counters.gossip.ticks++;
    this.publish();
  };

  private pollEarlyPublish(): void {
    if (this.state !== 'running' || this.earlyImmediate !== undefined) return;
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
    // floodPublish hands the message to every connected subscriber: that, plus us, is its reach
    const data = this.engine.buildGossip(this.cfg.clock.now(), pubsub.getSubscribers(this.topic).length + 1);
    this.publishesInFlight++;
    pubsub.publish(this.topic, data).then(
      () => {
        this.publishesInFlight--;
        this.counters.gossip.msgsOut++;
        this.counters.gossip.bytesOut += data.byteLength;
      },
      (err: unknown) => {
        this.publishesInFlight--;
        this.counters.gossip.publishErrors++;
        if (this.state === 'running') this.cfg.logger.debug({ err: String(err) }, 'ratemesh publish failed');
      },
    );
  }

  // ---- gossip in ----

  /**
   * Every message on our topic that passed gossipsub's signature check comes
   * here exactly once (gossipsub drops duplicates before). It goes to the
   * engine, and the answer tells gossipsub whether to relay it: Reject for a
   * message that is unsigned, oversized or whose header does not parse (never
   * relayed), Accept to relay it to our mesh peers, Ignore not to.
   */
  private readonly validate: TopicValidatorFn = (_peer, msg) => {
    if (msg.type !== 'signed') {
      bump(this.counters.dropped, 'unsigned');
      return TopicValidatorResult.Reject;
    }
    if (msg.data.byteLength > this.cfg.maxMessageBytes) {
      bump(this.counters.dropped, 'oversize');
      return TopicValidatorResult.Reject;
    }
    this.receive(msg);
    return this.relayDecision(msg.data);
  };

  /**
   * Relay or not. The origin published straight to every subscriber it is
   * connected to (floodPublish) and says how many that was (`reach`, itself
   * included). When that is at least the number of members this node knows,
   * everyone here already has the message from the origin and a relay would
   * only make duplicates (in a full mesh of N nodes, relaying multiplies what
   * each node receives by up to D + 1). When the origin reaches fewer, some
   * member is not connected to it and the message is relayed through the mesh.
   */
  private relayDecision(data: Uint8Array): TopicValidatorResult {
    const g = this.counters.gossip;
    if (this.isolated) return TopicValidatorResult.Ignore;
    const mode = this.cfg.relay;
    if (mode !== 'always') {
      const reach = this.engine.gossipReach(data);
      if (reach === 0) return TopicValidatorResult.Reject; // the engine counted why
      if (mode === 'never' || reach >= this.engine.memberCount()) {
        g.notRelayed++;
        return TopicValidatorResult.Ignore;
      }
    }
    g.relayed++;
    return TopicValidatorResult.Accept;
  }

  private receive(msg: Message): void {
    if (msg.topic !== this.topic) {
      bump(this.counters.dropped, 'wrong-topic');
      return;
    }
    if (msg.type !== 'signed') {
      bump(this.counters.dropped, 'unsigned');
      return;
    }
    const from = msg.from.toString();
    if (from === this.peerId) {
      bump(this.counters.dropped, 'self');
      return;
    }
    if (this.isolated) {
      bump(this.counters.dropped, 'isolated-in');
      return;
    }
    const { injectLoss, injectDelayMs } = this.cfg;
    if (injectLoss > 0 && this.rng() < injectLoss) {
      this.counters.injected.dropped++;
      return;
    }
    if (injectDelayMs > 0) {
      this.counters.injected.delayed++;
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.deliver(from, msg.from, msg.data);
      }, injectDelayMs);
      this.timers.add(t);
      return;
    }
    this.deliver(from, msg.from, msg.data);
  }

  private deliver(from: string, peerId: PeerId, data: Uint8Array): void {
    if (this.state !== 'running') {
      bump(this.counters.dropped, 'stopped');
      return;
    }
    if (this.isolated) {
      // held by the injected delay when the cut began: in flight, so lost with the cut
      bump(this.counters.dropped, 'isolated-in');
      return;
    }
    const now = this.cfg.clock.now();
    const g = this.counters.gossip;
    g.msgsIn++;
    g.bytesIn += data.byteLength;
    this.syncState(from, peerId);
    const r = this.engine.receiveGossip(from, data, now);
    if (!r.ok) bump(g.dropped, r.reason ?? 'refused');
  }

  // ---- connections and sync ----

  private syncState(id: string, peerId: PeerId | undefined): SyncState {
    let m = this.syncStates.get(id);
    if (m === undefined) {
      m = { peerId, synced: false, syncing: false, attempts: 0 };
      this.syncStates.set(id, m);
    } else if (m.peerId === undefined) m.peerId = peerId;
    return m;
  }

  private readonly onSubscriptionChange = (evt: CustomEvent<SubscriptionChangeData>): void => {
    const { peerId, subscriptions } = evt.detail;
    const id = peerId.toString();
    for (const s of subscriptions) {
      if (!s.subscribe) continue;
      if (s.topic === this.topic) {
        this.maybeSync(id, this.syncState(id, peerId));
      } else if (s.topic.startsWith(TOPIC_PREFIX)) {
        const topic = s.topic;
        const vm = this.counters.otherTopics;
        vm.events++;
        vm.peers[id] = topic;
        const key = `${id}/${topic}`;
        if (!this.warnedVersions.has(key)) {
          this.warnedVersions.add(key);
          this.cfg.logger.warn(
            { peer: id, theirTopic: topic, ourTopic: this.topic },
            'ratemesh peer is on another ratemesh topic (another wire format): its gossip is not merged',
          );
        }
      }
    }
  };

  private maybeSync(id: string, m: SyncState): void {
    const sync = this.sync;
    if (this.state !== 'running' || sync === undefined || m.peerId === undefined) return;
    if (m.synced || m.syncing || m.attempts >= SYNC_ATTEMPTS) return;
    m.syncing = true;
    m.attempts++;
    void sync.pull(m.peerId).then((ok) => {
      m.syncing = false;
      if (ok) {
        m.synced = true;
        this.cfg.logger.debug({ peer: id }, 'ratemesh synced from peer');
        return;
      }
      if (this.state !== 'running' || m.attempts >= SYNC_ATTEMPTS) return;
      const t = setTimeout(() => {
        this.timers.delete(t);
        if (this.node?.getConnections(m.peerId).length) this.maybeSync(id, m);
      }, SYNC_RETRY_MS * m.attempts);
      this.timers.add(t);
    });
  }

  private readonly onPeerDisconnect = (evt: CustomEvent<PeerId>): void => {
    const m = this.syncStates.get(evt.detail.toString());
    if (m === undefined) return;
    // A reconnecting peer is pulled again: it may have missed our gossip or we its.
    m.synced = false;
    m.attempts = 0;
  };

  /**
   * Tells the engine which members the transport is connected to (its depart rule uses it:
   * src/decision/peers.ts), and forgets the sync state of peers that are neither connected
   * nor members any more.
   */
  private readonly onSweep = (): void => {
    const node = this.node;
    if (this.state !== 'running' || node === undefined) return;
    const now = this.cfg.clock.now();
    const connected = new Set(node.getPeers().map((p) => p.toString()));
    const members = new Set<string>();
    for (const p of this.engine.peerViews(now)) {
      members.add(p.id);
      this.engine.peerConnection(p.id, connected.has(p.id), now);
    }
    for (const id of this.syncStates.keys()) {
      if (!connected.has(id) && !members.has(id)) this.syncStates.delete(id);
    }
  };

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
      discovery: this.discovery === undefined ? emptyDiscovery() : { ...this.discovery.stats },
      engine,
    };
  }
}

function emptySync(): MeshStats['sync'] {
  return { pulls: 0, pullsOk: 0, pullsFailed: 0, served: 0, bytesIn: 0, bytesOut: 0, failures: {} };
}

function emptyDiscovery(): MeshStats['discovery'] {
  return { dials: 0, dialErrors: 0, dnsErrors: 0, lastResolved: 0 };
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
export function createMeshLimiter(opts: MeshLimiterOptions): MeshLimiter {
  return new MeshLimiterImpl(parseOptions(opts));
}
