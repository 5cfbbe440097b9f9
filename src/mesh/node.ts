import './polyfill.js';
// The libp2p stack (libp2p, gossipsub, noise, yamux, identify, tcp, pnet: about 250 ms of module
// loading, most of `import('ratemesh')` before) is imported by createMeshNode, on start(), not
// when the package is imported: a process that only builds an Engine, the adapters or the CLI's
// help never loads it. Types only here.
import type { GossipSub } from '@libp2p/gossipsub';
import type { Identify } from '@libp2p/identify';
import type { ConnectionProtector, Libp2p, PrivateKey } from '@libp2p/interface';
import type { ServiceFactoryMap } from 'libp2p';
import { DirectGossip, directGossip, type MeshPubSub } from './direct-gossip.js';
import { tunedEncrypter } from './link-tuning.js';

/** The libp2p stack's modules, loaded once, by the first {@link createMeshNode}. */
let stack:
  | Promise<
      [
        typeof import('@chainsafe/libp2p-noise'),
        typeof import('@chainsafe/libp2p-yamux'),
        typeof import('@libp2p/gossipsub'),
        typeof import('@libp2p/identify'),
        typeof import('@libp2p/pnet'),
        typeof import('@libp2p/tcp'),
        typeof import('libp2p'),
      ]
    >
  | undefined;

function libp2pStack(): NonNullable<typeof stack> {
  stack ??= Promise.all([
    import('@chainsafe/libp2p-noise'),
    import('@chainsafe/libp2p-yamux'),
    import('@libp2p/gossipsub'),
    import('@libp2p/identify'),
    import('@libp2p/pnet'),
    import('@libp2p/tcp'),
    import('libp2p'),
  ]);
  return stack;
}

/**
 * How gossip travels. `'direct'` (default): one long-lived libp2p stream per
 * peer, messages credited to the connection's authenticated peer, gossipsub
 * kept beside it for membership events and for peers without the direct
 * protocol (src/mesh/direct-gossip.ts). `'gossipsub'`: gossipsub alone,
 * every message signed and verified (the transport before issue 13).
 */
export type GossipTransport = 'direct' | 'gossipsub';

let defaultTransport: GossipTransport = 'direct';

/**
 * Sets the transport of nodes created from now on in this process when their
 * config names none (benchmarks and A/B drills run both; the mesh limiter's
 * options do not carry a transport yet). Returns the previous default.
 */
export function setDefaultGossipTransport(t: GossipTransport): GossipTransport {
  if (t !== 'direct' && t !== 'gossipsub') throw new TypeError(`unknown gossip transport ${String(t)}`);
  const prev = defaultTransport;
  defaultTransport = t;
  return prev;
}

/** The libp2p services a ratemesh node runs. */
export interface MeshServices {
  [key: string]: unknown;
  /** Where the mesh publishes and validates gossip: gossipsub itself, or direct streams beside it. */
  pubsub: MeshPubSub;
  /** Gossipsub beside the direct streams (transport 'direct'; with 'gossipsub' it is `pubsub` itself). */
  gossipsub?: GossipSub;
  identify: Identify;
}

/** A started-or-not libp2p node with ratemesh's services. */
export type MeshNode = Libp2p<MeshServices>;

/** Gossipsub mesh degrees; small by default because a ratemesh mesh is a handful of nodes. */
export interface MeshDegree {
  D: number;
  Dlo: number;
  Dhi: number;
}

/** What {@link createMeshNode} needs; every field already validated by the caller. */
export interface MeshNodeConfig {
  listen: readonly string[];
  /** The node's identity key (its peer id derives from it). */
  privateKey: PrivateKey;
  /** pnet swarm key file contents. */
  psk?: Uint8Array | undefined;
  degree: MeshDegree;
  /** Gossipsub heartbeat, ms (mesh maintenance, not our gossip tick). */
  heartbeatMs: number;
  /** Largest RPC frame gossipsub reads from a peer, bytes. */
  maxRpcBytes: number;
  /** Connections per second one host may open to us. */
  inboundConnectionThreshold: number;
  maxConnections: number;
  dialTimeoutMs: number;
  /** Default: the process default ({@link setDefaultGossipTransport}), 'direct' unless changed. */
  transport?: GossipTransport | undefined;
  /** Relay mode's fanout (direct transport only); 0 or absent: broadcast. */
  relayFanout?: number | undefined;
  /** `relayFanout: 'auto'`: the fanout changes at run time (over gossipsub the node broadcasts). */
  relaySwitchable?: boolean | undefined;
  /** Relay mode: members our items carry a MAC for (default DEFAULT_RELAY_MAC_PEERS; 0: signatures only). */
  relayMacPeers?: number | undefined;
}

/** The direct-gossip service of a node, when it runs one. */
export function directGossipOf(node: MeshNode): DirectGossip | undefined {
  const p = node.services.pubsub;
  return p instanceof DirectGossip ? p : undefined;
}

/** Origin + sequence number: what StrictSign's message id is made of, without hashing or verifying. */
function fastMsgId(msg: { from?: Uint8Array; seqno?: Uint8Array; data?: Uint8Array }): string {
  if (msg.from === undefined || msg.seqno === undefined) {
    // Unsigned messages are rejected later anyway; give each a unique id so none is mistaken for another.
    return `u${Math.random()}`;
  }
  return Buffer.from(msg.from).toString('base64') + Buffer.from(msg.seqno).toString('hex');
}

/** Builds (does not start) the libp2p node: TCP, noise, yamux, identify, gossip (direct streams and gossipsub), optional pnet. */
export async function createMeshNode(cfg: MeshNodeConfig): Promise<MeshNode> {
  const { D, Dlo, Dhi } = cfg.degree;
  const transport = cfg.transport ?? defaultTransport;
  // 'auto' over gossipsub broadcasts (relay mode is the direct transport's)
  const relayFanout = cfg.relaySwitchable === true && transport !== 'direct' ? 0 : (cfg.relayFanout ?? 0);
  if (relayFanout > 0 && transport !== 'direct')
    throw new TypeError(
      `relay mode (relayFanout ${relayFanout}) needs the direct transport, not ${transport}`,
    );
  const [
    { noise },
    { yamux },
    { gossipsub, StrictSign },
    { identify },
    { preSharedKey },
    { tcp },
    { createLibp2p },
  ] = await libp2pStack();
  const protector: (() => ConnectionProtector) | undefined =
    cfg.psk === undefined ? undefined : preSharedKey({ psk: cfg.psk });
  const pubsub = gossipsub({
    D,
    Dlo,
    Dhi,
    Dout: Math.max(0, Math.min(Dlo - 1, Math.floor(D / 2))),
    Dscore: Math.min(Dlo, 2),
    heartbeatInterval: cfg.heartbeatMs,
    // Every message names and proves its origin: the engine keys counts by it.
    globalSignaturePolicy: StrictSign,
    allowPublishToZeroTopicPeers: true,
    ignoreDuplicatePublishError: true,
    emitSelf: false,
    fallbackToFloodsub: false,
    maxInboundDataLength: cfg.maxRpcBytes,
    // Duplicates (the relayed copies of a message we already have) are recognised by origin and
    // sequence number before the signature check, so they cost a lookup instead of a verify.
    fastMsgIdFn: fastMsgId,
    // Each node publishes only its own counts: straight to every subscriber (one hop) is what bounds delay.
    floodPublish: true,
    // Peer scoring is for open meshes. Ours is closed (psk), every message is signed and the
    // engine caps what an origin is credited with. Gossipsub's IP colocation penalty graylisted
    // every peer after a rolling deploy on one address (loopback, NAT, host networking): 43 ids
    // seen from 127.0.0.1 gave each (43 - 10)^2 x -5 = -5,445, and the score of gone peers is
    // kept for an hour, so the survivors ignored each other's gossip and fell back to L/N for
    // good (mesh-test/field-drills.ts, churn). Scores of departed peers are kept one minute.
    scoreParams: { IPColocationFactorWeight: 0, retainScore: 60_000 },
  });
  const services: ServiceFactoryMap<MeshServices> =
    transport === 'gossipsub'
      ? { identify: identify(), pubsub }
      : {
          identify: identify(),
          gossipsub: pubsub,
          pubsub: directGossip({
            maxFrameBytes: cfg.maxRpcBytes,
            fallbackService: 'gossipsub',
            relayFanout,
            relaySwitchable: cfg.relaySwitchable === true,
            ...(cfg.relayMacPeers === undefined ? {} : { relayMacPeers: cfg.relayMacPeers }),
          }),
        };
  return createLibp2p<MeshServices>({
    privateKey: cfg.privateKey,
    addresses: { listen: [...cfg.listen] },
    transports: [tcp()],
    // direct: noise without a thrown RangeError per read and with one socket write per frame (link-tuning.ts)
    connectionEncrypters: [transport === 'direct' ? tunedEncrypter(noise()) : noise()],
    streamMuxers: [yamux()],
    ...(protector === undefined ? {} : { connectionProtector: protector }),
    connectionManager: {
      maxConnections: cfg.maxConnections,
      inboundConnectionThreshold: cfg.inboundConnectionThreshold,
      maxIncomingPendingConnections: Math.max(10, cfg.inboundConnectionThreshold),
      dialTimeout: cfg.dialTimeoutMs,
      // We redial our bootstrap set ourselves (discovery.ts); libp2p's reconnect queue would double it.
      reconnectRetries: 0,
    },
    services,
  });
}
