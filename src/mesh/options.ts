import './polyfill.js';
import type { PrivateKey } from '@libp2p/interface';
import { multiaddr } from '@multiformats/multiaddr';
import { type Clock, systemClock } from '../clock.js';
import { MAX_RELAY_HOPS } from '../decision/constants.js';
import type { PolicySpec } from '../types.js';
import { bytes, fail, finite, integer, optional, shown, stringArray } from '../validate.js';
import { autoRelayFanout, defaultAutoRelayMembers, relayHopsFor } from './auto-relay.js';
import {
  DEFAULT_DIAL_TIMEOUT_MS,
  DEFAULT_DISCOVERY_INTERVAL_MS,
  DEFAULT_EXPECTED_DELAY_MS,
  DEFAULT_GOSSIP_INTERVAL_MS,
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_INBOUND_CONNECTION_THRESHOLD,
  DEFAULT_LISTEN,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_MAX_SYNC_BYTES,
  DEFAULT_MESH_DEGREE,
  DEFAULT_SYNC_TIMEOUT_MS,
  defaultDepartAfterMs,
  defaultStaleAfterMs,
} from './constants.js';
import { MAX_RELAY_FANOUT, MAX_RELAY_MAC_PEERS } from './direct-gossip.js';
import { type BootstrapEntry, parseBootstrap } from './discovery.js';
import type { EngineFactory } from './engine-port.js';
import { generateIdentity, identityFromProtobuf } from './identity.js';
import { JOIN_TIMEOUT_MS } from './join.js';
import { stderrLogger } from './logger.js';
import { DEFAULT_RELAY_MAC_PEERS } from './relay-mac.js';
import { swarmKeyProblem } from './swarm-key.js';
import type { Logger, MeshLimiterOptions, RelayMode } from './types.js';

/** MeshLimiterOptions parsed once: defaults filled, every field checked. */
export interface MeshConfig {
  policies: readonly PolicySpec[];
  listen: readonly string[];
  bootstrap: readonly BootstrapEntry[];
  privateKey: PrivateKey;
  /** The identity was made at this start (no `privateKey` given): no earlier run had the id. */
  freshId: boolean;
  psk: Uint8Array | undefined;
  insecure: boolean;
  snapshotFile: string | undefined;
  gossipIntervalMs: number;
  expectedDelayMs: number;
  /** 'auto', 0 (off) or an interval under gossipIntervalMs: see MeshOptions.fastGossipIntervalMs. */
  fastGossipIntervalMs: number | 'auto';
  logger: Logger;
  clock: Clock;
  injectDelayMs: number;
  injectLoss: number;
  injectSeed: number;
  meshDegree: { D: number; Dlo: number; Dhi: number };
  relay: RelayMode;
  /** The fanout at start (0: broadcast); under `relayAuto` the mesh changes it as membership does. */
  relayFanout: number;
  /** `relayFanout: 'auto'` (the default): the mesh chooses broadcast or relay from the membership it sees. */
  relayAuto: boolean;
  /** 'auto': relay once more members than this are seen (src/mesh/auto-relay.ts). */
  autoRelayMembers: number;
  /** The engine's relayHops at start (0 in broadcast mode). */
  relayHops: number;
  /** relayHops as given (undefined: from the membership when relaying). */
  relayHopsOption: number | undefined;
  /** Relay mode: members our items carry a MAC for (0: signatures only). */
  relayMacPeers: number;
  /** 0: dial every bootstrap entry. */
  dialPeers: number;
  heartbeatMs: number;
  maxMessageBytes: number;
  maxSyncBytes: number;
  syncTimeoutMs: number;
  discoveryIntervalMs: number;
  joinTimeoutMs: number;
  departAfterMs: number;
  dialTimeoutMs: number;
  inboundConnectionThreshold: number;
  maxConnections: number;
  engineFactory: EngineFactory | undefined;
}

const KNOWN = new Set<string>([
  'policies',
  'listen',
  'bootstrap',
  'privateKey',
  'psk',
  'insecure',
  'snapshotFile',
  'gossipIntervalMs',
  'expectedDelayMs',
  'fastGossipIntervalMs',
  'gossipRounds',
  'logger',
  'clock',
  'injectDelayMs',
  'injectLoss',
  'injectSeed',
  'meshDegree',
  'relay',
  'relayFanout',
  'autoRelayMembers',
  'relayHops',
  'relayMacPeers',
  'dialPeers',
  'heartbeatMs',
  'maxMessageBytes',
  'maxSyncBytes',
  'syncTimeoutMs',
  'discoveryIntervalMs',
  'joinTimeoutMs',
  'departAfterMs',
  'dialTimeoutMs',
  'inboundConnectionThreshold',
  'maxConnections',
  'engineFactory',
]);

/** A number option in `min..max` (an integer when `whole`), or `dflt` when left out. */
function num(field: string, value: unknown, dflt: number, min: number, max: number, whole = false): number {
  return optional(value, dflt, (v) => (whole ? integer(v, field, min, max) : finite(v, field, min, max)));
}

/** Validates every option (errors are CONFIG_INVALID naming the field) and fills the defaults. */
export function parseOptions(opts: MeshLimiterOptions): MeshConfig {
  if (opts === null || typeof opts !== 'object') fail('options', 'must be an object');
  for (const k of Object.keys(opts)) {
    if (!KNOWN.has(k)) fail(k, 'unknown option');
  }
  if (!Array.isArray(opts.policies) || opts.policies.length === 0) {
    fail('policies', 'must be a non-empty array of policies');
  }
  const listen = optional(opts.listen, DEFAULT_LISTEN, (v) => stringArray(v, 'listen'));
  if (listen.length === 0) fail('listen', 'must name at least one address');
  listen.forEach((a, i) => {
    try {
      multiaddr(a);
    } catch (err) {
      fail(`listen[${i}]`, `not a multiaddr (${(err as Error).message}): ${JSON.stringify(a)}`);
    }
  });
  const bootstrap = parseBootstrap(optional(opts.bootstrap, [], (v) => stringArray(v, 'bootstrap')));

  const keyBytes = optional(opts.privateKey, undefined, (v) => bytes(v, 'privateKey'));
  let privateKey: PrivateKey;
  if (keyBytes === undefined) {
    privateKey = generateIdentity();
  } else {
    try {
      privateKey = identityFromProtobuf(keyBytes);
    } catch (err) {
      fail('privateKey', `not a protobuf-encoded libp2p private key (${(err as Error).message})`);
    }
  }
  const psk = optional(opts.psk, undefined, (v) => bytes(v, 'psk'));
  if (psk !== undefined) {
    const problem = swarmKeyProblem(psk);
    if (problem !== undefined)
      fail('psk', `not a libp2p swarm key file (/key/swarm/psk/1.0.0/) (${problem})`);
  }

  if (opts.insecure !== undefined && typeof opts.insecure !== 'boolean')
    fail('insecure', 'must be true or false');
  const insecure = opts.insecure === true;
  // Secure by default: a node that listens on, or dials, anything but loopback shares a psk.
  const exposed = [
    ...listen.map((a, i) => [`listen[${i}]`, a, isLoopbackMultiaddr(a)] as const),
    ...bootstrap.map(
      (b, i) =>
        [
          `bootstrap[${i}]`,
          b.text,
          b.kind === 'dns' ? b.name === 'localhost' : isLoopbackMultiaddr(b.text),
        ] as const,
    ),
  ].filter(([, , loop]) => !loop);
  if (psk === undefined && exposed.length > 0 && !insecure) {
    const [field, addr] = exposed[0]!;
    fail(
      field,
      `${JSON.stringify(addr)} is not a loopback address: a mesh reachable from other hosts needs a psk ` +
        '(ratemesh psk --out FILE; give it to every member), or insecure: true to run open (anyone who reaches ' +
        'the port can join and gossip counts)',
    );
  }

  // whole ms, as the engine takes them
  const gossipIntervalMs = num(
    'gossipIntervalMs',
    opts.gossipIntervalMs,
    DEFAULT_GOSSIP_INTERVAL_MS,
    1,
    60_000,
    true,
  );
  const expectedDelayMs = num(
    'expectedDelayMs',
    opts.expectedDelayMs,
    DEFAULT_EXPECTED_DELAY_MS,
    0,
    60_000,
    true,
  );
  const fg: unknown = opts.fastGossipIntervalMs;
  if (
    !(fg === undefined || fg === 'auto' || fg === 0) &&
    !(typeof fg === 'number' && Number.isInteger(fg) && fg >= 1 && fg <= gossipIntervalMs)
  )
    fail(
      'fastGossipIntervalMs',
      `must be 'auto', 0 (off) or whole ms from 1 to gossipIntervalMs (${gossipIntervalMs}) (got ${shown(fg)})`,
    );
  const fastGossipIntervalMs = fg === undefined ? 'auto' : (fg as number | 'auto');

  const rounds: unknown = opts.gossipRounds;
  if (rounds === 'aligned')
    fail(
      'gossipRounds',
      '\'aligned\' was removed: aligned rounds admitted less and denied more than spread rounds on every row measured (docs/decision-rule.md, "Removed by this rule"); leave gossipRounds out',
    );
  if (rounds !== undefined && rounds !== 'spread')
    fail('gossipRounds', `must be 'spread', the only schedule (got ${JSON.stringify(rounds)})`);

  const logger = opts.logger ?? stderrLogger;
  for (const m of ['debug', 'info', 'warn', 'error'] as const) {
    if (typeof (logger as unknown as Record<string, unknown>)[m] !== 'function') {
      fail('logger', `must have a ${m}(obj, msg) method`);
    }
  }
  const clock = opts.clock ?? systemClock;
  if (typeof clock?.now !== 'function') fail('clock', 'must have a now() method');

  const degree = opts.meshDegree ?? DEFAULT_MESH_DEGREE;
  if (degree === null || typeof degree !== 'object') fail('meshDegree', 'must be { D, Dlo, Dhi }');
  const D = num('meshDegree.D', degree.D, 0, 1, 64, true);
  const Dlo = num('meshDegree.Dlo', degree.Dlo, 0, 1, 64, true);
  const Dhi = num('meshDegree.Dhi', degree.Dhi, 0, 1, 64, true);
  if (!(Dlo <= D && D <= Dhi)) fail('meshDegree', `needs Dlo <= D <= Dhi (got ${Dlo}, ${D}, ${Dhi})`);

  const relay = opts.relay ?? 'auto';
  if (relay !== 'auto' && relay !== 'always' && relay !== 'never') {
    fail('relay', `must be 'auto', 'always' or 'never' (got ${JSON.stringify(String(relay))})`);
  }

  // 'auto' (the default): broadcast while the membership is small, relay past autoRelayMembers
  // (src/mesh/auto-relay.ts); a number forces it (0: broadcast)
  const relayAuto = opts.relayFanout === undefined || opts.relayFanout === 'auto';
  const rf = opts.relayFanout;
  if (!relayAuto && !(typeof rf === 'number' && Number.isInteger(rf) && rf >= 0 && rf <= MAX_RELAY_FANOUT))
    fail(
      'relayFanout',
      `must be 'auto' or an integer in 0..${MAX_RELAY_FANOUT} (got ${typeof rf === 'number' ? rf : JSON.stringify(String(rf))})`,
    );
  const autoRelayMembers = num(
    'autoRelayMembers',
    opts.autoRelayMembers,
    defaultAutoRelayMembers(gossipIntervalMs),
    2,
    1_000_000,
    true,
  );
  if (!relayAuto && opts.autoRelayMembers !== undefined)
    fail('autoRelayMembers', "applies to relayFanout: 'auto' only (relayFanout is set)");
  // at start the membership a node expects is itself and its bootstrap entries (the engine's
  // expectedMembers); a DNS name counts one, and the mesh switches once it hears more
  const startMembers = 1 + bootstrap.length;
  const relayFanout = relayAuto ? autoRelayFanout(startMembers, autoRelayMembers, false) : (rf as number);
  // 0..64 ('auto': used whenever it relays, at least 1), 1..64 with a relayFanout forced on
  const relayHopsOption = optional(opts.relayHops, undefined, (v) =>
    integer(v, 'relayHops', relayFanout > 0 && !relayAuto ? 1 : 0, MAX_RELAY_HOPS),
  );
  // at least 1 when relaying: the engine then sends whole windows and allows for a hop (a short
  // bootstrap list says little of the mesh's size)
  const relayHops =
    relayFanout > 0 ? Math.max(1, relayHopsOption ?? relayHopsFor(startMembers, relayFanout)) : 0;
  const dialPeers = num(
    'dialPeers',
    opts.dialPeers,
    // 'auto' dials every entry: a node may broadcast again when the mesh shrinks
    relayFanout > 0 && !relayAuto ? Math.max(6, 2 * relayFanout) : 0,
    0,
    4_096,
    true,
  );

  if (opts.engineFactory !== undefined && typeof opts.engineFactory !== 'function') {
    fail('engineFactory', 'must be a function');
  }

  return {
    policies: opts.policies,
    listen,
    bootstrap,
    privateKey,
    freshId: keyBytes === undefined,
    psk,
    insecure: insecure && psk === undefined && exposed.length > 0,
    snapshotFile: snapshotFileOption(opts.snapshotFile),
    gossipIntervalMs,
    expectedDelayMs,
    fastGossipIntervalMs,
    logger,
    clock,
    injectDelayMs: num('injectDelayMs', opts.injectDelayMs, 0, 0, 60_000),
    injectLoss: num('injectLoss', opts.injectLoss, 0, 0, 1),
    injectSeed: num(
      'injectSeed',
      opts.injectSeed,
      (Math.random() * 0xffffffff) >>> 0 || 1,
      1,
      0xffffffff,
      true,
    ),
    meshDegree: { D, Dlo, Dhi },
    relay,
    relayFanout,
    relayAuto,
    autoRelayMembers,
    relayHops,
    relayHopsOption,
    relayMacPeers: num(
      'relayMacPeers',
      opts.relayMacPeers,
      DEFAULT_RELAY_MAC_PEERS,
      0,
      MAX_RELAY_MAC_PEERS,
      true,
    ),
    dialPeers,
    heartbeatMs: num('heartbeatMs', opts.heartbeatMs, DEFAULT_HEARTBEAT_MS, 50, 60_000),
    maxMessageBytes: num(
      'maxMessageBytes',
      opts.maxMessageBytes,
      DEFAULT_MAX_MESSAGE_BYTES,
      64,
      64 * 2 ** 20,
      true,
    ),
    maxSyncBytes: num('maxSyncBytes', opts.maxSyncBytes, DEFAULT_MAX_SYNC_BYTES, 1024, 256 * 2 ** 20, true),
    syncTimeoutMs: num('syncTimeoutMs', opts.syncTimeoutMs, DEFAULT_SYNC_TIMEOUT_MS, 100, 600_000),
    discoveryIntervalMs: num(
      'discoveryIntervalMs',
      opts.discoveryIntervalMs,
      DEFAULT_DISCOVERY_INTERVAL_MS,
      100,
      3_600_000,
    ),
    joinTimeoutMs: num('joinTimeoutMs', opts.joinTimeoutMs, JOIN_TIMEOUT_MS, 0, 3_600_000),
    departAfterMs: num(
      'departAfterMs',
      opts.departAfterMs,
      defaultDepartAfterMs(defaultStaleAfterMs(gossipIntervalMs, expectedDelayMs)),
      gossipIntervalMs,
      86_400_000,
      true,
    ),
    dialTimeoutMs: num('dialTimeoutMs', opts.dialTimeoutMs, DEFAULT_DIAL_TIMEOUT_MS, 100, 600_000),
    inboundConnectionThreshold: num(
      'inboundConnectionThreshold',
      opts.inboundConnectionThreshold,
      DEFAULT_INBOUND_CONNECTION_THRESHOLD,
      1,
      1_000_000,
      true,
    ),
    maxConnections: num('maxConnections', opts.maxConnections, DEFAULT_MAX_CONNECTIONS, 1, 100_000, true),
    engineFactory: opts.engineFactory,
  };
}

/** True for /ip4/127.x, /ip6/::1 and /dns, /dns4 or /dns6 localhost multiaddrs (any transport after them). */
export function isLoopbackMultiaddr(text: string): boolean {
  return (
    /^\/ip4\/127\.\d+\.\d+\.\d+(\/|$)/.test(text) ||
    /^\/ip6\/::1(\/|$)/.test(text) ||
    /^\/dns[46]?\/localhost(\/|$)/.test(text)
  );
}

function snapshotFileOption(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0 || v.length > 4096 || v.includes('\0'))
    fail('snapshotFile', 'must be a file path (a non-empty string)');
  return v as string;
}
