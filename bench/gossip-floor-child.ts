/**
 * One node process of `npm run bench:gossip-floor` (bench/gossip-floor.ts
 * starts 8 per phase, IPC channel). Variants:
 *
 *   floor      bare TCP on 127.0.0.1, one socket to each peer, each message
 *              signed with node:crypto Ed25519 (key object built once) and
 *              verified on arrival, the real engine building and receiving
 *   tcp        the floor without signatures (not authenticated: the bare cost of the
 *              sockets, timers and engine; not in the default run)
 *   gossipsub  createMeshLimiter with transport 'gossipsub' (the mesh before issue 13)
 *   direct     createMeshLimiter with transport 'direct' (src/mesh/direct-gossip.ts)
 *   relay      'direct' in relay mode (relayFanout 3): one batch a tick to 3 random peers,
 *              every relayed item origin-signed and verified (not in the default run)
 *
 * Every variant calls check() on one key every g ms (its own timer) and
 * gossips every g ms, so each message carries that key's window. Exits when
 * the parent goes away.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { privateKeyFromProtobuf } from '@libp2p/crypto/keys';
import { systemClock } from '../src/clock.js';
import { defaultEngineFactory } from '../src/mesh/default-engine.js';
import type { MeshEngine } from '../src/mesh/engine-port.js';
import { createMeshLimiter } from '../src/mesh/mesh-limiter.js';
import { nativeSigner, nativeVerifier, type Signer, type Verifier } from '../src/mesh/native-ed25519.js';
import {
  directGossipOf,
  type GossipTransport,
  type MeshNode,
  setDefaultGossipTransport,
} from '../src/mesh/node.js';
import type { MeshLimiter } from '../src/mesh/types.js';
import type { PolicySpec } from '../src/types.js';

export type Variant = 'floor' | 'tcp' | 'gossipsub' | 'direct' | 'relay';

/** The relay variant's fanout. */
export const RELAY_FANOUT = 3;

export interface ChildInit {
  variant: Variant;
  index: number;
  g: number;
  /** Protobuf private keys of every node (hex), so every peer id is known up front. */
  keys: string[];
  ports: number[];
  policy: PolicySpec;
  key: string;
  /** pnet swarm key (hex) for the mesh variants, or undefined for none (as on loopback by default). */
  psk?: string | undefined;
}

export interface Counters {
  msgsIn: number;
  msgsOut: number;
  bytesIn: number;
  bytesOut: number;
}

export interface Report extends Counters {
  cpuUserUs: number;
  cpuSystemUs: number;
  wallMs: number;
  detail: object;
}

export type ToChild =
  | { op: 'init'; init: ChildInit }
  | { op: 'status' }
  | { op: 'mark' }
  | { op: 'report' }
  | { op: 'stop' };

export type FromChild =
  | { ev: 'started' }
  | { ev: 'status'; peers: number; known: number; detail: object }
  | { ev: 'marked' }
  | { ev: 'report'; report: Report }
  | { ev: 'fatal'; message: string };

const send = (m: FromChild): void => {
  if (process.connected) process.send?.(m);
};

const quiet = { debug() {}, info() {}, warn() {}, error() {} };

interface Node {
  /** Peers heard lately (live). */
  peers(): number;
  /** Peers known, live or stale. */
  known(): number;
  counters(): Counters;
  detail(): object;
  stop(): Promise<void>;
}

/** Frame on the floor's sockets: u32 length, u8 sender index, 64-byte signature, message. */
const HEAD = 4 + 1 + 64;
const NO_SIGNATURE = new Uint8Array(64);

async function startFloor(init: ChildInit, signed: boolean): Promise<Node> {
  const n = init.keys.length;
  const keys = init.keys.map((k) => privateKeyFromProtobuf(Buffer.from(k, 'hex')));
  const ids = keys.map((k) => k.publicKey.toString());
  const me = init.index;
  const signer: Signer | undefined = nativeSigner(keys[me]!);
  const verifiers: (Verifier | undefined)[] = keys.map((k) => nativeVerifier(k.publicKey));
  if (signer === undefined || verifiers.some((v) => v === undefined))
    throw new Error('floor needs Ed25519 keys');
  const engineInit = {
    policies: [init.policy],
    nodeId: ids[me]!,
    clock: systemClock,
    gossipIntervalMs: init.g,
    expectedDelayMs: 10,
    expectedMembers: n,
    // newer engine ports take the depart rule from the mesh (no peer departs during a phase)
    departAfterMs: Math.max(5_000, 50 * init.g),
  };
  const engine: MeshEngine = defaultEngineFactory(engineInit);
  const c: Counters = { msgsIn: 0, msgsOut: 0, bytesIn: 0, bytesOut: 0 };
  const rejected: Record<string, number> = {};
  let badSignatures = 0;
  const inbound = new Set<Socket>();
  const outbound = new Map<number, Socket>();

  const onInbound = (sock: Socket): void => {
    inbound.add(sock);
    sock.setNoDelay(true);
    let pending: Buffer | undefined;
    sock.on('data', (chunk: Buffer) => {
      const buf = pending === undefined ? chunk : Buffer.concat([pending, chunk]);
      pending = undefined;
      let off = 0;
      while (buf.byteLength - off >= 4) {
        const len = buf.readUInt32BE(off);
        if (len < HEAD - 4 || len > 1 << 20) {
          sock.destroy();
          return;
        }
        if (buf.byteLength - off < 4 + len) break;
        const sender = buf[off + 4]!;
        const sig = buf.subarray(off + 5, off + HEAD);
        const data = buf.subarray(off + HEAD, off + 4 + len);
        off += 4 + len;
        const v = verifiers[sender];
        if (v === undefined || sender === me || (signed && !v.verify(data, sig))) {
          badSignatures++;
          continue;
        }
        c.msgsIn++;
        c.bytesIn += data.byteLength;
        const r = engine.receiveGossip(ids[sender]!, data, systemClock.now());
        if (!r.ok) rejected[r.reason ?? 'rejected'] = (rejected[r.reason ?? 'rejected'] ?? 0) + 1;
      }
      if (off < buf.byteLength) pending = buf.subarray(off);
    });
    sock.on('error', () => undefined);
    sock.on('close', () => inbound.delete(sock));
  };
  const server: Server = createServer(onInbound);
  await new Promise<void>((res, rej) => {
    server.once('error', rej);
    server.listen(init.ports[me], '127.0.0.1', () => res());
  });

  const dial = (j: number): void => {
    const s = connect({ host: '127.0.0.1', port: init.ports[j]! });
    s.setNoDelay(true);
    s.on('connect', () => outbound.set(j, s));
    s.on('error', () => undefined);
    s.on('close', () => {
      if (outbound.get(j) === s) outbound.delete(j);
      if (running) setTimeout(() => running && !outbound.has(j) && dial(j), 200);
    });
  };
  let running = true;
  // the other nodes may not listen yet: dial after a short pause, then redial on close
  setTimeout(() => {
    for (let j = 0; j < n; j++) if (j !== me) dial(j);
  }, 500);

  const traffic = setInterval(() => engine.check(init.policy.name, init.key), init.g);
  const tick = setInterval(() => {
    const data = engine.buildGossip(systemClock.now(), outbound.size + 1);
    const sig = signed ? signer.sign(data) : NO_SIGNATURE;
    const frame = Buffer.allocUnsafe(HEAD + data.byteLength);
    frame.writeUInt32BE(HEAD - 4 + data.byteLength, 0);
    frame[4] = me;
    frame.set(sig, 5);
    frame.set(data, HEAD);
    for (const s of outbound.values()) s.write(frame);
    c.msgsOut++;
    c.bytesOut += data.byteLength;
  }, init.g);

  return {
    peers: () => Math.min(outbound.size, inbound.size),
    known: () => Math.min(outbound.size, inbound.size),
    counters: () => ({ ...c }),
    detail: () => ({ rejected: { ...rejected }, badSignatures }),
    stop: async () => {
      running = false;
      clearInterval(traffic);
      clearInterval(tick);
      for (const s of [...outbound.values(), ...inbound]) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

async function startMesh(init: ChildInit, transport: GossipTransport, relayFanout = 0): Promise<Node> {
  setDefaultGossipTransport(transport);
  const me = init.index;
  const ids = init.keys.map((k) => privateKeyFromProtobuf(Buffer.from(k, 'hex')).publicKey.toString());
  const bootstrap = init.ports
    .map((p, j) => (j === me ? undefined : `/ip4/127.0.0.1/tcp/${p}/p2p/${ids[j]}`))
    .filter((a): a is string => a !== undefined);
  const limiter: MeshLimiter = createMeshLimiter({
    policies: [init.policy],
    listen: [`/ip4/127.0.0.1/tcp/${init.ports[me]}`],
    bootstrap,
    privateKey: Buffer.from(init.keys[me]!, 'hex'),
    gossipIntervalMs: init.g,
    logger: quiet,
    ...(init.psk === undefined ? {} : { psk: Buffer.from(init.psk, 'hex') }),
    ...(relayFanout > 0 ? { relayFanout } : {}),
  });
  await limiter.start();
  const traffic = setInterval(() => limiter.check(init.policy.name, init.key), init.g);
  return {
    peers: () => limiter.peers().filter((p) => !p.stale).length,
    known: () => limiter.peers().length,
    counters: () => {
      const g = limiter.stats().gossip;
      return { msgsIn: g.msgsIn, msgsOut: g.msgsOut, bytesIn: g.bytesIn, bytesOut: g.bytesOut };
    },
    detail: () => {
      const s = limiter.stats();
      // the libp2p node is private to the limiter; read here for the transport's counters only
      const mesh = (limiter as unknown as { node?: MeshNode }).node;
      const direct = mesh === undefined ? undefined : directGossipOf(mesh);
      // the network layer's counters (gossip, drops, peers, injected), not the bulky engine/sync parts
      const {
        engine,
        sync: _sync,
        discovery: _discovery,
        versionMismatch: _vm,
        otherTopics: _ot,
        ...net
      } = s;
      return {
        transport,
        ...net,
        live: limiter
          .peers()
          .map(
            (p) =>
              `${p.id.slice(-6)}${p.stale ? ' stale' : ''} ${p.addrs?.length ?? 0}c ${Math.round(p.clockOffsetMs)}ms`,
          ),
        clock: pick(engine, ['clockSkewed', 'skewedPeers']),
        direct: direct?.stats,
      };
    },
    stop: async () => {
      clearInterval(traffic);
      await limiter.stop();
    },
  };
}

/** The named numeric fields of `o` (engine stats are an opaque object on the port). */
function pick(o: object, names: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const n of names) {
    const v = (o as Record<string, unknown>)[n];
    if (typeof v === 'number') out[n] = v;
  }
  return out;
}

let node: Node | undefined;
let mark: { cpu: NodeJS.CpuUsage; t: number; c: Counters; detail: Record<string, number> } | undefined;

/** Every numeric leaf of `o` by its path (gossip.rejected.duplicate, direct.signedOut, ...). */
function flatten(o: unknown, path = '', out: Record<string, number> = {}): Record<string, number> {
  if (typeof o === 'number') out[path] = o;
  else if (o !== null && typeof o === 'object' && !Array.isArray(o))
    for (const [k, v] of Object.entries(o)) flatten(v, path === '' ? k : `${path}.${k}`, out);
  return out;
}

/** What grew between two flattened details (counters over the measured interval). */
function growth(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d !== 0) out[k] = d;
  }
  return out;
}

process.on('message', (m: ToChild) => {
  void (async () => {
    try {
      switch (m.op) {
        case 'init':
          node =
            m.init.variant === 'floor' || m.init.variant === 'tcp'
              ? await startFloor(m.init, m.init.variant === 'floor')
              : m.init.variant === 'relay'
                ? await startMesh(m.init, 'direct', RELAY_FANOUT)
                : await startMesh(m.init, m.init.variant);
          send({ ev: 'started' });
          break;
        case 'status':
          send({
            ev: 'status',
            peers: node?.peers() ?? 0,
            known: node?.known() ?? 0,
            detail: node?.detail() ?? {},
          });
          break;
        case 'mark':
          if (node === undefined) throw new Error('not started');
          mark = {
            cpu: process.cpuUsage(),
            t: performance.now(),
            c: node.counters(),
            detail: flatten(node.detail()),
          };
          send({ ev: 'marked' });
          break;
        case 'report': {
          if (node === undefined || mark === undefined) throw new Error('no mark');
          const cpu = process.cpuUsage(mark.cpu);
          const c = node.counters();
          send({
            ev: 'report',
            report: {
              cpuUserUs: cpu.user,
              cpuSystemUs: cpu.system,
              wallMs: performance.now() - mark.t,
              msgsIn: c.msgsIn - mark.c.msgsIn,
              msgsOut: c.msgsOut - mark.c.msgsOut,
              bytesIn: c.bytesIn - mark.c.bytesIn,
              bytesOut: c.bytesOut - mark.c.bytesOut,
              detail: growth(mark.detail, flatten(node.detail())),
            },
          });
          break;
        }
        case 'stop':
          await node?.stop();
          process.exit(0);
      }
    } catch (err) {
      send({ ev: 'fatal', message: String((err as Error)?.stack ?? err) });
    }
  })();
});

process.on('disconnect', () => process.exit(0));
