import type { Message, TopicValidatorFn, TopicValidatorResult } from '@libp2p/gossipsub';
import type { PeerId } from '@libp2p/interface';
import { Validation } from './constants.js';
import type { MeshEngine } from './engine-port.js';
import type { PeerLinks } from './links.js';
import type { MeshConfig } from './options.js';
import type { MeshStats } from './types.js';

/** Count one more under `reason`. */
export function bump(counts: Record<string, number>, reason: string): void {
  counts[reason] = (counts[reason] ?? 0) + 1;
}

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

/** What {@link GossipIn} needs of the node it serves. */
export interface GossipInHost {
  readonly cfg: MeshConfig;
  readonly engine: MeshEngine;
  readonly links: PeerLinks;
  readonly peerId: string;
  readonly topic: string;
  /** Timers to clear on stop (injected delays). */
  readonly timers: Set<NodeJS.Timeout>;
  /** The node's counters this path fills. */
  readonly counters: Pick<MeshStats, 'gossip' | 'dropped' | 'injected'>;
  running(): boolean;
  /** Relay mode's fanout now (0: broadcast; 'auto' changes it as membership does). */
  relayFanout(): number;
  /** TESTS/DRILLS ONLY: every gossip message in and out is dropped. */
  isolated(): boolean;
}

/** A message held by the injected delay. */
interface DelayedMessage {
  due: number;
  from: string;
  peerId: PeerId;
  data: Uint8Array;
  relayed: boolean;
}

/**
 * The path of a received gossip message through the transport: gossipsub's topic validator,
 * the relay decision, what is not for us (self, wrong topic, isolation, experiments' injected
 * loss and delay) dropped and counted, the rest handed to the engine with the authenticated
 * sender. The mesh decodes nothing: the engine reads the bytes, and the relay decision's one
 * header field (`reach`) with them.
 */
export class GossipIn {
  private readonly rng: () => number;
  /** Messages held by the injected delay, in the order they fall due (from `delayedHead`). */
  private readonly delayed: (DelayedMessage | undefined)[] = [];
  private delayedHead = 0;
  private delayTimer: NodeJS.Timeout | undefined;

  constructor(private readonly host: GossipInHost) {
    this.rng = xorshift32(host.cfg.injectSeed);
  }

  /**
   * Every message on our topic that passed gossipsub's signature check comes
   * here exactly once (gossipsub drops duplicates before). It goes to the
   * engine, and the answer tells gossipsub whether to relay it: Reject for a
   * message that is unsigned, oversized or whose header does not parse (never
   * relayed), Accept to relay it to our mesh peers, Ignore not to.
   */
  readonly validate: TopicValidatorFn = (peer, msg) => {
    if (msg.type !== 'signed') {
      bump(this.host.counters.dropped, 'unsigned');
      return Validation.Reject;
    }
    if (msg.data.byteLength > this.host.cfg.maxMessageBytes) {
      bump(this.host.counters.dropped, 'oversize');
      return Validation.Reject;
    }
    // the members known as it came: a farewell merged takes its origin out of the count, and the
    // one member that origin does not reach must still hear it
    const members = this.host.engine.memberCount();
    // relay mode relays what we merged, never what the engine refused (an ignored peer's, a
    // duplicate, a message that does not decode)
    if (!this.receive(msg, peer) && this.host.relayFanout() > 0) return Validation.Ignore;
    return this.relayDecision(msg.data, members);
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
  private relayDecision(data: Uint8Array, members: number): TopicValidatorResult {
    const g = this.host.counters.gossip;
    if (this.host.isolated()) return Validation.Ignore;
    const mode = this.host.cfg.relay;
    if (this.host.relayFanout() > 0) {
      // relay mode (direct transport): every message we merge goes into our next batch
      if (this.host.engine.gossipReach(data) === 0) return Validation.Reject;
    } else if (mode !== 'always') {
      const reach = this.host.engine.gossipReach(data);
      if (reach === 0) return Validation.Reject; // the engine counted why
      if (mode === 'never' || reach >= members) {
        g.notRelayed++;
        return Validation.Ignore;
      }
    }
    g.relayed++;
    return Validation.Accept;
  }

  /** `via`: the peer that handed us the message; not its origin when relayed. */
  /** False when the message was refused (dropped here, or by the engine at once). */
  private receive(msg: Message, via: PeerId): boolean {
    if (msg.topic !== this.host.topic) {
      bump(this.host.counters.dropped, 'wrong-topic');
      return false;
    }
    if (msg.type !== 'signed') {
      bump(this.host.counters.dropped, 'unsigned');
      return false;
    }
    const from = msg.from.toString();
    if (from === this.host.peerId) {
      bump(this.host.counters.dropped, 'self');
      return false;
    }
    if (this.host.isolated()) {
      bump(this.host.counters.dropped, 'isolated-in');
      return false;
    }
    // a copy that came through another node: the engine takes no clock-offset sample from it
    const relayed = !via.equals(msg.from);
    const { injectLoss, injectDelayMs } = this.host.cfg;
    if (injectLoss > 0 && this.rng() < injectLoss) {
      this.host.counters.injected.dropped++;
      return false;
    }
    if (injectDelayMs > 0) {
      this.host.counters.injected.delayed++;
      // one delay for all: messages fall due in the order they came, so one timer serves the queue
      this.delayed.push({
        due: performance.now() + injectDelayMs,
        from,
        peerId: msg.from,
        data: msg.data,
        relayed,
      });
      if (this.delayTimer === undefined) this.armDelay();
      return true;
    }
    return this.deliver(from, msg.from, msg.data, relayed);
  }

  /** Forgets the messages the injected delay keeps (the node stops); how many there were. */
  dropDelayed(): number {
    const n = this.delayed.length - this.delayedHead;
    this.delayed.length = 0;
    this.delayedHead = 0;
    if (this.delayTimer !== undefined) clearTimeout(this.delayTimer);
    this.delayTimer = undefined;
    return n;
  }

  private armDelay(): void {
    const head = this.delayed[this.delayedHead];
    if (head === undefined) return;
    const t = setTimeout(
      () => {
        this.host.timers.delete(t);
        this.delayTimer = undefined;
        const now = performance.now();
        for (let m = this.delayed[this.delayedHead]; m !== undefined && m.due <= now + 0.5; ) {
          this.delayed[this.delayedHead++] = undefined; // delivered: not held by the queue
          this.deliver(m.from, m.peerId, m.data, m.relayed);
          m = this.delayed[this.delayedHead];
        }
        if (this.delayedHead === this.delayed.length) {
          this.delayed.length = 0;
          this.delayedHead = 0;
        } else if (this.delayedHead > 1024) {
          this.delayed.splice(0, this.delayedHead);
          this.delayedHead = 0;
        }
        if (this.host.running()) this.armDelay();
      },
      Math.max(0, head.due - performance.now()),
    );
    this.delayTimer = t;
    this.host.timers.add(t);
  }

  private deliver(from: string, peerId: PeerId, data: Uint8Array, relayed: boolean): boolean {
    if (!this.host.running()) {
      bump(this.host.counters.dropped, 'stopped');
      return false;
    }
    if (this.host.isolated()) {
      // held by the injected delay when the cut began: in flight, so lost with the cut
      bump(this.host.counters.dropped, 'isolated-in');
      return false;
    }
    const now = this.host.cfg.clock.now();
    const g = this.host.counters.gossip;
    g.msgsIn++;
    g.bytesIn += data.byteLength;
    this.host.links.heard(from, peerId);
    if (relayed) g.relayedIn++;
    const r = this.host.engine.receiveGossip(from, data, now, relayed);
    if (!r.ok) bump(g.dropped, r.reason ?? 'refused');
    return r.ok;
  }
}
