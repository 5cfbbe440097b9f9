import type { Clock } from '../clock.js';
import { expectedRelayHops } from '../decision/constants.js';
import { Engine, type EngineOptions } from '../decision/engine.js';
import { autoRelayFanout, defaultAutoRelayMembers } from '../mesh/auto-relay.js';
import { varintLength } from '../mesh/frame-decoder.js';
import { DEFAULT_RELAY_MAC_PEERS, MAC_ENTRY_BYTES } from '../mesh/relay-mac.js';
import type { Decision, PolicySpec } from '../types.js';
import { EventQueue } from './event-queue.js';
import { Prng } from './prng.js';
import type { Trace } from './trace.js';

/** A node cut off from every other node during [fromMs, toMs). */
export interface Cut {
  node: number;
  fromMs: number;
  toMs: number;
}

/** Options of a simulated mesh. */
export interface SimOptions {
  nodes: number;
  policies: readonly PolicySpec[];
  /** Gossip tick interval g, ms. */
  gossipIntervalMs: number;
  /** One-way gossip delay d, ms (every link). */
  delayMs: number;
  /** Extra uniform random delay in [0, jitterMs), ms. Default 0. */
  jitterMs?: number;
  /**
   * Each gossip tick fires late by a uniform random [0, tickLateMs), ms, as a real timer does (a
   * mesh node's tick is a setTimeout on a busy event loop); the next tick keeps its mark. Default 0.
   */
  tickLateMs?: number;
  /** Fraction of gossip messages lost, per receiver. Default 0. */
  loss?: number;
  /** Per node, when it first ticks, ms (default: spread evenly, {@link spreadPhaseMs}); then every g. */
  phasesMs?: readonly number[];
  /** PRNG seed for loss and jitter. Default 1. */
  seed?: number;
  cuts?: readonly Cut[];
  /** Per-node wall-clock skew, ms (node clock = true time + skew). */
  skewMs?: readonly number[];
  /**
   * Extra engine options (gossipIntervalMs and expectedDelayMs default to the above; with
   * `relay`, relayHops to {@link expectedRelayHops} of the node count and the fanout).
   */
  engine?: Partial<EngineOptions>;
  /**
   * While its engine asks (Engine.wantsFastGossip: a tight key), a node's next tick comes after
   * this many ms instead of g, as the live mesh's does (fastGossipIntervalMs). 0 or absent: off.
   */
  fastGossipMs?: number;
  /** Publish early when an engine asks (as the live mesh does). Default true. */
  earlyPublish?: boolean;
  /** Run a sync round trip between every pair at start (estimates clock offsets). Default false. */
  syncAtStart?: boolean;
  /** Simulated start time (epoch ms); all times are relative to it. Default 1.7e12. */
  epochMs?: number;
  /** Time the engine calls (adds a clock read around each). Default false. */
  timeEngine?: boolean;
  /**
   * How gossip travels. `broadcast` (default): each node's message goes straight to every
   * other node. `relay`: once a tick each node sends one batch to `fanout` random peers,
   * holding its own message and every origin's message it learned since its last tick
   * (the newest of each origin only), less what the target certainly holds (its own
   * messages, and those it sent this node); a receiver merges what is newer than it holds.
   * Relayed copies reach the engine marked as such (no clock-offset sample). `macPeers`: each
   * item also carries its origin's MAC list, one 12-byte entry per other member up to this many
   * (the live mesh's relayMacPeers, default 64; 0: none), counted in the bytes only.
   * `'auto'`: what a mesh node does with `relayFanout` left out ('auto', src/mesh/auto-relay.ts)
   * when every node sees all `nodes` members: broadcast up to defaultAutoRelayMembers(g), relay at
   * its fanout above (the node count is fixed here: no switch at run time).
   */
  relay?: { fanout: number; macPeers?: number } | 'auto';
}

/** Bytes an origin's message costs inside a relay batch beyond its own: a signature, an origin reference, framing. */
export const RELAY_ITEM_OVERHEAD = 64 + 4 + 2;

/** Spread rounds: node `i` of `n` first ticks at i·g/N, as mesh nodes started at random moments do. */
export function spreadPhaseMs(i: number, n: number, g: number): number {
  return (i * g) / n;
}

/** Bytes of an item's MAC list among `nodes` members (the live kind 7 frame): its count (a uvarint) and the entries. */
export function macListBytes(nodes: number, macPeers = DEFAULT_RELAY_MAC_PEERS): number {
  const c = Math.max(0, Math.min(nodes - 1, macPeers));
  return varintLength(c) + c * MAC_ENTRY_BYTES;
}

interface RelayItem {
  origin: number;
  /** The origin's engine id when it sent it (a replaced node gets a new one). */
  from: string;
  seq: number;
  bytes: Uint8Array;
}

/** A clock whose reading the simulator sets. */
class SimClock implements Clock {
  t = 0;
  constructor(private readonly skew: number) {}
  now(): number {
    return this.t + this.skew;
  }
}

/**
 * N nodes, each running the production {@link Engine} (decision code and CRDT,
 * no copy), on a virtual clock and an in-memory network with delay, jitter,
 * loss and partitions. Gossip goes directly from each node to every other node
 * with the configured delay (a gossipsub mesh can add hops: the live mesh
 * measures that). Deterministic for a given seed.
 */
export class Simulator {
  readonly engines: Engine[];
  readonly ids: string[];
  private readonly clocks: SimClock[];
  private readonly queue = new EventQueue();
  private readonly prng: Prng;
  private readonly epoch: number;
  private time = 0;
  /** Gossip messages sent, and their bytes, over all nodes. */
  messages = 0;
  /** Ticks after which a node's next came at the fast interval (fastGossipMs). */
  fastTicks = 0;
  bytes = 0;
  delivered = 0;
  lost = 0;
  /** Bytes of the messages delivered (received), over all nodes. */
  deliveredBytes = 0;
  /** The largest message sent, bytes. */
  maxMessageBytes = 0;
  /** Wall time spent in engine calls (decisions, building and receiving gossip), ms; counted when `timeEngine`. */
  engineMs = 0;

  /** How gossip travels: `opts.relay` with 'auto' resolved (undefined: broadcast). */
  readonly relay: { fanout: number; macPeers?: number } | undefined;

  constructor(readonly opts: SimOptions) {
    if ((opts as { rounds?: unknown }).rounds === 'aligned')
      throw new Error(
        'rounds: \'aligned\' was removed (docs/decision-rule.md, "Removed by this rule"); every node ticks on its own phase',
      );
    const n = opts.nodes;
    if (opts.relay === 'auto') {
      const f = autoRelayFanout(n, defaultAutoRelayMembers(opts.gossipIntervalMs), false);
      this.relay = f > 0 ? { fanout: f } : undefined;
    } else this.relay = opts.relay;
    this.epoch = opts.epochMs ?? 1.7e12;
    this.prng = new Prng(opts.seed ?? 1);
    this.ids = Array.from({ length: n }, (_, i) => `node-${i}`);
    this.clocks = this.ids.map((_, i) => new SimClock(opts.skewMs?.[i] ?? 0));
    this.engines = this.ids.map((id, i) => this.newEngine(id, i));
    const g = opts.gossipIntervalMs;
    for (let i = 0; i < n; i++) {
      this.scheduleTick(i, opts.phasesMs?.[i] ?? spreadPhaseMs(i, n, g));
    }
    if (opts.syncAtStart) this.at(0, () => this.syncAll());
  }

  private newEngine(id: string, i: number, extra: Partial<EngineOptions> = {}): Engine {
    const relay = this.relay;
    return new Engine({
      gossipIntervalMs: this.opts.gossipIntervalMs,
      expectedDelayMs: this.opts.delayMs,
      ...(relay === undefined ? {} : { relayHops: expectedRelayHops(this.opts.nodes, relay.fanout) }),
      ...this.opts.engine,
      ...extra,
      policies: this.opts.policies,
      nodeId: id,
      clock: this.clocks[i]!,
    });
  }

  /** Ids given out by {@link replace}, since start. */
  replaced = 0;

  /**
   * Replace node `node` by a fresh process with a fresh id (a pod of a rolling
   * deploy): the old one stops at once (its messages in flight still arrive),
   * the new one expects every member (so it starts on L/N) and, by default,
   * pulls every other node's state by sync as the live mesh does on join.
   * `graceful`: the old one stops as a mesh node's `stop()` does, its farewell its last
   * message ({@link leave}); else it vanishes (kill -9). Returns the new id.
   */
  replace(node: number, opts: { sync?: boolean; graceful?: boolean } = {}): string {
    if (opts.graceful === true) this.leave(node);
    this.replaced++;
    const id = `node-${node}.${this.replaced}`;
    this.ids[node] = id;
    this.engines[node] = this.newEngine(id, node, { expectedMembers: this.engines.length });
    if (opts.sync !== false) this.syncFrom(node);
    return id;
  }

  /**
   * Node `node` stops gracefully: its engine's farewell (Engine.farewell) goes out now as its
   * last message, and it decides no global policy after; its ticks, until it is replaced, send
   * the farewell again.
   */
  leave(node: number): void {
    const bytes = this.engines[node]!.farewell();
    if (bytes !== undefined) this.publishBytes(node, bytes);
  }

  /** Current virtual time, ms since the start. */
  get now(): number {
    return this.time;
  }

  /** Run `fn` at virtual time `t` (ms since start). */
  at(t: number, fn: () => void): void {
    this.queue.push(t, fn);
  }

  private setTime(t: number): void {
    this.time = t;
    const abs = this.epoch + t;
    for (const c of this.clocks) c.t = abs;
  }

  /** Process every event up to and including time `t`. */
  runUntil(t: number): void {
    while (this.queue.peekTime() <= t) {
      this.setTime(this.queue.peekTime());
      this.queue.pop()();
    }
    this.setTime(t);
  }

  isCut(node: number, t: number): boolean {
    const cuts = this.opts.cuts;
    if (cuts === undefined) return false;
    for (const c of cuts) if (c.node === node && t >= c.fromMs && t < c.toMs) return true;
    return false;
  }

  /** A request at node `node` now; publishes early if the engine asks. */
  request(node: number, policy: string, key: string, cost = 1): Decision {
    const e = this.engines[node]!;
    const t0 = this.opts.timeEngine ? performance.now() : 0;
    const d = e.check(policy, key, cost);
    if (this.opts.timeEngine) this.engineMs += performance.now() - t0;
    if (this.opts.earlyPublish !== false && e.wantsEarlyPublish()) this.publish(node);
    this.hurryTick(node);
    return d;
  }

  // ---- owner placement (issue 27): src/sim/owner-sim.ts asks owners over these links ----
  /** Publish node `node`'s message now if its engine asks for an early publish (as {@link request} does). */
  publishIfEarly(node: number): void {
    if (this.opts.earlyPublish !== false && this.engines[node]!.wantsEarlyPublish()) this.publish(node);
  }
  // ---- end of owner placement ----

  /** Per node, the mark of its pending tick and that tick's number (a re-armed tick drops the older). */
  private tickMark: number[] = [];
  private tickGen: number[] = [];

  private scheduleTick(node: number, t: number): void {
    const late = this.opts.tickLateMs ? this.prng.next() * this.opts.tickLateMs : 0;
    const gen = (this.tickGen[node] ?? 0) + 1;
    this.tickGen[node] = gen;
    this.tickMark[node] = t;
    this.at(t + late, () => {
      if (this.tickGen[node] !== gen) return;
      this.publish(node);
      // the engine's late sync (a pod replaced as this one joined is stale at its peers by now)
      if (this.engines[node]!.lateSyncDue()) this.syncFrom(node);
      // the next mark: g after this one's (a late tick does not move it), or the fast interval
      // while the engine asks for it
      const f = this.opts.fastGossipMs ?? 0;
      const fast = f > 0 && this.engines[node]!.wantsFastGossip();
      if (fast) this.fastTicks++;
      this.scheduleTick(node, t + (fast ? f : this.opts.gossipIntervalMs));
    });
  }

  /** A node whose engine now asks for fast gossip, its next tick further off than that: re-armed (as the mesh's armTick). */
  private hurryTick(node: number): void {
    const f = this.opts.fastGossipMs ?? 0;
    if (f > 0 && this.tickMark[node]! > this.time + f && this.engines[node]!.wantsFastGossip())
      this.scheduleTick(node, this.time + f);
  }

  /** Relay, per node: the origins queued for its next batch, and per origin the item and who sent it. */
  private outList: number[][] = [];
  private outItem: (RelayItem | undefined)[][] = [];
  private outVia: Int32Array[] = [];
  /** Relay, per node and origin: the newest sequence number held, and of which id (a replaced node gets a new one). */
  private heldSeq: Float64Array[] = [];
  private heldFrom: (string | undefined)[][] = [];
  private ownSeq: number[] = [];

  private publish(node: number): void {
    const t0 = this.opts.timeEngine ? performance.now() : 0;
    const bytes = this.engines[node]!.buildGossip();
    if (this.opts.timeEngine) this.engineMs += performance.now() - t0;
    this.publishBytes(node, bytes);
  }

  /** Node `node`'s message `bytes` to every other node (or, relay, to its fanout). */
  private publishBytes(node: number, bytes: Uint8Array): void {
    this.messages++;
    this.bytes += bytes.length;
    if (this.relay !== undefined) {
      this.relayPublish(node, bytes);
      return;
    }
    if (bytes.length > this.maxMessageBytes) this.maxMessageBytes = bytes.length;
    const from = this.ids[node]!;
    const deliver = (target: Engine): void => {
      target.receiveGossip(from, bytes);
    };
    for (let to = 0; to < this.engines.length; to++)
      if (to !== node) this.send(node, to, bytes.length, deliver);
  }

  /**
   * One message of `size` bytes over the link node → to, sent now: cuts, loss and jitter applied;
   * on arrival (unless cut, or `to` was replaced meanwhile) it is counted and `deliver` runs,
   * timed as engine work.
   */
  private send(node: number, to: number, size: number, deliver: (target: Engine, to: number) => void): void {
    const sent = this.time;
    const target = this.engines[to]!;
    if (this.isCut(node, sent) || this.isCut(to, sent)) {
      this.lost++;
      return;
    }
    if (this.opts.loss !== undefined && this.opts.loss > 0 && this.prng.next() < this.opts.loss) {
      this.lost++;
      return;
    }
    const jitter = this.opts.jitterMs ? this.prng.next() * this.opts.jitterMs : 0;
    const arrive = sent + this.opts.delayMs + jitter;
    this.at(arrive, () => {
      if (this.isCut(node, arrive) || this.isCut(to, arrive)) {
        this.lost++;
        return;
      }
      // a process replaced meanwhile never sees it
      if (this.engines[to] !== target) return;
      this.delivered++;
      this.deliveredBytes += size;
      const t1 = this.opts.timeEngine ? performance.now() : 0;
      deliver(target, to);
      if (this.opts.timeEngine) this.engineMs += performance.now() - t1;
    });
  }

  private relayPublish(node: number, bytes: Uint8Array): void {
    const n = this.engines.length;
    while (this.outList.length < n) {
      this.outList.push([]);
      this.outItem.push(new Array<RelayItem | undefined>(n).fill(undefined));
      this.outVia.push(new Int32Array(n).fill(-1));
      this.heldSeq.push(new Float64Array(n).fill(-1));
      this.heldFrom.push(new Array<string | undefined>(n).fill(undefined));
      this.ownSeq.push(0);
    }
    const seq = ++this.ownSeq[node]!;
    // the batch: its own message, then the newest of each origin learned since its last tick
    const list = this.outList[node]!;
    const box = this.outItem[node]!;
    const via = this.outVia[node]!;
    const items: RelayItem[] = [{ origin: node, from: this.ids[node]!, seq, bytes }];
    const vias: number[] = [-1];
    for (const o of list) {
      items.push(box[o]!);
      vias.push(via[o]!);
      box[o] = undefined;
    }
    list.length = 0;
    const f = Math.min(this.relay!.fanout, n - 1);
    // f distinct targets other than `node`, uniformly
    const picked: number[] = [];
    while (picked.length < f) {
      let to = Math.floor(this.prng.next() * (n - 1));
      if (to >= node) to++;
      if (!picked.includes(to)) picked.push(to);
    }
    // a target is not sent what it certainly holds: its own message, or one it sent us
    const skip = (k: number, to: number): boolean => items[k]!.origin === to || vias[k] === to;
    const deliver = (target: Engine, to: number): void => {
      const hs = this.heldSeq[to]!;
      const hf = this.heldFrom[to]!;
      const out = this.outItem[to]!;
      const outVia = this.outVia[to]!;
      const outList = this.outList[to]!;
      for (let k = 0; k < items.length; k++) {
        if (skip(k, to)) continue;
        const it = items[k]!;
        const o = it.origin;
        if (hf[o] === it.from && hs[o]! >= it.seq) continue;
        hf[o] = it.from;
        hs[o] = it.seq;
        target.receiveGossip(it.from, it.bytes, undefined, o !== node);
        const queued = out[o];
        if (queued === undefined) outList.push(o);
        if (queued === undefined || queued.seq < it.seq || queued.from !== it.from) {
          out[o] = it;
          outVia[o] = node;
        }
      }
    };
    const perItem = RELAY_ITEM_OVERHEAD + macListBytes(n, this.relay!.macPeers);
    for (const to of picked) {
      let size = 4;
      for (let k = 0; k < items.length; k++) if (!skip(k, to)) size += items[k]!.bytes.length + perItem;
      if (size > this.maxMessageBytes) this.maxMessageBytes = size;
      this.send(node, to, size, deliver);
    }
  }

  /** Every node pulls every other node's state (request and answer travel with the link delay). */
  private syncAll(): void {
    for (let a = 0; a < this.engines.length; a++) this.syncFrom(a);
  }

  /** Node `a` pulls every other node's state. */
  private syncFrom(a: number): void {
    const d = this.opts.delayMs;
    const ea = this.engines[a]!;
    const ida = this.ids[a]!;
    for (let b = 0; b < this.engines.length; b++) {
      if (a === b) continue;
      const eb = this.engines[b]!;
      const idb = this.ids[b]!;
      const req = ea.buildSyncRequest();
      this.at(this.time + d, () => {
        const res = eb.answerSync(ida, req);
        if (!(res instanceof Uint8Array)) return;
        this.at(this.time + d, () => ea.receiveSyncResponse(idb, res));
      });
    }
  }
}

/** What a trace replay admitted. */
export interface ReplayResult {
  /** Arrival times (ms since start) of admitted requests, ascending. */
  admitted: number[];
  admittedByNode: number[];
  offeredByNode: number[];
  messages: number;
  bytes: number;
  durationMs: number;
  sim: Simulator;
}

/** Replay a trace: each request to its node, one key, cost 1. */
export function replayTrace(
  trace: Trace,
  opts: SimOptions,
  policy: string,
  key = 'global',
  onRequest?: (i: number, node: number, d: Decision, sim: Simulator) => void,
): ReplayResult {
  const sim = new Simulator(opts);
  const admitted: number[] = [];
  const admittedByNode = new Array<number>(opts.nodes).fill(0);
  const offeredByNode = new Array<number>(opts.nodes).fill(0);
  const n = trace.t.length;
  for (let i = 0; i < n; i++) {
    const t = trace.t[i]!;
    const node = trace.node[i]!;
    sim.runUntil(t);
    const d = sim.request(node, policy, key);
    offeredByNode[node]!++;
    if (d.allowed) {
      admitted.push(t);
      admittedByNode[node]!++;
    }
    onRequest?.(i, node, d, sim);
  }
  const durationMs = n > 0 ? trace.t[n - 1]! + 0.5 : 0;
  return {
    admitted,
    admittedByNode,
    offeredByNode,
    messages: sim.messages,
    bytes: sim.bytes,
    durationMs,
    sim,
  };
}
