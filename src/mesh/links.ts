import type { SubscriptionChangeData } from '@libp2p/gossipsub';
import type { PeerId } from '@libp2p/interface';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { SYNC_ATTEMPTS, SYNC_RETRY_MS, TOPIC_PREFIX } from './constants.js';
import type { MeshEngine } from './engine-port.js';
import type { MeshNode } from './node.js';
import type { SyncService } from './sync.js';
import type { MeshStats } from './types.js';

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

/** What {@link PeerLinks} needs of the node it serves. */
export interface LinkHost {
  readonly engine: MeshEngine;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly topic: string;
  /** Timers to clear on stop. */
  readonly timers: Set<NodeJS.Timeout>;
  /** Peers seen on other ratemesh topics (a stats table this class fills). */
  readonly otherTopics: MeshStats['otherTopics'];
  /** The libp2p node and the sync service while running; undefined otherwise. */
  running(): { node: MeshNode; sync: SyncService } | undefined;
}

/**
 * The transport's side of the peers: each peer's state pull (once per connection, retried),
 * peers on other ratemesh topics (warned once), and the sweep that reports every member's
 * connection to the engine, whose depart rule uses it (src/decision/peers.ts).
 */
export class PeerLinks {
  private readonly states = new Map<string, SyncState>();
  private readonly warnedTopics = new Set<string>();

  constructor(private readonly host: LinkHost) {}

  /** A peer was heard (gossip): remember how to reach it. */
  heard(id: string, peerId: PeerId | undefined): void {
    this.state(id, peerId);
  }

  /**
   * Pull every connected peer's state again (the engine's late sync: a pod replaced as this
   * node joined is stale at its peers by now, and their answers carry its counts).
   */
  resyncAll(): void {
    const run = this.host.running();
    if (run === undefined) return;
    for (const [id, m] of this.states) {
      if (m.peerId === undefined || m.syncing || run.node.getConnections(m.peerId).length === 0) continue;
      m.synced = false;
      m.attempts = 0;
      this.maybeSync(id, m);
    }
  }

  /** Every sync is to be pulled again (the node stopped). */
  reset(): void {
    for (const m of this.states.values()) {
      m.synced = false;
      m.syncing = false;
      m.attempts = 0;
    }
  }

  private state(id: string, peerId: PeerId | undefined): SyncState {
    let m = this.states.get(id);
    if (m === undefined) {
      m = { peerId, synced: false, syncing: false, attempts: 0 };
      this.states.set(id, m);
    } else if (m.peerId === undefined) m.peerId = peerId;
    return m;
  }

  readonly onSubscriptionChange = (evt: CustomEvent<SubscriptionChangeData>): void => {
    const { peerId, subscriptions } = evt.detail;
    const id = peerId.toString();
    const host = this.host;
    for (const s of subscriptions) {
      if (!s.subscribe) continue;
      if (s.topic === host.topic) {
        this.maybeSync(id, this.state(id, peerId));
      } else if (s.topic.startsWith(TOPIC_PREFIX)) {
        const topic = s.topic;
        const vm = host.otherTopics;
        vm.events++;
        vm.peers[id] = topic;
        const key = `${id}/${topic}`;
        if (!this.warnedTopics.has(key)) {
          this.warnedTopics.add(key);
          host.logger.warn(
            { peer: id, theirTopic: topic, ourTopic: host.topic },
            'ratemesh peer is on another ratemesh topic (another wire format): its gossip is not merged',
          );
        }
      }
    }
  };

  private maybeSync(id: string, m: SyncState): void {
    const host = this.host;
    const run = host.running();
    if (run === undefined || m.peerId === undefined) return;
    if (m.synced || m.syncing || m.attempts >= SYNC_ATTEMPTS) return;
    m.syncing = true;
    m.attempts++;
    void run.sync.pull(m.peerId).then((ok) => {
      m.syncing = false;
      if (ok) {
        m.synced = true;
        host.logger.debug({ peer: id }, 'ratemesh synced from peer');
        return;
      }
      if (host.running() === undefined || m.attempts >= SYNC_ATTEMPTS) return;
      const t = setTimeout(() => {
        host.timers.delete(t);
        if (host.running()?.node.getConnections(m.peerId).length) this.maybeSync(id, m);
      }, SYNC_RETRY_MS * m.attempts);
      host.timers.add(t);
    });
  }

  readonly onPeerDisconnect = (evt: CustomEvent<PeerId>): void => {
    const m = this.states.get(evt.detail.toString());
    if (m === undefined) return;
    // A reconnecting peer is pulled again: it may have missed our gossip or we its.
    m.synced = false;
    m.attempts = 0;
  };

  /**
   * Tells the engine which members the transport is connected to, and forgets the sync state
   * of peers that are neither connected nor members any more.
   */
  readonly onSweep = (): void => {
    const host = this.host;
    const run = host.running();
    if (run === undefined) return;
    const now = host.clock.now();
    const connected = new Set(run.node.getPeers().map((p) => p.toString()));
    const members = new Set<string>();
    for (const p of host.engine.peerViews(now)) {
      members.add(p.id);
      host.engine.peerConnection(p.id, connected.has(p.id), now);
    }
    for (const id of this.states.keys()) {
      if (!connected.has(id) && !members.has(id)) this.states.delete(id);
    }
  };
}
