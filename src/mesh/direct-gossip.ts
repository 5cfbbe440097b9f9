import './polyfill.js';
import { publicKeyFromProtobuf, publicKeyToProtobuf } from '@libp2p/crypto/keys';
import type {
  Message,
  PublishResult,
  SubscriptionChangeData,
  TopicValidatorFn,
  TopicValidatorResult,
} from '@libp2p/gossipsub';
import type {
  ComponentLogger,
  Connection,
  Logger,
  PeerId,
  PrivateKey,
  PublicKey,
  Stream,
  Topology,
} from '@libp2p/interface';
import { TypedEventEmitter } from '@libp2p/interface';
import { peerIdFromPublicKey } from '@libp2p/peer-id';
import { Validation } from './constants.js';
import { FrameDecoder, readVarint, varintLength, writeVarint } from './frame-decoder.js';
import { lazyWindowUpdates } from './link-tuning.js';
import { nativeSigner, nativeVerifier, type Signer, type Verifier } from './native-ed25519.js';
import {
  type BatchItem,
  encodeBatch,
  FRAME_BATCH,
  FRAME_BATCH_MAC,
  pickWeighted,
  readBatch,
  readSeq,
  SEQ_BYTES,
  SIG_BYTES,
  writeSeq,
} from './relay-batch.js';
import {
  checkMac,
  DEFAULT_RELAY_MAC_PEERS,
  findMac,
  type MacPeer,
  macDigest,
  macList,
  RelayMacs,
} from './relay-mac.js';
import { SeqWindow } from './seq-window.js';

/**
 * The direct gossip protocol: one long-lived stream from each node to each
 * peer, carrying varint-length-prefixed frames (docs/gossip-transport.md).
 */
export const GOSSIP_PROTOCOL = '/ratemesh/gossip/1.0.0';

const FRAME_HELLO = 1;
/** The sender's own message, unsigned: the link authenticates it. */
const FRAME_OWN = 2;
/** Another origin's message with that origin's key and signature. */
const FRAME_RELAYED = 3;
/** The sender's own message with its signature (sent while some peer relays its messages). */
const FRAME_OWN_SIGNED = 4;
/** "Sign your messages for the next ttl ms: I relay them." */
const FRAME_WANT_SIGNATURES = 5;
/** "I read these frame kinds": a bitmask (FEATURE_*). Sent after each hello; older nodes drop it as unknown. */
const FRAME_FEATURES = 8;
/** Reads relay batches with MAC lists (kind 7). */
const FEATURE_BATCH_MAC = 1;
/**
 * Relays now (relay mode): its own messages reach a few peers only, and it forwards what it
 * merges in batches. A broadcasting peer then signs its own messages, so that this one can forward them.
 */
const FEATURE_RELAY = 2;
/** Broadcast mode: peers a batch of relayed items (learned from relay batches) goes to each tick. */
export const FORWARD_FANOUT = 4;

/** Largest relayMacPeers. */
export const MAX_RELAY_MAC_PEERS = 1_024;
/** MAC keys made a second at most (each an X25519 and a point conversion, ~0.4 ms). */
const MAC_KEYS_PER_S = 64;
/** Bad signatures in one batch after which the rest is read only where a MAC proves it. */
const MAX_BAD_SIGNATURES_PER_BATCH = 4;
/** An origin not heard this long is forgotten (its sequence window; its place in our MAC list), ms. */
const ORIGIN_IDLE_MS = 60_000;
/** How long a signature request holds, ms; a relaying peer renews it every third of that. */
const SIGN_TTL_MS = 10_000;
const NO_SIGNATURE = new Uint8Array(0);
/** Most links a peer may say it has (features frame). */
const MAX_ADVERTISED_LINKS = 1 << 20;
/** How often at most we tell our links how many links we have, ms (relay mode; when it changed). */
const LINKS_ADVERT_MS = 1_000;
const NO_KEY = new Uint8Array(0);
/** Most items read from one relay batch (origins a node can hold, the wire's limit). */
const MAX_BATCH_ITEMS = 4_096;
/** Largest relay fanout. */
export const MAX_RELAY_FANOUT = 16;
/** Signatures cover this prefix first, so no other libp2p signature (noise, gossipsub, records) can pass for one. */
const SIG_DOMAIN = new TextEncoder().encode('ratemesh-gossip/1:');
const REOPEN_MS = 500;
/** Consecutive failed (or short-lived) outbound streams to one peer before we stop reopening until it reconnects. */
const REOPEN_ATTEMPTS = 5;
/** A stream that lived this long counts as healthy: the next reopen starts a fresh count. */
const HEALTHY_STREAM_MS = 10_000;

/** The part of gossipsub the mesh drives; both gossipsub and {@link DirectGossip} provide it. */
export interface MeshPubSub {
  readonly topicValidators: Map<string, TopicValidatorFn>;
  subscribe(topic: string): void;
  getSubscribers(topic: string): PeerId[];
  publish(topic: string, data: Uint8Array): Promise<PublishResult>;
  addEventListener(
    type: 'subscription-change',
    listener: (evt: CustomEvent<SubscriptionChangeData>) => void,
  ): void;
  removeEventListener(
    type: 'subscription-change',
    listener: (evt: CustomEvent<SubscriptionChangeData>) => void,
  ): void;
}

/** What {@link DirectGossip} needs of the registrar (libp2p's internal interface, narrowed). */
interface RegistrarLike {
  handle(
    protocol: string,
    handler: (stream: Stream, connection: Connection) => void | Promise<void>,
    options?: { maxInboundStreams?: number; maxOutboundStreams?: number; force?: boolean },
  ): Promise<void>;
  unhandle(protocol: string): Promise<void>;
  register(protocol: string, topology: Topology): Promise<string>;
  unregister(id: string): void;
}

interface ConnectionManagerLike {
  getConnections(peerId?: PeerId): Connection[];
}

/** The libp2p components {@link DirectGossip} is built from. */
export interface DirectGossipComponents {
  peerId: PeerId;
  privateKey: PrivateKey;
  registrar: RegistrarLike;
  connectionManager: ConnectionManagerLike;
  logger: ComponentLogger;
}

/** The gossipsub instance kept beside the direct streams: for peers without them, and its subscription events. */
export type FallbackPubSub = MeshPubSub & {
  getSubscribers(topic: string): PeerId[];
};

export interface DirectGossipInit {
  /** Largest frame read from a peer, bytes; a larger one closes that stream. */
  maxFrameBytes: number;
  /** Bytes queued on one peer's stream past which frames to it are dropped (the next message carries the same window). */
  maxQueuedBytes?: number;
  /** Origins whose recent sequence numbers are remembered (against relayed copies); idle ones go first. */
  maxOrigins?: number;
  /** Gossipsub, for peers that do not speak the direct protocol (older nodes) and for its subscription events. */
  fallback?: FallbackPubSub;
  /**
   * Relay mode (0 or absent: broadcast). Each publish sends ONE batch frame to
   * this many random peers with a direct stream (a new draw each time): our own
   * message, signed, and the newest message of every origin learned since the
   * last publish, each with its origin's signature (src/mesh/relay-batch.ts).
   */
  relayFanout?: number;
  /**
   * The fanout may change at run time ({@link DirectGossip.setRelayFanout}, `relayFanout:
   * 'auto'`): MAC keys are then made ready from the start.
   */
  relaySwitchable?: boolean;
  /**
   * Relay mode: most members whose MAC our own item carries (src/mesh/relay-mac.ts):
   * each checks an 8-byte MAC instead of our signature. Default
   * {@link DEFAULT_RELAY_MAC_PEERS}; 0: our items carry none (other origins' lists are still forwarded).
   */
  relayMacPeers?: number;
  /** Random draws (tests); default Math.random. */
  random?: () => number;
}

/** Counters; read by benchmarks and tests. */
export interface DirectGossipStats {
  framesOut: number;
  framesIn: number;
  relayedOut: number;
  relayedIn: number;
  /** Own messages sent signed (some peer asked: it relays them). */
  signedOut: number;
  /** Signature requests sent to origins whose messages we had to relay. */
  signatureRequests: number;
  fallbackPublishes: number;
  /** Relay mode: batch frames sent (one per target per publish) and read. */
  batchesOut: number;
  batchesIn: number;
  /** Relay mode: items read from batches, and those new (newer than any held for their origin). */
  itemsIn: number;
  itemsNew: number;
  /** Relay mode: origin signatures checked (items new and not from the link's own peer, with no MAC for us). */
  verified: number;
  /** Relay mode: origin MACs checked instead of a signature. */
  macVerified: number;
  /** Relay mode: MACs put in our own items (one per member per publish). */
  macsOut: number;
  /** Relay mode: items sent in batches (own included), and items left for the next batch (frame cap). */
  itemsOut: number;
  itemsDeferred: number;
  dropped: Record<string, number>;
}

interface OutLink {
  peerId: PeerId;
  stream: Stream | undefined;
  opening: boolean;
  failures: number;
  timer: NodeJS.Timeout | undefined;
}

interface InLink {
  peerId: PeerId;
  id: string;
  key: PublicKey | undefined;
  keyBytes: Uint8Array | undefined;
  topics: string[];
  decoder: FrameDecoder;
}

interface Origin {
  keyBytes: Uint8Array;
  peerId: PeerId;
  id: string;
  key: PublicKey;
  verifier: Verifier | undefined;
}

/** A member our own items carry a MAC for. */
interface MacMember extends MacPeer {
  /** When last heard (performance.now()). */
  last: number;
}

/** features 8: bits, then (relay mode) how many direct links the sender has, when known. */
function featuresFrame(links: number, relaying: boolean): Uint8Array {
  const bits = FEATURE_BATCH_MAC | (relaying ? FEATURE_RELAY : 0);
  const body = 1 + varintLength(bits) + (links > 0 ? varintLength(links) : 0);
  const frame = new Uint8Array(varintLength(body) + body);
  let off = writeVarint(frame, 0, body);
  frame[off++] = FRAME_FEATURES;
  off = writeVarint(frame, off, bits);
  if (links > 0) writeVarint(frame, off, links);
  return frame;
}

/** FNV-1a over the bytes. */
function hashBytes(b: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < b.byteLength; i++) h = Math.imul(h ^ b[i]!, 0x01000193);
  return h >>> 0;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function toBytes(data: Uint8Array | { subarray(): Uint8Array }): Uint8Array {
  return data instanceof Uint8Array ? data : data.subarray();
}

/** What a gossip signature covers: domain, topic, sequence number, data. */
function signedBytes(topic: Uint8Array, seq: Uint8Array, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(
    SIG_DOMAIN.byteLength + varintLength(topic.byteLength) + topic.byteLength + SEQ_BYTES + data.byteLength,
  );
  out.set(SIG_DOMAIN, 0);
  let off = writeVarint(out, SIG_DOMAIN.byteLength, topic.byteLength);
  out.set(topic, off);
  off += topic.byteLength;
  out.set(seq, off);
  out.set(data, off + SEQ_BYTES);
  return out;
}

/**
 * Gossip over direct libp2p streams: each node keeps one outbound stream to
 * every connected peer that speaks {@link GOSSIP_PROTOCOL} and writes each
 * message there as one frame. The receiver credits a frame to the peer at the
 * other end of the connection, which noise (and pnet, with a psk) has already
 * authenticated: no signature is made or checked per message.
 *
 * Relays (relay: 'auto' in a partial mesh) need proof of origin. A node whose
 * validator asks to relay a message that came unsigned asks its origin for
 * signatures (one small frame, renewed while it keeps relaying); the origin
 * then signs what it sends (node:crypto Ed25519, key object reused) and the
 * relay forwards message, origin key and signature; the receiver of a relayed
 * frame verifies the signature before crediting the origin. In a full mesh
 * nothing is relayed, so nothing is signed.
 *
 * Messages reach the topic validator as gossipsub `SignedMessage`s whose
 * `from` is the authenticated origin: the connection's peer for its own
 * frames (`signature` then empty or unchecked: the link proved it), the
 * verified signer for relayed ones.
 *
 * Gossipsub, when given as `fallback`, keeps running beside it: its
 * subscription events drive membership as before, and a publish also goes
 * through gossipsub while some subscriber of the topic has no direct stream
 * (an older node during a rolling upgrade, or a stream still opening).
 * Unicast (`sendTo`) is there for protocols that address one peer.
 */
export class DirectGossip
  extends TypedEventEmitter<{ 'subscription-change': CustomEvent<SubscriptionChangeData> }>
  implements MeshPubSub
{
  readonly topicValidators: Map<string, TopicValidatorFn>;
  readonly stats: DirectGossipStats = {
    framesOut: 0,
    framesIn: 0,
    relayedOut: 0,
    relayedIn: 0,
    signedOut: 0,
    signatureRequests: 0,
    fallbackPublishes: 0,
    batchesOut: 0,
    batchesIn: 0,
    itemsIn: 0,
    itemsNew: 0,
    verified: 0,
    macVerified: 0,
    macsOut: 0,
    itemsOut: 0,
    itemsDeferred: 0,
    dropped: {},
  };
  private readonly log: Logger;
  private readonly selfId: string;
  private readonly signer: Signer | undefined;
  private readonly out = new Map<string, OutLink>();
  private readonly inbound = new Set<Stream>();
  /** Origins by a hash of their key bytes (a collision costs a rebuild, never a wrong origin). */
  private readonly origins = new Map<number, Origin>();
  /** Recent sequence numbers by origin id (duplicates: the direct copy and relayed ones). */
  private readonly windows = new Map<string, SeqWindow>();
  private readonly topics: string[] = [];
  private readonly topicBytes = new Map<string, Uint8Array>();
  private readonly maxQueued: number;
  private readonly maxOrigins: number;
  private readonly fallback: FallbackPubSub | undefined;
  private topologyId: string | undefined;
  private running = false;
  private seq: number;
  /** Until when our own messages go out signed (a peer relays them). */
  private signUntil = 0;
  /** When we last asked each origin (by id) for signatures. */
  private readonly asked = new Map<string, number>();
  /** Each peer's topics, from the hello on its stream to us. */
  private readonly remoteTopics = new Map<string, string[]>();
  /** Relay mode: fanout (0: broadcast); see {@link setRelayFanout}. */
  private fanout: number;
  /** Peers whose features frame says they relay (FEATURE_RELAY), by id. */
  private readonly relayingPeers = new Set<string>();
  private readonly random: () => number;
  /** Relay mode: per topic, the newest message of each origin (by id) learned since our last batch. */
  private readonly outbox = new Map<string, Map<string, BatchItem>>();
  /** Relay mode: our side of the pairwise MAC keys (Ed25519 identities; undefined with relayMacPeers 0). */
  private readonly macs: RelayMacs | undefined;
  private readonly macPeersWanted: number;
  /** The MAC key shared with each origin by id (null: none can be made). */
  private readonly macPeers = new Map<string, MacPeer | null>();
  private macBuilds = 0;
  private macBuildsFrom = 0;
  /** Members our own items carry a MAC for, by id. */
  private readonly macMembers = new Map<string, MacMember>();
  private macPrunedAt = 0;
  /** Our public key (protobuf): what a MAC of our own item names as its origin. */
  private readonly selfKeyBytes: Uint8Array;
  /** Each peer's FEATURE_* bits, from its features frame. */
  private readonly remoteFeatures = new Map<string, number>();
  /** Each peer's count of direct links, from its features frame (relay mode). */
  private readonly remoteLinks = new Map<string, number>();
  /** Our count of direct links as last told to our peers, and when. */
  private advertisedLinks = 0;
  private advertisedAt = 0;

  constructor(
    private readonly components: DirectGossipComponents,
    private readonly init: DirectGossipInit,
  ) {
    super();
    this.log = components.logger.forComponent('ratemesh:direct-gossip');
    this.selfId = components.peerId.toString();
    this.signer = nativeSigner(components.privateKey);
    this.maxQueued = init.maxQueuedBytes ?? 1024 * 1024;
    this.maxOrigins = init.maxOrigins ?? 4_096;
    this.fallback = init.fallback;
    const f = init.relayFanout ?? 0;
    if (!Number.isInteger(f) || f < 0 || f > MAX_RELAY_FANOUT)
      throw new RangeError(`relayFanout must be an integer in 0..${MAX_RELAY_FANOUT} (got ${f})`);
    this.fanout = f;
    const mp = init.relayMacPeers ?? DEFAULT_RELAY_MAC_PEERS;
    if (!Number.isInteger(mp) || mp < 0 || mp > MAX_RELAY_MAC_PEERS)
      throw new RangeError(`relayMacPeers must be an integer in 0..${MAX_RELAY_MAC_PEERS} (got ${mp})`);
    this.macPeersWanted = f > 0 || init.relaySwitchable === true ? mp : 0;
    this.macs = this.macPeersWanted > 0 ? RelayMacs.of(components.privateKey) : undefined;
    this.selfKeyBytes = publicKeyToProtobuf(components.privateKey.publicKey);
    this.random = init.random ?? Math.random;
    // One validator map for both paths: the mesh sets it once and gossipsub's messages meet the same check.
    this.topicValidators = this.fallback?.topicValidators ?? new Map();
    // Microseconds since the epoch: ids stay unique across restarts of one identity (< 2^53 until year 2255).
    this.seq = Date.now() * 1000;
  }

  readonly [Symbol.toStringTag] = 'ratemesh:direct-gossip';

  /** Relay mode's fanout now (0: broadcast). */
  get relayFanout(): number {
    return this.fanout;
  }

  /** Relay mode: most members our items carry a MAC for (0 while broadcasting). */
  private get relayMacPeers(): number {
    return this.fanout > 0 ? this.macPeersWanted : 0;
  }

  /**
   * Switches between broadcast (0) and relay at fanout `f` (`relayFanout: 'auto'`), and tells
   * every peer (features frame: FEATURE_RELAY). What waits in the outbox goes with the next
   * batch either way (a broadcasting node forwards relayed items in batches too).
   */
  setRelayFanout(f: number): void {
    if (!Number.isInteger(f) || f < 0 || f > MAX_RELAY_FANOUT)
      throw new RangeError(`relayFanout must be an integer in 0..${MAX_RELAY_FANOUT} (got ${f})`);
    if (f === this.fanout) return;
    const was = this.fanout > 0;
    this.fanout = f;
    if (was === f > 0) return;
    const frame = featuresFrame(f > 0 ? this.advertisedLinks : 0, f > 0);
    for (const link of this.out.values()) this.write(link, frame);
  }

  /** Whether some peer said it relays (our own messages then go signed, for it to forward). */
  get peersRelay(): boolean {
    return this.relayingPeers.size > 0;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.fallback?.addEventListener('subscription-change', this.forwardSubscription);
    await this.components.registrar.handle(GOSSIP_PROTOCOL, this.onInbound, {
      maxInboundStreams: 2,
      maxOutboundStreams: 2,
      force: true,
    });
    this.topologyId = await this.components.registrar.register(GOSSIP_PROTOCOL, {
      onConnect: (peerId, conn) => this.connect(peerId, conn),
      onDisconnect: (peerId) => this.disconnect(peerId),
    });
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.fallback?.removeEventListener('subscription-change', this.forwardSubscription);
    if (this.topologyId !== undefined) this.components.registrar.unregister(this.topologyId);
    this.topologyId = undefined;
    await this.components.registrar.unhandle(GOSSIP_PROTOCOL).catch(() => undefined);
    const closing: Promise<void>[] = [];
    for (const link of this.out.values()) {
      if (link.timer !== undefined) clearTimeout(link.timer);
      if (link.stream !== undefined) closing.push(this.closeStream(link.stream));
    }
    for (const s of this.inbound) closing.push(this.closeStream(s));
    this.out.clear();
    this.inbound.clear();
    this.windows.clear();
    this.origins.clear();
    this.asked.clear();
    this.outbox.clear();
    this.macPeers.clear();
    this.macMembers.clear();
    this.remoteFeatures.clear();
    this.remoteLinks.clear();
    this.relayingPeers.clear();
    await Promise.all(closing);
  }

  private async closeStream(s: Stream): Promise<void> {
    try {
      await s.close({ signal: AbortSignal.timeout(1_000) });
    } catch (err) {
      s.abort(err instanceof Error ? err : new Error(String(err)));
    }
  }

  // ---- subscriptions ----

  subscribe(topic: string): void {
    this.fallback?.subscribe(topic);
    if (this.topicBytes.has(topic)) return;
    this.topics.push(topic);
    this.topicBytes.set(topic, new TextEncoder().encode(topic));
    const hello = this.hello();
    for (const link of this.out.values()) this.write(link, hello);
  }

  /** Peers a publish on `topic` reaches now: those with a direct stream and gossipsub's subscribers. */
  getSubscribers(topic: string): PeerId[] {
    const direct = this.directSubscribers(topic);
    const fb = this.fallback?.getSubscribers(topic) ?? [];
    if (fb.length === 0) return direct.map((l) => l.peerId);
    const ids = new Set(direct.map((l) => l.peerId.toString()));
    const all = direct.map((l) => l.peerId);
    for (const p of fb) if (!ids.has(p.toString())) all.push(p);
    return all;
  }

  /** Peers a publish on `topic` reaches over a direct stream (unicast targets). */
  directPeers(topic: string): PeerId[] {
    return this.directSubscribers(topic).map((l) => l.peerId);
  }

  private directSubscribers(topic: string): OutLink[] {
    const out: OutLink[] = [];
    for (const [id, link] of this.out) {
      if (link.stream === undefined) continue;
      if (this.remoteTopics.get(id)?.includes(topic)) out.push(link);
    }
    return out;
  }

  private readonly forwardSubscription = (evt: CustomEvent<SubscriptionChangeData>): void => {
    this.safeDispatchEvent('subscription-change', { detail: evt.detail });
  };

  // ---- sending ----

  private hello(): Uint8Array {
    let body = 1 + varintLength(this.topics.length);
    for (const t of this.topics) {
      const b = this.topicBytes.get(t)!;
      body += varintLength(b.byteLength) + b.byteLength;
    }
    const frame = new Uint8Array(varintLength(body) + body);
    let off = writeVarint(frame, 0, body);
    frame[off++] = FRAME_HELLO;
    off = writeVarint(frame, off, this.topics.length);
    for (const t of this.topics) {
      const b = this.topicBytes.get(t)!;
      off = writeVarint(frame, off, b.byteLength);
      frame.set(b, off);
      off += b.byteLength;
    }
    return frame;
  }

  private write(link: OutLink, frame: Uint8Array): boolean {
    const s = link.stream;
    if (s === undefined || s.status !== 'open') return false;
    if (s.writeBufferLength > this.maxQueued) {
      this.drop('backlog');
      return false;
    }
    try {
      s.send(frame);
      return true;
    } catch (err) {
      this.drop('send-error');
      this.log.trace('send to %p failed: %e', link.peerId, err);
      return false;
    }
  }

  private drop(reason: string): void {
    this.stats.dropped[reason] = (this.stats.dropped[reason] ?? 0) + 1;
  }

  private async sign(bytes: Uint8Array): Promise<Uint8Array> {
    if (this.signer !== undefined) return this.signer.sign(bytes);
    return this.components.privateKey.sign(bytes);
  }

  /**
   * Sends `data` on `topic` to every peer with a direct stream (one frame
   * each), and through gossipsub too while some subscriber has none.
   */
  async publish(topic: string, data: Uint8Array): Promise<PublishResult> {
    const recipients: PeerId[] = [];
    const direct = this.directSubscribers(topic);
    if (this.fanout > 0) {
      recipients.push(...this.publishBatch(topic, data, direct));
    } else {
      const frame = await this.ownFrame(topic, data);
      for (const link of direct) {
        if (this.write(link, frame)) {
          this.stats.framesOut++;
          recipients.push(link.peerId);
        }
      }
      // items relaying peers handed us (their origins reached only a few): on to a few peers
      if ((this.outbox.get(topic)?.size ?? 0) > 0) this.forwardBatch(topic, direct);
    }
    const fb = this.fallback;
    if (fb !== undefined) {
      const ids = new Set(direct.map((l) => l.peerId.toString()));
      const rest = fb.getSubscribers(topic).filter((p) => !ids.has(p.toString()));
      if (rest.length > 0) {
        this.stats.fallbackPublishes++;
        const r = await fb.publish(topic, data);
        recipients.push(...r.recipients);
      }
    }
    return { recipients };
  }

  /**
   * Unicast: `data` on `topic` to one peer over its direct stream. False when
   * there is none (or its queue is full); the receiver credits the frame to
   * this node, as for a publish.
   */
  async sendTo(peer: PeerId | string, topic: string, data: Uint8Array): Promise<boolean> {
    const link = this.out.get(peer.toString());
    if (link === undefined || link.stream === undefined) return false;
    const frame = await this.ownFrame(topic, data);
    const ok = this.write(link, frame);
    if (ok) this.stats.framesOut++;
    return ok;
  }

  /**
   * Relay mode: ONE batch (our message, signed, then the newest message of each
   * origin learned since the last batch) to `relayFanout` random peers among
   * `direct`. Items past the frame cap stay queued for the next batch.
   */
  private publishBatch(topic: string, data: Uint8Array, direct: readonly OutLink[]): PeerId[] {
    const topicIdx = this.topics.indexOf(topic);
    if (topicIdx < 0) throw new Error(`not subscribed to ${topic}`);
    const seq = this.seq++;
    const seqBytes = new Uint8Array(SEQ_BYTES);
    writeSeq(seqBytes, 0, seq);
    const sig = this.signSync(signedBytes(this.topicBytes.get(topic)!, seqBytes, data));
    if (sig === undefined) {
      this.drop('relay-unsigned');
      return [];
    }
    this.stats.signedOut++;
    // A peer with many links is drawn by many senders: drawn in proportion to 1 / its link
    // count, every node reads about relayFanout frames a tick, a hub as many as a leaf.
    const own = direct.length;
    const targets = pickWeighted(
      direct,
      this.fanout,
      (l) => 1 / Math.max(1, this.remoteLinks.get(l.peerId.toString()) ?? own),
      this.random,
    );
    this.adviseLinks(direct, own);
    const withMacs = targets.some((l) => this.readsMacs(l));
    const macs = withMacs ? this.ownMacs(this.topicBytes.get(topic)!, seqBytes, sig, data) : NO_KEY;
    const box = this.outbox.get(topic);
    const items: BatchItem[] = [{ key: NO_KEY, seq, sig, data, macs }];
    if (box !== undefined) for (const it of box.values()) items.push(it);
    const out: PeerId[] = [];
    this.sendBatch(topicIdx, items, box, 1, targets, withMacs, out);
    return out;
  }

  /**
   * Encodes `items` in one batch (with MAC lists when `withMacs`; a plain copy for targets that do
   * not read them), drops from `box` what went out (its items start at `items[skip]`; what did
   * not fit waits, the newest per origin still) and writes it to each target; the targets written
   * to go to `out`.
   */
  private sendBatch(
    topicIdx: number,
    items: BatchItem[],
    box: Map<string, BatchItem> | undefined,
    skip: number,
    targets: readonly OutLink[],
    withMacs: boolean,
    out?: PeerId[],
  ): void {
    const { frame, used } = encodeBatch(topicIdx, items, this.init.maxFrameBytes, withMacs);
    if (box !== undefined) {
      let i = skip;
      for (const id of box.keys()) {
        if (i++ >= used) break;
        box.delete(id);
      }
      this.stats.itemsDeferred += box.size;
    }
    let plain: Uint8Array | undefined;
    for (const link of targets) {
      let fr = frame;
      if (withMacs && !this.readsMacs(link)) {
        plain ??= encodeBatch(topicIdx, items, this.init.maxFrameBytes, false, used).frame;
        fr = plain;
      }
      if (this.write(link, fr)) {
        this.stats.framesOut++;
        this.stats.batchesOut++;
        this.stats.itemsOut += used;
        out?.push(link.peerId);
      }
    }
  }

  /**
   * Broadcast mode: the items waiting in the outbox (learned from relay batches: their origins
   * relay, so they reached only a few peers) in ONE batch, without an item of ours, to
   * FORWARD_FANOUT random peers; each forwards them again in its next tick. A mesh where no
   * member relays has none of them, and sends none.
   */
  private forwardBatch(topic: string, direct: readonly OutLink[]): void {
    const topicIdx = this.topics.indexOf(topic);
    const box = this.outbox.get(topic);
    if (topicIdx < 0 || box === undefined) return;
    const own = direct.length;
    const targets = pickWeighted(
      direct,
      FORWARD_FANOUT,
      (l) => 1 / Math.max(1, this.remoteLinks.get(l.peerId.toString()) ?? own),
      this.random,
    );
    this.sendBatch(
      topicIdx,
      [...box.values()],
      box,
      0,
      targets,
      targets.some((l) => this.readsMacs(l)),
    );
  }

  /** Whether the peer at the other end said it reads batches with MAC lists (kind 7). */
  private readsMacs(link: OutLink): boolean {
    return ((this.remoteFeatures.get(link.peerId.toString()) ?? 0) & FEATURE_BATCH_MAC) !== 0;
  }

  /** Tells our direct peers how many direct links we have, when it changed (at most once a second). */
  private adviseLinks(direct: readonly OutLink[], links: number): void {
    if (links === this.advertisedLinks) return;
    const now = performance.now();
    if (now - this.advertisedAt < LINKS_ADVERT_MS) return;
    this.advertisedLinks = links;
    this.advertisedAt = now;
    const frame = featuresFrame(links, true);
    for (const l of direct) this.write(l, frame);
  }

  /**
   * The MAC list of our own item: one MAC per member heard in the last minute
   * (at most relayMacPeers), each under the key we share with it.
   */
  private ownMacs(topic: Uint8Array, seqBytes: Uint8Array, sig: Uint8Array, data: Uint8Array): Uint8Array {
    if (this.macs === undefined) return NO_KEY;
    const now = performance.now();
    if (now - this.macPrunedAt > 5_000) {
      this.macPrunedAt = now;
      for (const [id, m] of this.macMembers) if (now - m.last > ORIGIN_IDLE_MS) this.macMembers.delete(id);
    }
    if (this.macMembers.size === 0) return NO_KEY;
    const digest = macDigest(this.selfKeyBytes, topic, seqBytes, sig, data);
    const list = macList(this.macMembers.values(), this.macMembers.size, digest);
    this.stats.macsOut += this.macMembers.size;
    return list;
  }

  /**
   * The MAC key shared with an origin, made once (null cached when it cannot
   * be). Made only for origins already proven (by signature or by their own
   * link), and at most MAC_KEYS_PER_S a second: one costs ~0.4 ms, so items
   * that merely name a fresh key must not make us build one.
   */
  private macPeer(id: string, key: PublicKey): MacPeer | undefined {
    if (this.macs === undefined) return undefined;
    let p = this.macPeers.get(id);
    if (p === undefined) {
      const now = performance.now();
      if (now - this.macBuildsFrom >= 1_000) {
        this.macBuildsFrom = now;
        this.macBuilds = 0;
      }
      if (this.macBuilds >= MAC_KEYS_PER_S) return undefined;
      this.macBuilds++;
      p = this.macs.peer(key) ?? null;
      if (this.macPeers.size >= this.maxOrigins) {
        // the oldest goes (insertion order), not the whole cache
        const first = this.macPeers.keys().next();
        if (first.done !== true) this.macPeers.delete(first.value);
      }
      this.macPeers.set(id, p);
    }
    return p ?? undefined;
  }

  /** An origin was heard: its MAC goes into our next items (room permitting). */
  private noteMember(id: string, key: PublicKey, now: number): void {
    if (this.macs === undefined) return;
    const m = this.macMembers.get(id);
    if (m !== undefined) {
      m.last = now;
      return;
    }
    if (this.macMembers.size >= this.relayMacPeers) return;
    const peer = this.macPeer(id, key);
    if (peer !== undefined) this.macMembers.set(id, { tag: peer.tag, key: peer.key, last: now });
  }

  /** Signs with the native signer (Ed25519); undefined for other key types, which relay mode does not support. */
  private signSync(bytes: Uint8Array): Uint8Array | undefined {
    return this.signer?.sign(bytes);
  }

  private async ownFrame(topic: string, data: Uint8Array): Promise<Uint8Array> {
    const topicIdx = this.topics.indexOf(topic);
    if (topicIdx < 0) throw new Error(`not subscribed to ${topic}`);
    const seq = this.seq++;
    // signed for peers that relay: they asked (FRAME_WANT_SIGNATURES) or said so (FEATURE_RELAY)
    const signed = Date.now() < this.signUntil || this.relayingPeers.size > 0;
    const head = 1 + varintLength(topicIdx) + SEQ_BYTES;
    const body = head + (signed ? SIG_BYTES : 0) + data.byteLength;
    const frame = new Uint8Array(varintLength(body) + body);
    let off = writeVarint(frame, 0, body);
    frame[off++] = signed ? FRAME_OWN_SIGNED : FRAME_OWN;
    off = writeVarint(frame, off, topicIdx);
    writeSeq(frame, off, seq);
    if (signed) {
      const seqBytes = frame.subarray(off, off + SEQ_BYTES);
      const sig = await this.sign(signedBytes(this.topicBytes.get(topic)!, seqBytes, data));
      frame.set(sig, off + SEQ_BYTES);
      off += SIG_BYTES;
      this.stats.signedOut++;
    }
    frame.set(data, off + SEQ_BYTES);
    return frame;
  }

  private relay(msg: Message & { type: 'signed' }, originKey: Uint8Array, seq: number, via: string): void {
    const topicIdx = this.topics.indexOf(msg.topic);
    if (topicIdx < 0) return;
    const originId = msg.from.toString();
    if (originId === via) this.askForSignatures(via);
    if (msg.signature.byteLength !== SIG_BYTES) {
      // came unsigned from its origin: asked above, the origin's next messages can be relayed
      this.drop('relay-unsigned');
      return;
    }
    const targets = this.directSubscribers(msg.topic).filter((l) => {
      const id = l.peerId.toString();
      return id !== via && id !== originId;
    });
    if (targets.length === 0) return;
    const data = msg.data;
    const body =
      1 +
      varintLength(topicIdx) +
      SEQ_BYTES +
      SIG_BYTES +
      varintLength(originKey.byteLength) +
      originKey.byteLength +
      data.byteLength;
    const frame = new Uint8Array(varintLength(body) + body);
    let off = writeVarint(frame, 0, body);
    frame[off++] = FRAME_RELAYED;
    off = writeVarint(frame, off, topicIdx);
    writeSeq(frame, off, seq);
    off += SEQ_BYTES;
    frame.set(msg.signature, off);
    off += SIG_BYTES;
    off = writeVarint(frame, off, originKey.byteLength);
    frame.set(originKey, off);
    frame.set(data, off + originKey.byteLength);
    for (const l of targets) if (this.write(l, frame)) this.stats.relayedOut++;
  }

  /** Asks `origin` (a directly connected peer) to sign its messages: we relay them. Renewed every third of the TTL. */
  private askForSignatures(origin: string): void {
    const now = Date.now();
    if (now - (this.asked.get(origin) ?? 0) < SIGN_TTL_MS / 3) return;
    const link = this.out.get(origin);
    if (link === undefined) return;
    const body = 1 + varintLength(SIGN_TTL_MS);
    const frame = new Uint8Array(varintLength(body) + body);
    const off = writeVarint(frame, 0, body);
    frame[off] = FRAME_WANT_SIGNATURES;
    writeVarint(frame, off + 1, SIGN_TTL_MS);
    if (this.write(link, frame)) {
      this.asked.set(origin, now);
      this.stats.signatureRequests++;
    }
  }

  // ---- links ----

  private connect(peerId: PeerId, conn: Connection): void {
    if (!this.running || conn.status !== 'open') return;
    const id = peerId.toString();
    let link = this.out.get(id);
    if (link === undefined) {
      link = { peerId, stream: undefined, opening: false, failures: 0, timer: undefined };
      this.out.set(id, link);
    }
    if (link.stream === undefined && !link.opening) void this.open(link, conn);
  }

  private disconnect(peerId: PeerId): void {
    const id = peerId.toString();
    const link = this.out.get(id);
    if (link?.timer !== undefined) clearTimeout(link.timer);
    this.out.delete(id);
    this.remoteTopics.delete(id);
    this.remoteFeatures.delete(id);
    this.remoteLinks.delete(id);
    this.relayingPeers.delete(id);
    this.asked.delete(id);
  }

  private async open(link: OutLink, conn: Connection): Promise<void> {
    link.opening = true;
    try {
      const stream = await conn.newStream(GOSSIP_PROTOCOL, { signal: AbortSignal.timeout(5_000) });
      link.opening = false;
      if (!this.running || this.out.get(link.peerId.toString()) !== link) {
        await this.closeStream(stream);
        return;
      }
      link.stream = stream;
      const opened = Date.now();
      stream.addEventListener(
        'close',
        () => {
          if (link.stream !== stream) return;
          link.stream = undefined;
          // a stream the peer keeps closing at once counts as a failure, so reopening stays bounded
          if (Date.now() - opened >= HEALTHY_STREAM_MS) link.failures = 0;
          else link.failures++;
          this.scheduleReopen(link);
        },
        { once: true },
      );
      this.write(link, this.hello());
      this.write(link, featuresFrame(this.fanout > 0 ? this.advertisedLinks : 0, this.fanout > 0));
    } catch (err) {
      link.opening = false;
      link.failures++;
      this.log('opening a gossip stream to %p failed: %e', link.peerId, err);
      this.scheduleReopen(link);
    }
  }

  /** Reopens a closed or failed outbound stream while the peer is still connected (bounded attempts). */
  private scheduleReopen(link: OutLink): void {
    if (!this.running || link.failures >= REOPEN_ATTEMPTS || link.timer !== undefined) return;
    if (this.out.get(link.peerId.toString()) !== link) return;
    link.timer = setTimeout(
      () => {
        link.timer = undefined;
        if (!this.running || this.out.get(link.peerId.toString()) !== link || link.stream !== undefined)
          return;
        const conn = this.components.connectionManager
          .getConnections(link.peerId)
          .find((c) => c.status === 'open');
        if (conn === undefined) return;
        void this.open(link, conn);
      },
      REOPEN_MS * (link.failures + 1),
    );
  }

  // ---- receiving ----

  private readonly onInbound = (stream: Stream, connection: Connection): void => {
    if (!this.running) {
      stream.abort(new Error('not running'));
      return;
    }
    const peerId = connection.remotePeer;
    const key = peerId.publicKey;
    const link: InLink = {
      peerId,
      id: peerId.toString(),
      key,
      keyBytes: key === undefined ? undefined : publicKeyToProtobuf(key),
      topics: [],
      decoder: new FrameDecoder(this.init.maxFrameBytes),
    };
    this.inbound.add(stream);
    lazyWindowUpdates(stream);
    const onMessage = (evt: { data: Uint8Array | { subarray(): Uint8Array } }): void => {
      const frames = link.decoder.push(toBytes(evt.data));
      if (frames instanceof Error) {
        this.drop('bad-frame');
        stream.abort(frames);
        return;
      }
      for (const f of frames) {
        if (stream.status !== 'open') return; // a bad frame aborted it: the rest is not read
        this.onFrame(link, f, stream);
      }
    };
    stream.addEventListener('message', onMessage);
    stream.addEventListener(
      'close',
      () => {
        stream.removeEventListener('message', onMessage);
        this.inbound.delete(stream);
        if (link.topics.length > 0 && this.remoteTopics.get(link.id) === link.topics) {
          this.remoteTopics.delete(link.id);
        }
      },
      { once: true },
    );
  };

  private onFrame(link: InLink, f: Uint8Array, stream: Stream): void {
    this.stats.framesIn++;
    switch (f[0]) {
      case FRAME_HELLO:
        this.onHello(link, f, stream);
        return;
      case FRAME_OWN:
        this.onOwn(link, f, false);
        return;
      case FRAME_OWN_SIGNED:
        this.onOwn(link, f, true);
        return;
      case FRAME_WANT_SIGNATURES: {
        const ttl = readVarint(f, 1);
        if (ttl === undefined) {
          this.drop('bad-frame');
          return;
        }
        this.signUntil = Math.max(this.signUntil, Date.now() + Math.min(ttl[0], SIGN_TTL_MS));
        return;
      }
      case FRAME_RELAYED:
        this.onRelayed(link, f);
        return;
      case FRAME_BATCH:
        this.onBatch(link, f, false);
        return;
      case FRAME_BATCH_MAC:
        this.onBatch(link, f, true);
        return;
      case FRAME_FEATURES: {
        const bits = readVarint(f, 1);
        if (bits === undefined) {
          this.drop('bad-frame');
          return;
        }
        this.remoteFeatures.set(link.id, bits[0]);
        if ((bits[0] & FEATURE_RELAY) !== 0) this.relayingPeers.add(link.id);
        else this.relayingPeers.delete(link.id);
        if (bits[1] < f.byteLength) {
          const links = readVarint(f, bits[1]);
          if (links === undefined || links[0] > MAX_ADVERTISED_LINKS) {
            this.drop('bad-frame');
            return;
          }
          this.remoteLinks.set(link.id, links[0]);
        }
        return;
      }
      default:
        this.drop('unknown-frame');
    }
  }

  private onHello(link: InLink, f: Uint8Array, stream: Stream): void {
    const n = readVarint(f, 1);
    if (n === undefined || n[0] > 64) {
      this.drop('bad-hello');
      stream.abort(new Error('bad hello'));
      return;
    }
    const topics: string[] = [];
    let off = n[1];
    const dec = new TextDecoder('utf-8', { fatal: true });
    try {
      for (let i = 0; i < n[0]; i++) {
        const len = readVarint(f, off);
        if (len === undefined || len[1] + len[0] > f.byteLength || len[0] > 256) throw new Error('truncated');
        topics.push(dec.decode(f.subarray(len[1], len[1] + len[0])));
        off = len[1] + len[0];
      }
    } catch {
      this.drop('bad-hello');
      stream.abort(new Error('bad hello'));
      return;
    }
    const before = new Set(link.topics);
    link.topics = topics;
    this.remoteTopics.set(link.id, topics);
    const changes = topics.filter((t) => !before.has(t)).map((topic) => ({ topic, subscribe: true }));
    for (const t of before) if (!topics.includes(t)) changes.push({ topic: t, subscribe: false });
    if (changes.length > 0) {
      this.safeDispatchEvent('subscription-change', {
        detail: { peerId: link.peerId, subscriptions: changes },
      });
    }
  }

  /** Topic of a frame by the sender's hello, when we are subscribed to it. */
  private frameTopic(link: InLink, f: Uint8Array): [string, number] | undefined {
    const t = readVarint(f, 1);
    if (t === undefined) {
      this.drop('bad-frame');
      return undefined;
    }
    const topic = link.topics[t[0]];
    if (topic === undefined || !this.topicBytes.has(topic)) {
      this.drop('not-subscribed');
      return undefined;
    }
    return [topic, t[1]];
  }

  private onOwn(link: InLink, f: Uint8Array, signed: boolean): void {
    const t = this.frameTopic(link, f);
    if (t === undefined) return;
    const [topic, off] = t;
    const sigBytes = signed ? SIG_BYTES : 0;
    if (f.byteLength < off + SEQ_BYTES + sigBytes || link.key === undefined || link.keyBytes === undefined) {
      this.drop('bad-frame');
      return;
    }
    const seq = readSeq(f, off);
    if (!this.firstSight(link.id, seq)) return;
    // The link authenticated the sender: its signature, when present, is only carried for relays.
    const msg: Message & { type: 'signed' } = {
      type: 'signed',
      from: link.peerId,
      topic,
      data: f.subarray(off + SEQ_BYTES + sigBytes),
      sequenceNumber: BigInt(seq),
      signature: signed ? f.subarray(off + SEQ_BYTES, off + SEQ_BYTES + SIG_BYTES) : NO_SIGNATURE,
      key: link.key,
    };
    this.deliver(link, msg, link.keyBytes, seq);
  }

  private onRelayed(link: InLink, f: Uint8Array): void {
    const t = this.frameTopic(link, f);
    if (t === undefined) return;
    const [topic, off] = t;
    const k =
      f.byteLength >= off + SEQ_BYTES + SIG_BYTES ? readVarint(f, off + SEQ_BYTES + SIG_BYTES) : undefined;
    if (k === undefined || k[1] + k[0] > f.byteLength || k[0] > 1024) {
      this.drop('bad-frame');
      return;
    }
    const keyBytes = f.subarray(k[1], k[1] + k[0]);
    const origin = this.origin(keyBytes);
    if (origin === undefined) {
      this.drop('bad-key');
      return;
    }
    const seq = readSeq(f, off);
    if (origin.id === this.selfId || this.windows.get(origin.id)?.seen(seq) === true) {
      this.drop(origin.id === this.selfId ? 'self' : 'duplicate');
      return;
    }
    const seqBytes = f.subarray(off, off + SEQ_BYTES);
    const signature = f.subarray(off + SEQ_BYTES, off + SEQ_BYTES + SIG_BYTES);
    const data = f.subarray(k[1] + k[0]);
    const payload = signedBytes(this.topicBytes.get(topic)!, seqBytes, data);
    const check = (ok: boolean): void => {
      if (!ok) {
        this.drop('bad-signature');
        return;
      }
      if (!this.firstSight(origin.id, seq)) return;
      this.stats.relayedIn++;
      const msg: Message & { type: 'signed' } = {
        type: 'signed',
        from: origin.peerId,
        topic,
        data,
        sequenceNumber: BigInt(seq),
        signature,
        key: origin.key,
      };
      this.deliver(link, msg, keyBytes, seq);
    };
    if (origin.verifier !== undefined) {
      check(origin.verifier.verify(payload, signature));
      return;
    }
    // Not Ed25519: libp2p verifies (may be async). Copy the views: the read buffer is not ours past this call.
    const copy = { payload: payload.slice(), signature: signature.slice(), data: data.slice() };
    void Promise.resolve(origin.key.verify(copy.payload, copy.signature)).then(
      (ok) => {
        if (!this.running) return;
        if (!ok) {
          this.drop('bad-signature');
          return;
        }
        if (!this.firstSight(origin.id, seq)) return;
        this.stats.relayedIn++;
        this.deliver(
          link,
          {
            type: 'signed',
            from: origin.peerId,
            topic,
            data: copy.data,
            sequenceNumber: BigInt(seq),
            signature: copy.signature,
            key: origin.key,
          },
          keyBytes.slice(),
          seq,
        );
      },
      () => this.drop('bad-signature'),
    );
  }

  /**
   * A relay batch: each item is checked against the newest sequence number
   * held for its origin before anything else (an item no newer is a duplicate:
   * no check), then its origin's proof (not for the link peer's own item:
   * noise authenticated it): the MAC its origin made for us when the item
   * carries one, else (or when that MAC does not match) the origin's
   * signature. Then it goes to the topic validator, credited to its origin,
   * and, accepted, into our next batch. A bad item is dropped and not
   * recorded (its next copy is checked again); after
   * MAX_BAD_SIGNATURES_PER_BATCH bad signatures the batch's remaining items
   * are read only where a MAC proves them.
   */
  private onBatch(link: InLink, f: Uint8Array, withMacs: boolean): void {
    const t = this.frameTopic(link, f);
    if (t === undefined) return;
    const [topic, off] = t;
    const items = readBatch(f, off, MAX_BATCH_ITEMS, withMacs);
    if (items instanceof Error) {
      this.drop('bad-batch');
      return;
    }
    if (link.key === undefined || link.keyBytes === undefined) {
      this.drop('bad-frame');
      return;
    }
    this.stats.batchesIn++;
    const topicBytes = this.topicBytes.get(topic)!;
    const now = performance.now();
    let badSignatures = 0;
    for (const it of items) {
      this.stats.itemsIn++;
      const own = it.key.byteLength === 0;
      const origin = own ? undefined : this.origin(it.key);
      if (!own && origin === undefined) {
        this.drop('bad-key');
        continue;
      }
      const originId = origin?.id ?? link.id;
      if (originId === this.selfId) {
        this.drop('self');
        continue;
      }
      let w = this.windows.get(originId);
      if (w !== undefined && !w.newer(it.seq)) {
        this.drop('duplicate');
        continue;
      }
      const relayed = origin !== undefined && originId !== link.id;
      if (relayed) {
        if (origin.verifier === undefined) {
          this.drop('unsupported-key');
          continue;
        }
        const at = this.macs === undefined || it.macs.byteLength === 0 ? -1 : findMac(it.macs, this.macs.tag);
        // only a key made before (for an origin proven then): an item that names a fresh key
        // is checked by its signature, and the key is made once that check passes (below)
        const mp = at < 0 ? undefined : (this.macPeers.get(originId) ?? undefined);
        let ok = false;
        if (mp !== undefined) {
          this.stats.macVerified++;
          ok = checkMac(it.macs, at, mp.key, macDigest(it.key, topicBytes, it.seqBytes, it.sig, it.data));
          // a relay checks only its own MAC, so an honest one can forward a list another
          // node altered: a MAC that does not match is not proof of a bad item, the signature decides
          if (!ok) this.drop('bad-mac');
        }
        if (!ok) {
          if (badSignatures >= MAX_BAD_SIGNATURES_PER_BATCH) {
            // a hostile link could fill a frame with bad signatures: after a few, no more
            // signature checks in this batch (items with a MAC for us are still read). Not
            // after the first: an honest relay forwards an item a MAC proved to it, and a
            // hostile origin can sign that one badly
            this.drop('unchecked');
            continue;
          }
          this.stats.verified++;
          if (!origin.verifier.verify(signedBytes(topicBytes, it.seqBytes, it.data), it.sig)) {
            this.drop('bad-signature');
            badSignatures++;
            continue;
          }
          // proven by its signature, and it has a MAC for us: its next items can be checked so
          if (at >= 0) this.macPeer(originId, origin.key);
        }
        this.stats.relayedIn++;
      }
      if (w === undefined) {
        if (this.windows.size >= this.maxOrigins) this.forgetIdleOrigins(now);
        w = new SeqWindow();
        this.windows.set(originId, w);
      }
      w.accept(it.seq, now);
      this.stats.itemsNew++;
      this.noteMember(originId, origin?.key ?? link.key, now);
      // copies: the frame is a view into a read buffer, and the item may wait in our outbox
      const msg: Message & { type: 'signed' } = {
        type: 'signed',
        from: origin?.peerId ?? link.peerId,
        topic,
        data: it.data.slice(),
        sequenceNumber: BigInt(it.seq),
        signature: it.sig.slice(),
        key: origin?.key ?? link.key,
      };
      this.deliver(link, msg, own ? link.keyBytes : it.key.slice(), it.seq, it.macs.slice(), true);
    }
  }

  /** Relay mode: `msg` (accepted) goes into our next batch, unless a newer one of its origin is there. */
  private enqueue(
    msg: Message & { type: 'signed' },
    originKey: Uint8Array,
    seq: number,
    macs: Uint8Array = NO_KEY,
  ): void {
    if (msg.signature.byteLength !== SIG_BYTES) {
      this.drop('relay-unsigned');
      return;
    }
    let box = this.outbox.get(msg.topic);
    if (box === undefined) {
      box = new Map();
      this.outbox.set(msg.topic, box);
    }
    const id = msg.from.toString();
    const had = box.get(id);
    if (had !== undefined && had.seq >= seq) return;
    if (had === undefined && box.size >= this.maxOrigins) {
      this.drop('outbox-full');
      return;
    }
    box.set(id, { key: originKey, seq, sig: msg.signature, data: msg.data, macs });
  }

  /** The origin a relayed frame names by its key, with a cached verifier. */
  private origin(keyBytes: Uint8Array): Origin | undefined {
    // looked up once per item, duplicates too: a hash of the bytes, not a string
    const h = hashBytes(keyBytes);
    let o = this.origins.get(h);
    if (o !== undefined && sameBytes(o.keyBytes, keyBytes)) return o;
    try {
      const key = publicKeyFromProtobuf(keyBytes);
      const peerId = peerIdFromPublicKey(key);
      o = { key, keyBytes: keyBytes.slice(), peerId, id: peerId.toString(), verifier: nativeVerifier(key) };
    } catch {
      return undefined;
    }
    if (this.origins.size >= this.maxOrigins) this.origins.clear();
    this.origins.set(h, o);
    return o;
  }

  /** Records an origin's sequence number; false (and counted) when it was seen already. */
  private firstSight(origin: string, seq: number): boolean {
    const now = performance.now();
    let w = this.windows.get(origin);
    if (w === undefined) {
      if (this.windows.size >= this.maxOrigins) this.forgetIdleOrigins(now);
      w = new SeqWindow();
      this.windows.set(origin, w);
    }
    if (!w.accept(seq, now)) {
      this.drop('duplicate');
      return false;
    }
    return true;
  }

  /** Drops the windows of origins not heard for a minute (or the older half, when all were). */
  private forgetIdleOrigins(now: number): void {
    for (const [id, w] of this.windows) if (now - w.last > ORIGIN_IDLE_MS) this.windows.delete(id);
    if (this.windows.size < this.maxOrigins) return;
    let n = this.windows.size >> 1;
    for (const id of this.windows.keys()) {
      if (n-- <= 0) break;
      this.windows.delete(id);
    }
  }

  private deliver(
    link: InLink,
    msg: Message & { type: 'signed' },
    originKey: Uint8Array,
    seq: number,
    macs: Uint8Array = NO_KEY,
    batched = false,
  ): void {
    const validate = this.topicValidators.get(msg.topic);
    // relay mode forwards in batches; broadcast mode too what came in one (see forwardBatch)
    const inBatch = this.fanout > 0 || batched;
    if (validate === undefined) return;
    let r: TopicValidatorResult | Promise<TopicValidatorResult>;
    try {
      r = validate(link.peerId, msg);
    } catch (err) {
      this.drop('validator-threw');
      this.log.error('topic validator threw: %e', err);
      return;
    }
    if (r === Validation.Accept) {
      if (inBatch) this.enqueue(msg, originKey, seq, macs);
      else this.relay(msg, originKey, seq, link.id);
      return;
    }
    if (r instanceof Promise) {
      // Copy: the frame is a view into a read buffer.
      const held = { ...msg, data: msg.data.slice(), signature: msg.signature.slice() };
      const key = originKey.slice();
      r.then(
        (res) => {
          if (res !== Validation.Accept || !this.running) return;
          if (inBatch) this.enqueue(held, key, seq, macs);
          else this.relay(held, key, seq, link.id);
        },
        () => this.drop('validator-threw'),
      );
    }
  }
}

/** A libp2p service factory for {@link DirectGossip}; `fallback` names a service built before it (gossipsub). */
export function directGossip(
  init: Omit<DirectGossipInit, 'fallback'> & { fallbackService?: string },
): (components: DirectGossipComponents & Record<string, unknown>) => DirectGossip {
  return (components) => {
    const fb =
      init.fallbackService === undefined
        ? undefined
        : (components[init.fallbackService] as FallbackPubSub | undefined);
    return new DirectGossip(components, { ...init, fallback: fb });
  };
}
