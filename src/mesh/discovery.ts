import './polyfill.js';
import { lookup } from 'node:dns/promises';
import { setMaxListeners } from 'node:events';
import { isIP } from 'node:net';
import { type Multiaddr, multiaddr } from '@multiformats/multiaddr';
import { ErrorCodes, RateMeshError } from '../errors.js';
import { deadline } from './deadline.js';
import type { MeshNode } from './node.js';
import type { Logger } from './types.js';

const CODE_IP4 = 4;
const CODE_IP6 = 41;
const CODE_TCP = 6;
const CODE_P2P = 421;

/** One parsed `bootstrap` entry. */
export type BootstrapEntry =
  | { kind: 'static'; addr: Multiaddr; peerId: string | undefined; text: string }
  | { kind: 'dns'; name: string; port: number; text: string };

/** Resolves a name to every address it has (A and AAAA); injectable for tests. */
export type Resolver = (name: string) => Promise<string[]>;

/** The default resolver: node:dns `lookup` with `all` (reads /etc/hosts too, as Docker service names need). */
export const systemResolver: Resolver = async (name) => {
  const found = await lookup(name, { all: true, verbatim: true });
  return found.map((a) => a.address);
};

/**
 * Parses bootstrap entries: multiaddrs (with or without `/p2p/<id>`) or
 * `dns:<name>:<port>`. Throws CONFIG_INVALID naming `bootstrap[i]`.
 */
export function parseBootstrap(entries: readonly string[]): BootstrapEntry[] {
  return entries.map((text, i) => {
    const field = `bootstrap[${i}]`;
    if (typeof text !== 'string' || text.length === 0) {
      throw new RateMeshError(ErrorCodes.CONFIG_INVALID, 'must be a non-empty string', field);
    }
    if (text.startsWith('dns:')) {
      const rest = text.slice(4);
      const at = rest.lastIndexOf(':');
      const name = rest.slice(0, at);
      const port = Number(rest.slice(at + 1));
      if (at <= 0 || !/^[A-Za-z0-9.-]+$/.test(name) || !Number.isInteger(port) || port < 1 || port > 65535) {
        throw new RateMeshError(
          ErrorCodes.CONFIG_INVALID,
          `expected dns:<name>:<port> with port 1-65535 (got ${JSON.stringify(text)})`,
          field,
        );
      }
      return { kind: 'dns', name, port, text };
    }
    let addr: Multiaddr;
    try {
      addr = multiaddr(text);
    } catch (err) {
      throw new RateMeshError(
        ErrorCodes.CONFIG_INVALID,
        `not a multiaddr (${(err as Error).message}): ${JSON.stringify(text)}`,
        field,
      );
    }
    const parts = addr.getComponents();
    if (!parts.some((c) => c.code === CODE_TCP)) {
      throw new RateMeshError(
        ErrorCodes.CONFIG_INVALID,
        `multiaddr needs a /tcp/<port> part: ${text}`,
        field,
      );
    }
    const p2p = parts.find((c) => c.code === CODE_P2P);
    return { kind: 'static', addr, peerId: p2p?.value, text };
  });
}

/** `ip:port` of a TCP multiaddr, or undefined. */
function hostPort(addr: Multiaddr): string | undefined {
  let ip: string | undefined;
  let port: string | undefined;
  for (const c of addr.getComponents()) {
    if (c.code === CODE_IP4 || c.code === CODE_IP6) ip = c.value;
    else if (c.code === CODE_TCP) port = c.value;
  }
  return ip === undefined || port === undefined ? undefined : `${ip}:${port}`;
}

function tcpMultiaddr(ip: string, port: number): Multiaddr {
  return multiaddr(`/${isIP(ip) === 6 ? 'ip6' : 'ip4'}/${ip}/tcp/${port}`);
}

function shuffle<T>(a: T[]): void {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    const t = a[i]!;
    a[i] = a[j]!;
    a[j] = t;
  }
}

/** Why a dial failed (see {@link dialFailureReason}). */
export type DialFailure = 'encryption' | 'refused' | 'timeout' | 'unreachable' | 'other';

export interface DiscoveryStats {
  dials: number;
  dialErrors: number;
  /** Failed dials by reason; `encryption` is most likely a psk mismatch. */
  dialFailures: Partial<Record<DialFailure, number>>;
  dnsErrors: number;
  /** Addresses the last round produced (static plus resolved). */
  lastResolved: number;
  /** Rounds whose addresses were known (resolved, or failed to resolve), since start. */
  rounds: number;
  /**
   * Of the last round's addresses, those not this node's own: 0 after a round means no other
   * member to join (the first pod of a headless Service, whose name resolves to itself or to
   * nothing yet), so a start-up has nothing to wait for.
   */
  lastOthers: number;
}

/** Consecutive failures of one address before a refused or timed-out dial is warned about. */
export const WARN_AFTER_FAILURES = 3;

const DIAL_WARNINGS: Record<DialFailure, string> = {
  encryption:
    'ratemesh cannot connect to a bootstrap address: the encrypted handshake failed, most likely a psk mismatch (every member needs the same swarm key; a member without a psk cannot reach one with it)',
  refused: 'ratemesh cannot connect to a bootstrap address: connection refused (no node listens there)',
  timeout:
    'ratemesh cannot connect to a bootstrap address: the dial timed out (dialTimeoutMs; a psk mismatch can also end this way)',
  unreachable: 'ratemesh cannot connect to a bootstrap address: host or network unreachable',
  other: 'ratemesh cannot connect to a bootstrap address',
};

/** Classifies a dial error: `encryption` (noise or pnet failed: a psk mismatch), refused, timeout, unreachable. */
export function dialFailureReason(err: unknown): DialFailure {
  const e = err as { name?: unknown; code?: unknown; message?: unknown; errors?: unknown };
  const text = `${String(e?.name)} ${String(e?.code)} ${String(e?.message)}`;
  if (/EncryptionFailed|InvalidCryptoExchange|psk|pnet|decrypt/i.test(text)) return 'encryption';
  if (/ECONNREFUSED/.test(text)) return 'refused';
  if (/EHOSTUNREACH|ENETUNREACH/.test(text)) return 'unreachable';
  if (/Timeout|timed out|AbortError|aborted|ETIMEDOUT/i.test(text)) return 'timeout';
  if (Array.isArray(e?.errors) && e.errors.length > 0) return dialFailureReason(e.errors[0]);
  return 'other';
}

export interface DiscoveryConfig {
  entries: readonly BootstrapEntry[];
  intervalMs: number;
  dialTimeoutMs: number;
  /**
   * Dial only while connected to fewer than this many peers, and then only as
   * many as are missing, drawn at random from the targets not connected (0 or
   * absent: dial every target). Peers that dial us count.
   */
  maxPeers?: number;
  resolve: Resolver;
  logger: Logger;
  /**
   * After each round: the addresses it found that are not this node's (a DNS name counts every
   * address it resolves to). The mesh tells the engine how many members to expect from it.
   */
  onRound?: (others: number) => void;
}

/**
 * Keeps us connected to the bootstrap set: dials every static address and
 * every address a DNS entry resolves to, now and every `intervalMs`, skipping
 * ones already connected and our own. Peer ids are learned on connect.
 */
/** Discovery's counters before its first round (also what a node without discovery reports). */
export function emptyDiscoveryStats(): DiscoveryStats {
  return {
    dials: 0,
    dialErrors: 0,
    dialFailures: {},
    dnsErrors: 0,
    lastResolved: 0,
    rounds: 0,
    lastOthers: 0,
  };
}

export class Discovery {
  readonly stats: DiscoveryStats = emptyDiscoveryStats();
  /** host:port (or the multiaddr) → consecutive failed dials and the reasons already warned about; a success forgets both. */
  private readonly failing = new Map<string, { n: number; warned: Set<DialFailure> }>();
  /** DNS names whose failure was warned about (until they resolve again). */
  private readonly dnsWarned = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private round: Promise<void> | undefined;
  private abort = new AbortController();
  /** host:port → the peer id found there, so a connected address is not redialled. */
  private readonly learned = new Map<string, string>();

  constructor(
    private readonly node: MeshNode,
    private readonly cfg: DiscoveryConfig,
  ) {}

  start(): void {
    if (this.running || this.cfg.entries.length === 0) return;
    this.running = true;
    this.abort = new AbortController();
    // every exchange in flight listens on this signal until it ends (deadline().clear()); there
    // are as many as links, so Node's warning at 11 listeners is noise in a large mesh
    setMaxListeners(0, this.abort.signal);
    this.kick();
    this.timer = setInterval(() => this.kick(), this.cfg.intervalMs);
  }

  async stop(): Promise<void> {
    this.running = false;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.abort.abort();
    await this.round;
  }

  /** Runs one round unless the previous one is still going. */
  kick(): void {
    if (!this.running || this.round !== undefined) return;
    this.round = this.runRound()
      .catch((err: unknown) => this.cfg.logger.warn({ err: String(err) }, 'ratemesh discovery round failed'))
      .finally(() => {
        this.round = undefined;
      });
  }

  private async targets(): Promise<Array<{ addr: Multiaddr; peerId: string | undefined }>> {
    const out: Array<{ addr: Multiaddr; peerId: string | undefined }> = [];
    for (const e of this.cfg.entries) {
      if (e.kind === 'static') {
        out.push({ addr: e.addr, peerId: e.peerId });
        continue;
      }
      try {
        const ips = await this.cfg.resolve(e.name);
        for (const ip of ips) out.push({ addr: tcpMultiaddr(ip, e.port), peerId: undefined });
        this.dnsWarned.delete(e.name);
      } catch (err) {
        this.stats.dnsErrors++;
        if (this.dnsWarned.has(e.name)) {
          this.cfg.logger.debug({ name: e.name, err: String(err) }, 'ratemesh dns lookup failed');
        } else {
          this.dnsWarned.add(e.name);
          this.cfg.logger.warn(
            { name: e.name, err: String(err) },
            'ratemesh cannot resolve a bootstrap name (retried every discovery interval; a headless Service with no pod yet resolves to nothing)',
          );
        }
      }
      if (!this.running) break;
    }
    return out;
  }

  private async runRound(): Promise<void> {
    const targets = await this.targets();
    this.stats.lastResolved = targets.length;
    const own = new Set<string>();
    for (const a of this.node.getMultiaddrs()) {
      const hp = hostPort(a);
      if (hp !== undefined) own.add(hp);
    }
    const connected = new Set(this.node.getConnections().map((c) => c.remotePeer.toString()));
    const self = this.node.peerId.toString();
    const open: Array<{ addr: Multiaddr; hp: string | undefined }> = [];
    let others = 0;
    for (const t of targets) {
      const hp = hostPort(t.addr);
      if (hp !== undefined && own.has(hp)) continue;
      const known = t.peerId ?? (hp === undefined ? undefined : this.learned.get(hp));
      if (known === self) continue;
      others++;
      if (known !== undefined && connected.has(known)) continue;
      open.push({ addr: t.addr, hp });
    }
    this.stats.lastOthers = others;
    this.stats.rounds++;
    this.cfg.onRound?.(others);
    const max = this.cfg.maxPeers ?? 0;
    let budget = max > 0 ? max - connected.size : Number.POSITIVE_INFINITY;
    if (budget <= 0) return;
    if (max > 0) shuffle(open);
    const dials: Promise<void>[] = [];
    for (const t of open) {
      if (!this.running || budget-- <= 0) break;
      dials.push(this.dial(t.addr, t.hp));
    }
    await Promise.all(dials);
  }

  private async dial(addr: Multiaddr, hp: string | undefined): Promise<void> {
    this.stats.dials++;
    const d = deadline(this.cfg.dialTimeoutMs, this.abort.signal);
    const at = hp ?? addr.toString();
    try {
      const conn = await this.node.dial(addr, { signal: d.signal });
      if (hp !== undefined) this.learned.set(hp, conn.remotePeer.toString());
      this.failing.delete(at);
    } catch (err) {
      if (!this.running) return;
      this.stats.dialErrors++;
      const reason = dialFailureReason(err);
      this.stats.dialFailures[reason] = (this.stats.dialFailures[reason] ?? 0) + 1;
      const f = this.failing.get(at) ?? { n: 0, warned: new Set<DialFailure>() };
      f.n++;
      this.failing.set(at, f);
      // a psk mismatch never heals by itself: said at once; an address that refuses or times
      // out may be a pod still starting: said once it failed WARN_AFTER_FAILURES times in a row
      const warn = !f.warned.has(reason) && (reason === 'encryption' || f.n >= WARN_AFTER_FAILURES);
      if (warn) {
        f.warned.add(reason);
        this.cfg.logger.warn(
          { addr: addr.toString(), reason, failures: f.n, err: String(err) },
          DIAL_WARNINGS[reason],
        );
      } else {
        this.cfg.logger.debug({ addr: addr.toString(), reason, err: String(err) }, 'ratemesh dial failed');
      }
    } finally {
      d.clear();
    }
  }
}
