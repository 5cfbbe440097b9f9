import './polyfill.js';
import type { Connection, PeerId, Stream } from '@libp2p/interface';
import { MAX_KEY_BYTES } from '../keys/key.js';
import type { Decision, DecisionRule, OwnerInfo } from '../types.js';
import { FrameDecoder, readVarint, varintLength, writeVarint } from './frame-decoder.js';
import { lazyWindowUpdates } from './link-tuning.js';
import type { MeshNode } from './node.js';
import type { Logger } from './types.js';

/**
 * The owner protocol (issue 27, docs/owner.md): a node asks a key's owner to decide a request,
 * over one long-lived libp2p stream per owner (noise-authenticated: the answer is credited to the
 * connection's remote peer, and accepted only from the member asked). Asks issued in the same
 * turn of the event loop to the same owner travel in one frame (a batch), and their answers
 * come back in one frame.
 *
 * Frames are varint-length-prefixed (at most {@link MAX_OWNER_FRAME_BYTES}):
 * - ask batch: `1`, count (1..{@link MAX_BATCH}), then per ask: id, policy length, policy (UTF-8),
 *   key length, key (UTF-8), cost (0 = look without spending) — every number a uvarint;
 * - answer batch: `2`, count, then per answer: id, status (0 admitted, 1 limited, 2 refused),
 *   then for 0 and 1: rule code, remaining, retryAfterMs + 1 (0 = never), resetMs, how
 *   (0 decided alone as the settled owner, 1 by the local rule while settling, 2 by the local
 *   rule shared with peers deciding it); for 2: a reason code.
 * Every field is bounded; a frame that breaks any bound ends the stream and is counted.
 */
export const OWNER_PROTOCOL = '/ratemesh/owner/1.0.0';

/** Largest frame either side accepts, bytes. */
export const MAX_OWNER_FRAME_BYTES = 256 * 1024;
/** Most asks in one frame. */
export const MAX_BATCH = 256;
/** Most asks waiting for their answers on one link; more fail at once as `unreachable` (counted `backlog`). */
const MAX_PENDING = 8_192;
/** Longest policy name on the wire (policy/compile.ts allows less). */
const MAX_POLICY_BYTES = 128;
/** Largest number on the wire (uvarints of at most 4 bytes: under 2^28); the engine checks costs against the policy. */
const MAX_WIRE = 0x0ffffffe;
const MAX_COST = MAX_WIRE;

const ASK = 1;
const ANSWER = 2;

const RULES: readonly DecisionRule[] = [
  'allow',
  'global-limit',
  'headroom-share',
  'fallback-share',
  'local-limit',
  'cost-exceeds-limit',
  'owner-unreachable',
];
const REFUSALS = [
  'not-owner',
  'not-member',
  'bad-policy',
  'bad-key',
  'bad-cost',
  'not-placed',
  'error',
  'starting',
];

/** What the owner protocol needs of the engine. */
export interface OwnerEngine {
  answerAsk(
    from: string,
    policy: string,
    key: string,
    cost: number,
    now?: number,
  ): Decision | { refused: string };
}

/** An owner's answer as the asker reads it. */
export interface OwnerAnswer {
  limited: boolean;
  rule: DecisionRule;
  remaining: number;
  retryAfterMs: number;
  resetMs: number;
  /** How the owner decided: alone (undefined), or by the local rule and why. */
  reason?: OwnerInfo['reason'];
  rttMs: number;
}

/** Why an ask got no answer, as Engine.decideWithoutOwner takes it. */
export type AskFailure = 'timeout' | 'unreachable' | 'not-owner' | 'refused';

export interface OwnerServiceStats {
  /** Asks sent, frames they went in, answers accepted, and asks that failed by reason. */
  asks: number;
  /** Streams opened to owners for asking (on a first ask, or ahead of it: {@link OwnerService.warm}). */
  linksOpened: number;
  /**
   * Owner streams, ours and askers', that send yamux's window update only once half the window
   * is used instead of after every frame (lazyWindowUpdates: no update wakes the other side
   * between an ask and its answer); a stream of another shape keeps yamux's way, not counted.
   */
  lazyWindows: number;
  askFrames: number;
  answered: number;
  failed: Record<string, number>;
  /** Asks served as owner, frames read, answers sent. */
  served: number;
  servedFrames: number;
  /** Frames or answers dropped, by reason (bad-frame, unknown-id, backlog, ...). */
  dropped: Record<string, number>;
}

interface Pending {
  resolve: (r: OwnerAnswer | AskFailure) => void;
  timer: NodeJS.Timeout;
  sentAt: number;
}

interface Queued {
  id: number;
  policy: Uint8Array;
  key: Uint8Array;
  cost: number;
}

/** One owner's link: the stream asks go out on and answers come back on. */
interface Link {
  peer: string;
  stream: Stream | undefined;
  opening: Promise<Stream | undefined> | undefined;
  pending: Map<number, Pending>;
  queue: Queued[];
  flushing: boolean;
  decoder: FrameDecoder;
}

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

function toBytes(data: Uint8Array | { subarray(): Uint8Array }): Uint8Array {
  return data instanceof Uint8Array ? data : data.subarray();
}

export class OwnerService {
  readonly stats: OwnerServiceStats = {
    asks: 0,
    linksOpened: 0,
    lazyWindows: 0,
    askFrames: 0,
    answered: 0,
    failed: {},
    served: 0,
    servedFrames: 0,
    dropped: {},
  };
  private readonly links = new Map<string, Link>();
  private readonly inbound = new Set<Stream>();
  private nextId = 1;
  private running = false;

  constructor(
    private readonly node: MeshNode,
    private readonly engine: OwnerEngine,
    private readonly now: () => number,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    this.running = true;
    await this.node.handle(OWNER_PROTOCOL, this.onInbound, { maxInboundStreams: 4, force: true });
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.node.unhandle(OWNER_PROTOCOL).catch(() => undefined);
    for (const link of this.links.values()) this.closeLink(link, 'unreachable');
    this.links.clear();
    for (const s of this.inbound) s.abort(new Error('ratemesh stopping'));
    this.inbound.clear();
  }

  private drop(reason: string): void {
    this.stats.dropped[reason] = (this.stats.dropped[reason] ?? 0) + 1;
  }

  private fail(reason: string): void {
    this.stats.failed[reason] = (this.stats.failed[reason] ?? 0) + 1;
  }

  // ---- asking ----

  /**
   * Ask member `owner` to decide `cost` on (`policy`, `key`); resolves with its answer, or why
   * there is none: no open connection to it (`unreachable`, at once), no answer within
   * `deadlineMs` (`timeout`), or its refusal (`not-owner`, `refused`). Never rejects.
   */
  ask(
    owner: string,
    policy: string,
    key: string,
    cost: number,
    deadlineMs: number,
  ): Promise<OwnerAnswer | AskFailure> {
    this.stats.asks++;
    if (!(cost >= 0 && cost <= MAX_COST && Number.isInteger(cost)))
      return Promise.resolve(this.failed('refused'));
    if (!this.running) return Promise.resolve(this.failed('unreachable'));
    const link = this.links.get(owner) ?? this.newLink(owner);
    if (link === undefined) return Promise.resolve(this.failed('unreachable'));
    if (link.pending.size >= MAX_PENDING) {
      this.drop('backlog');
      return Promise.resolve(this.failed('unreachable'));
    }
    const l = link;
    const id = this.nextId;
    this.nextId = this.nextId >= MAX_WIRE ? 1 : this.nextId + 1;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (l.pending.delete(id)) resolve(this.failed('timeout'));
      }, deadlineMs);
      timer.unref?.();
      l.pending.set(id, { resolve, timer, sentAt: this.now() });
      l.queue.push({ id, policy: enc.encode(policy), key: enc.encode(key), cost });
      if (!l.flushing) {
        l.flushing = true;
        setImmediate(() => void this.flush(l));
      }
    });
  }

  /** A link to `peer` (its stream opened on first use), or undefined with no open connection to it. */
  private newLink(peer: string): Link | undefined {
    if (this.connection(peer) === undefined) return undefined;
    const link: Link = {
      peer,
      stream: undefined,
      opening: undefined,
      pending: new Map(),
      queue: [],
      flushing: false,
      decoder: new FrameDecoder(MAX_OWNER_FRAME_BYTES),
    };
    this.links.set(peer, link);
    return link;
  }

  /**
   * Open the link to each of `peers` that has a connection and no link yet, without asking: a
   * key's first ask to its owner otherwise waits for the stream to open (protocol negotiation
   * over the connection: 4-30 ms of the owner drill's slowest asks, against under 1 ms for an
   * ask on an open stream). Links to members no longer asked stay until their connection closes.
   */
  warm(peers: readonly string[]): void {
    if (!this.running) return;
    for (const peer of peers) {
      const have = this.links.get(peer);
      if (have !== undefined && (have.opening !== undefined || have.stream?.status === 'open')) continue;
      const link = have ?? this.newLink(peer);
      if (link !== undefined) void this.streamOf(link);
    }
  }

  private failed(reason: AskFailure): AskFailure {
    this.fail(reason);
    return reason;
  }

  private connection(peer: string): Connection | undefined {
    for (const c of this.node.getConnections())
      if (c.remotePeer.toString() === peer && c.status === 'open') return c;
    return undefined;
  }

  /** Send what is queued on `link`, in frames of at most MAX_BATCH asks. */
  private async flush(link: Link): Promise<void> {
    link.flushing = false;
    if (link.queue.length === 0) return;
    const stream = await this.streamOf(link);
    const queue = link.queue;
    link.queue = [];
    if (stream === undefined) {
      for (const q of queue) this.settle(link, q.id, 'unreachable');
      return;
    }
    for (let at = 0; at < queue.length; at += MAX_BATCH) {
      const batch = queue.slice(at, at + MAX_BATCH);
      const frame = encodeAsks(batch);
      try {
        stream.send(frame);
        this.stats.askFrames++;
      } catch (err) {
        this.logger.debug({ peer: link.peer, err: String(err) }, 'ratemesh owner ask not sent');
        for (const q of batch) this.settle(link, q.id, 'unreachable');
      }
    }
  }

  private settle(link: Link, id: number, r: OwnerAnswer | AskFailure): void {
    const p = link.pending.get(id);
    if (p === undefined) return;
    link.pending.delete(id);
    clearTimeout(p.timer);
    if (typeof r === 'string') this.fail(r);
    else this.stats.answered++;
    p.resolve(r);
  }

  private streamOf(link: Link): Promise<Stream | undefined> {
    if (link.stream !== undefined && link.stream.status === 'open') return Promise.resolve(link.stream);
    if (link.opening !== undefined) return link.opening;
    const conn = this.connection(link.peer);
    if (conn === undefined) return Promise.resolve(undefined);
    link.opening = (async (): Promise<Stream | undefined> => {
      try {
        const stream = await conn.newStream(OWNER_PROTOCOL, { signal: AbortSignal.timeout(5_000) });
        if (!this.running || this.links.get(link.peer) !== link) {
          stream.abort(new Error('not needed'));
          return undefined;
        }
        // answers are credited to the stream's remote peer: the member asked, authenticated by noise
        if (conn.remotePeer.toString() !== link.peer) {
          stream.abort(new Error('wrong peer'));
          return undefined;
        }
        link.stream = stream;
        // no window update answering each answer (it would wake the owner for nothing)
        if (lazyWindowUpdates(stream)) this.stats.lazyWindows++;
        this.stats.linksOpened++;
        stream.addEventListener('message', (evt: { data: Uint8Array | { subarray(): Uint8Array } }) =>
          this.onAnswers(link, stream, toBytes(evt.data)),
        );
        stream.addEventListener('close', () => {
          if (link.stream === stream) this.closeLink(link, 'unreachable');
        });
        return stream;
      } catch (err) {
        this.logger.debug({ peer: link.peer, err: String(err) }, 'ratemesh owner stream not opened');
        return undefined;
      } finally {
        link.opening = undefined;
      }
    })();
    return link.opening;
  }

  /** The link to an owner is gone: every ask waiting on it fails now, and the next ask opens a new one. */
  private closeLink(link: Link, reason: AskFailure): void {
    if (link.stream !== undefined && link.stream.status === 'open') link.stream.abort(new Error('closed'));
    link.stream = undefined;
    for (const id of [...link.pending.keys()]) this.settle(link, id, reason);
    if (this.links.get(link.peer) === link) this.links.delete(link.peer);
  }

  private onAnswers(link: Link, stream: Stream, chunk: Uint8Array): void {
    const frames = link.decoder.push(chunk);
    if (frames instanceof Error) {
      this.drop('bad-frame');
      this.closeLink(link, 'unreachable');
      return;
    }
    for (const f of frames) {
      if (link.stream !== stream) return;
      const answers = decodeAnswers(f);
      if (answers === undefined) {
        this.drop('bad-frame');
        this.closeLink(link, 'unreachable');
        return;
      }
      const now = this.now();
      for (const a of answers) {
        const p = link.pending.get(a.id);
        if (p === undefined) {
          // answered after its deadline, or never asked
          this.drop('unknown-id');
          continue;
        }
        if (a.refused !== undefined) {
          this.settle(link, a.id, a.refused === 'not-owner' ? 'not-owner' : 'refused');
          continue;
        }
        this.settle(link, a.id, {
          limited: a.limited!,
          rule: a.rule!,
          remaining: a.remaining!,
          retryAfterMs: a.retryAfterMs!,
          resetMs: a.resetMs!,
          ...(a.reason === undefined ? {} : { reason: a.reason }),
          rttMs: Math.max(0, now - p.sentAt),
        });
      }
    }
  }

  // ---- answering ----

  private readonly onInbound = (stream: Stream, connection: Connection): void => {
    if (!this.running) {
      stream.abort(new Error('not running'));
      return;
    }
    // the asker is the connection's authenticated peer, whatever the frames say
    const from = connection.remotePeer.toString();
    const decoder = new FrameDecoder(MAX_OWNER_FRAME_BYTES);
    this.inbound.add(stream);
    // no window update answering each ask (it would wake the asker before the answer does)
    if (lazyWindowUpdates(stream)) this.stats.lazyWindows++;
    stream.addEventListener('message', (evt: { data: Uint8Array | { subarray(): Uint8Array } }) => {
      const frames = decoder.push(toBytes(evt.data));
      if (frames instanceof Error) {
        this.drop('bad-frame');
        stream.abort(frames);
        return;
      }
      for (const f of frames) {
        if (stream.status !== 'open') return;
        const asks = decodeAsks(f);
        if (asks === undefined) {
          this.drop('bad-frame');
          stream.abort(new Error('bad owner ask frame'));
          return;
        }
        this.stats.servedFrames++;
        const answers: Answer[] = [];
        for (const a of asks) {
          let d: Decision | { refused: string };
          try {
            d = this.engine.answerAsk(from, a.policy, a.key, a.cost, this.now());
          } catch (err) {
            this.logger.warn({ peer: from, err: String(err) }, 'ratemesh owner ask failed');
            d = { refused: 'error' };
          }
          this.stats.served++;
          answers.push(answerOf(a.id, d));
        }
        try {
          stream.send(encodeAnswers(answers));
        } catch (err) {
          this.drop('send-error');
          this.logger.debug({ peer: from, err: String(err) }, 'ratemesh owner answer not sent');
        }
      }
    });
    stream.addEventListener('close', () => this.inbound.delete(stream), { once: true });
  };
}

// ---- codec (exported for tests) ----

export interface Ask {
  id: number;
  policy: string;
  key: string;
  cost: number;
}

export interface Answer {
  id: number;
  refused?: string;
  limited?: boolean;
  rule?: DecisionRule;
  remaining?: number;
  retryAfterMs?: number;
  resetMs?: number;
  reason?: OwnerInfo['reason'];
}

function answerOf(id: number, d: Decision | { refused: string }): Answer {
  if ('refused' in d) return { id, refused: REFUSALS.includes(d.refused) ? d.refused : 'error' };
  const why = d.owner?.reason;
  return {
    id,
    limited: d.limited,
    rule: d.rule,
    remaining: d.remaining,
    retryAfterMs: d.retryAfterMs,
    resetMs: d.resetMs,
    ...(why === 'settling' || why === 'shared' ? { reason: why } : {}),
  };
}

function frame(body: Uint8Array, n: number): Uint8Array {
  const out = new Uint8Array(varintLength(n) + n);
  const off = writeVarint(out, 0, n);
  out.set(body.subarray(0, n), off);
  return out;
}

export function encodeAsks(asks: readonly Queued[]): Uint8Array {
  let n = 1 + varintLength(asks.length);
  for (const a of asks)
    n +=
      varintLength(a.id) +
      varintLength(a.policy.byteLength) +
      a.policy.byteLength +
      varintLength(a.key.byteLength) +
      a.key.byteLength +
      varintLength(a.cost);
  const body = new Uint8Array(n);
  body[0] = ASK;
  let off = writeVarint(body, 1, asks.length);
  for (const a of asks) {
    off = writeVarint(body, off, a.id);
    off = writeVarint(body, off, a.policy.byteLength);
    body.set(a.policy, off);
    off += a.policy.byteLength;
    off = writeVarint(body, off, a.key.byteLength);
    body.set(a.key, off);
    off += a.key.byteLength;
    off = writeVarint(body, off, a.cost);
  }
  return frame(body, off);
}

/** An ask batch's body, or undefined when any field breaks a bound (the whole frame is refused). */
export function decodeAsks(b: Uint8Array): Ask[] | undefined {
  if (b.byteLength < 2 || b[0] !== ASK) return undefined;
  let r = readVarint(b, 1);
  if (r === undefined) return undefined;
  const [count, o1] = r;
  if (count < 1 || count > MAX_BATCH) return undefined;
  let off = o1;
  const out: Ask[] = [];
  const ids = new Set<number>();
  try {
    for (let i = 0; i < count; i++) {
      r = readVarint(b, off);
      if (r === undefined) return undefined;
      const id = r[0];
      off = r[1];
      if (ids.has(id)) return undefined;
      ids.add(id);
      r = readVarint(b, off);
      if (r === undefined || r[0] < 1 || r[0] > MAX_POLICY_BYTES || r[1] + r[0] > b.byteLength)
        return undefined;
      const policy = dec.decode(b.subarray(r[1], r[1] + r[0]));
      off = r[1] + r[0];
      r = readVarint(b, off);
      if (r === undefined || r[0] < 1 || r[0] > MAX_KEY_BYTES || r[1] + r[0] > b.byteLength) return undefined;
      const key = dec.decode(b.subarray(r[1], r[1] + r[0]));
      off = r[1] + r[0];
      r = readVarint(b, off);
      if (r === undefined || r[0] > MAX_COST) return undefined;
      const cost = r[0];
      off = r[1];
      out.push({ id, policy, key, cost });
    }
  } catch {
    return undefined; // not UTF-8
  }
  return off === b.byteLength ? out : undefined;
}

const HOW: readonly (OwnerInfo['reason'] | undefined)[] = [undefined, 'settling', 'shared'];

export function encodeAnswers(answers: readonly Answer[]): Uint8Array {
  const body = new Uint8Array(2 + 5 + answers.length * 40);
  body[0] = ANSWER;
  let off = writeVarint(body, 1, answers.length);
  for (const a of answers) {
    off = writeVarint(body, off, a.id);
    if (a.refused !== undefined) {
      body[off++] = 2;
      body[off++] = Math.max(0, REFUSALS.indexOf(a.refused));
      continue;
    }
    body[off++] = a.limited ? 1 : 0;
    body[off++] = Math.max(0, RULES.indexOf(a.rule!));
    off = writeVarint(body, off, clampInt(a.remaining!));
    off = writeVarint(body, off, a.retryAfterMs! < 0 ? 0 : clampInt(a.retryAfterMs!) + 1);
    off = writeVarint(body, off, clampInt(a.resetMs!));
    body[off++] = Math.max(0, HOW.indexOf(a.reason));
  }
  return frame(body, off);
}

/** An answer batch's body, or undefined when any field breaks a bound. */
export function decodeAnswers(b: Uint8Array): Answer[] | undefined {
  if (b.byteLength < 2 || b[0] !== ANSWER) return undefined;
  let r = readVarint(b, 1);
  if (r === undefined) return undefined;
  const [count, o1] = r;
  if (count < 1 || count > MAX_BATCH) return undefined;
  let off = o1;
  const out: Answer[] = [];
  for (let i = 0; i < count; i++) {
    r = readVarint(b, off);
    if (r === undefined) return undefined;
    const id = r[0];
    off = r[1];
    if (off >= b.byteLength) return undefined;
    const status = b[off++]!;
    if (status === 2) {
      if (off >= b.byteLength) return undefined;
      const why = REFUSALS[b[off++]!];
      if (why === undefined) return undefined;
      out.push({ id, refused: why });
      continue;
    }
    if (status > 1 || off >= b.byteLength) return undefined;
    const rule = RULES[b[off++]!];
    if (rule === undefined) return undefined;
    const nums: number[] = [];
    for (let k = 0; k < 3; k++) {
      r = readVarint(b, off);
      if (r === undefined) return undefined;
      nums.push(r[0]);
      off = r[1];
    }
    if (off >= b.byteLength) return undefined;
    const how = b[off++]!;
    if (how >= HOW.length) return undefined;
    // an admitted answer names the allow rule, a limited one any other
    if ((status === 0) !== (rule === 'allow')) return undefined;
    const reason = HOW[how];
    out.push({
      id,
      limited: status === 1,
      rule,
      remaining: nums[0]!,
      retryAfterMs: nums[1]! === 0 ? -1 : nums[1]! - 1,
      resetMs: nums[2]!,
      ...(reason === undefined ? {} : { reason }),
    });
  }
  return off === b.byteLength ? out : undefined;
}

function clampInt(x: number): number {
  if (!(x > 0)) return 0;
  // times past 2^28 ms (3.1 days) are sent as that: a Retry-After that long is a hint anyway
  return Math.min(Math.floor(x), MAX_WIRE - 1);
}

export type { PeerId };
