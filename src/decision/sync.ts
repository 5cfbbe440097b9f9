import {
  decodeMessage,
  encodeSyncRequest,
  encodeSyncResponse,
  LIMITS,
  TYPE_SYNC_REQUEST,
  TYPE_SYNC_RESPONSE,
  type WireEntry,
} from '../crdt/codec.js';
import { FLOOR } from '../crdt/window.js';
import type { EngineCore, PolicyRuntime } from './core.js';
import { type Gossip, ownEntry, validateEntries } from './gossip.js';
import { appliedOffset, type PeerState } from './peers.js';
import type { ReceiveResult } from './types.js';

/**
 * Entries of members gone (see {@link Sync.answer}) one answer carries at most, beside our own:
 * an answer stays well inside the decoder's caps (LIMITS.entries, LIMITS.syncBytes).
 */
export const SYNC_GONE_MAX_ENTRIES = 20_000;

/**
 * State sync on bytes: the request (our time, for a clock-offset sample), the answer (our own
 * windows, what we hold of the asker's, and what we hold of members gone), the merge of an
 * answer (credited to the responder, and members gone to their own origin), and the snapshot of
 * a lone node's windows, which is a sync answer from itself.
 */
export class Sync {
  /** Sync requests sent and not answered yet: their t0 and how many share it. */
  private readonly pending = new Map<number, number>();

  constructor(
    private readonly core: EngineCore,
    private readonly gossip: Gossip,
  ) {}

  /** A request for a peer's full state; carries our time `t0` for the clock-offset estimate. */
  request(t0: number): Uint8Array {
    // remembered so that only an answer to a request of ours is merged (at most 256 open, for 60 s)
    this.pending.set(t0, (this.pending.get(t0) ?? 0) + 1);
    if (this.pending.size > 256) this.pending.delete(this.pending.keys().next().value!);
    return encodeSyncRequest({ t0 });
  }

  /**
   * Answer a sync request: our own windows, what we hold of the asker's own counts, and what we
   * hold of members gone (stale or departed here, or known to us only this way), each under its
   * own id. A pod that replaces one gone before it joined sees those counts nowhere else: the
   * pod it replaces is not there to answer, and without them it would admit a key's L again
   * on top of what that pod admitted within the window.
   */
  answer(from: string, request: Uint8Array, now: number): Uint8Array | ReceiveResult {
    const core = this.core;
    const dec = decodeMessage(request);
    if (!dec.ok) return core.drop(`sync-${dec.reason}`);
    if (dec.message.type !== TYPE_SYNC_REQUEST) return core.drop('sync-bad-type');
    // Our own windows, and what we hold of the requester's own counts (a
    // restarted node learns what it admitted before).
    const origins = [core.nodeId];
    const asker = this.heardAsker(from, now);
    if (asker !== undefined) {
      origins.push(asker.id);
      // a (re)starting node may number its gossip from 1 again, and its first messages may be
      // lost unseen: ask it, in our next messages, for its whole window
      asker.nack = 0;
    }
    const gone = this.goneOrigins(asker, now, LIMITS.origins - origins.length);
    const entries = this.windowEntries(now, asker);
    if (gone.length > 0) {
      const first = origins.length;
      for (const p of gone) origins.push(p.id);
      this.goneEntries(now, gone, first, entries);
    }
    // and the live members, by name only: one the asker never hears is gone (see EngineCore.awaitNames)
    for (const p of core.peers.live) {
      if (p === asker || origins.length >= LIMITS.origins) continue;
      origins.push(p.id);
    }
    return encodeSyncResponse({
      policies: core.wireTable,
      t0: dec.message.t0,
      t1: now,
      origins,
      entries,
    });
  }

  /**
   * The asker of a sync request; one that is no member here (new, departed, or left) is counted a
   * member from now on, heard now: a starting node decides nothing until every member it hears has
   * heard it, and an answer naming it says this one has (EngineCore.startGate). Its data is as of
   * now (it has admitted nothing since it started: it is gated). A member's standing is left as
   * it is: only its gossip says how fresh its counts are. Undefined (not named in the answer) for
   * this node's own id, a bad id, a peer being ignored, or a full table.
   */
  private heardAsker(from: string, now: number): PeerState | undefined {
    const core = this.core;
    if (typeof from !== 'string' || from.length === 0 || from.length > 128 || from === core.nodeId)
      return undefined;
    const known = core.peers.get(from);
    // not named: its counts are dropped here, so an answer naming it would say it is counted
    if (known !== undefined && now < known.ignoredUntil) return undefined;
    if (known?.member === true) return known;
    const p = known ?? core.peers.ensure(from);
    if (p === undefined) return undefined;
    p.member = true;
    p.left = false;
    // a member gone speaks for itself now; what answers passed on of it stays, max-merged with
    // what its gossip brings
    p.gone = false;
    p.lastHeard = now;
    // its delay is unknown until its gossip: the data's expected age
    p.delayMs = core.cfg.dataDelayMs;
    core.stamp++;
    core.refresh(now);
    return p;
  }

  /**
   * The origins whose counts an answer passes on besides ours and the asker's: members stale
   * here, departed ones still in the table, and origins we know only from such answers; not
   * the asker, nor a peer being ignored (its counts are dropped). Most recently heard first, at
   * most `room`.
   */
  private goneOrigins(asker: PeerState | undefined, now: number, room: number): PeerState[] {
    const out: PeerState[] = [];
    for (const p of this.core.peers.byIdx) {
      if (p === undefined || p === asker || now < p.ignoredUntil) continue;
      if (p.member && !p.stale) continue;
      out.push(p);
    }
    out.sort((a, b) => b.lastHeard - a.lastHeard);
    if (out.length > room) out.length = Math.max(0, room);
    return out;
  }

  /**
   * Appends to `entries` what we hold of the origins `gone` (origin indexes from `first`), key
   * by key, while the answer holds under SYNC_GONE_MAX_ENTRIES of them and LIMITS.entries in all.
   */
  private goneEntries(now: number, gone: readonly PeerState[], first: number, entries: WireEntry[]): void {
    const cap = Math.min(LIMITS.entries, entries.length + SYNC_GONE_MAX_ENTRIES);
    for (const rt of this.core.rts) {
      if (rt.local) continue;
      for (const [key, ks] of rt.windows.map) {
        const kw = ks.window;
        const c = Math.floor(now / rt.bw);
        if (c > kw.cur) kw.roll(c);
        for (let i = 0; i < gone.length; i++) {
          const o = gone[i]!.idx;
          const counts = kw.originCounts(o);
          if (counts === undefined || !counts.some((x) => x > 0)) continue;
          if (entries.length >= cap) return;
          const skews = kw.originSkews(o);
          entries.push({
            origin: first + i,
            policy: rt.wire,
            key,
            base: kw.cur - kw.k,
            counts,
            ...(skews === undefined ? {} : { skews }),
            demand: 0,
          });
        }
      }
    }
  }

  /**
   * Merge a sync response and take a clock-offset sample from its round trip.
   * Its own counts are credited to the responder `from` (the transport's
   * authenticated peer, origin 0 of the answer). Entries the responder gives
   * for this node's own id (a restarted node's earlier admissions) go to the
   * unattributed floor: they count here, bounded like any origin's, but are
   * never gossiped as this node's own. Entries of members gone (see
   * {@link answer}) go to their own origin, max-merged, so that answers from
   * several responders count a pod once: only for an origin this node has not
   * heard itself (not a member now, no gossip of it ever merged; `sync-known-origin`
   * otherwise), and for one key at most 2L of them per answer (`sync-gone-over-limit`).
   * They add to the estimate only, never to any member's share: a responder that
   * invents them can deny, as it could with its own counts, but never admit more.
   */
  receive(from: string, response: Uint8Array, now: number): ReceiveResult {
    const core = this.core;
    if (typeof from !== 'string' || from.length === 0 || from.length > 128)
      return core.drop('sync-bad-sender');
    if (from === core.nodeId) return core.drop('sync-self');
    const known = core.peers.get(from);
    if (known !== undefined && now < known.ignoredUntil) return core.drop('sync-peer-ignored');
    const dec = decodeMessage(response);
    if (!dec.ok) return core.drop(`sync-${dec.reason}`);
    const m = dec.message;
    if (m.type !== TYPE_SYNC_RESPONSE) return core.drop('sync-bad-type');
    if (m.origins[0] !== from) return core.drop('sync-wrong-origin');
    const map = core.mapTable(undefined, m.policies, now);
    const bad = validateEntries(m.entries, map);
    if (bad !== undefined) return core.drop(`sync-${bad}`);
    // an answer to a request of ours, each request answered once: no unsolicited or replayed state
    const open = this.pending.get(m.t0);
    if (open === undefined || now - m.t0 > 60_000) return core.drop('sync-unsolicited');
    const peer = known ?? core.peers.ensure(from);
    if (peer === undefined) return core.drop('sync-too-many-peers');
    if (open > 1) this.pending.set(m.t0, open - 1);
    else this.pending.delete(m.t0);
    core.mapTable(peer, m.policies, now);
    const self = m.origins.indexOf(core.nodeId);
    if (m.t0 <= now && now - m.t0 < 60_000) {
      // The midpoint is off by at most half the round trip: trusted (over the gossip estimate, and
      // for the skew check) only when that is within a quarter of maxClockOffsetMs. A starved
      // process's round trip of seconds set a peer 1.1-1.4 s off for good, so it stayed stale
      // (skewed) until it reconnected. The lower bound t1 - t3 holds whatever the round trip.
      if ((now - m.t0) / 2 <= core.cfg.maxClockOffsetMs / 4) {
        peer.clockOffsetMs = m.t1 - (m.t0 + now) / 2;
        peer.offsetMeasured = true;
      }
      peer.syncLowerMs = Math.max(peer.syncLowerMs, m.t1 - now);
    }
    let capped = false;
    // its windows (and what it holds of ours) are in its buckets: moved by its offset
    const merge = this.gossip.checkSkew(peer, peer.clockOffsetMs);
    const off = merge ? appliedOffset(peer, core.cfg.expectedDelayMs) : 0;
    // members gone, by origin index of the answer: whether this node may take their counts (an
    // origin it has not heard itself), and the slot made for each once it does
    const names = this.goneNames(m.origins, from);
    const slots: (PeerState | undefined)[] = [];
    const withCounts: boolean[] = [];
    let goneSum: Map<string, number> | undefined;
    for (const e of m.entries) {
      if (!merge) break;
      const rt = map[e.policy];
      if (rt === undefined) {
        core.counters.foreignEntries++;
        continue;
      }
      if (e.origin === 0) {
        if (this.gossip.merge(rt, peer.idx, e, now, off)) capped = true;
        continue;
      }
      if (e.origin === self) {
        // The late sync's answers echo what this node admitted since it joined, which it holds
        // as its own: only the first answers bring what it admitted before (a restart).
        // An id made at this start has no earlier run: its echo is only what this run admitted.
        if (!core.cfg.freshId && !(now >= core.lateAskedAt) && this.gossip.merge(rt, FLOOR, e, now, off))
          capped = true;
        continue;
      }
      if (!names[e.origin]) {
        core.drop('sync-known-origin');
        continue;
      }
      // an origin with counts here is a member gone at the responder, not one to wait for
      withCounts[e.origin] = true;
      // at most 2L of members gone per key in one answer: what the ring can hold of one origin
      const id = `${e.policy}\u0000${e.key}`;
      goneSum ??= new Map();
      let n = goneSum.get(id) ?? 0;
      for (const x of e.counts) n += x;
      if (n > 2 * rt.policy.limit) {
        core.drop('sync-gone-over-limit');
        continue;
      }
      const slot = slots[e.origin] ?? this.goneSlot(m.origins[e.origin]!);
      if (slot === undefined) {
        core.drop('sync-gone-no-room');
        continue;
      }
      slots[e.origin] = slot;
      goneSum.set(id, n);
      slot.lastHeard = now;
      if (this.gossip.merge(rt, slot.idx, e, now, off)) capped = true;
      core.counters.goneSynced++;
    }
    // once: pull again when a pod replaced as this node joined is stale at the responders; until
    // that answer is here, members named and not heard hold each key to the start-up share
    // (EngineCore.awaitNames)
    const cfg = core.cfg;
    if (core.lateSyncAt === Number.POSITIVE_INFINITY) {
      core.lateSyncAt = now + cfg.staleAfterMs + cfg.dataDelayMs + cfg.gossipIntervalMs;
      core.holdUntil = core.lateSyncAt + cfg.staleAfterMs;
    }
    if (now >= core.lateAskedAt) core.awaitNames.clear();
    else if (now < core.holdUntil)
      for (let i = 1; i < names.length; i++) {
        const id = m.origins[i]!;
        if (names[i] && !withCounts[i] && core.awaitNames.size < LIMITS.origins) core.awaitNames.add(id);
      }
    // the responder is heard: an earlier answer that named it holds nothing for it now
    core.awaitNames.delete(from);
    // it names us: it has heard us (the start gate)
    if (self > 0) peer.heardUs = true;
    if (capped && this.gossip.strike(peer, now)) return { ok: true };
    // A sync answer is direct contact: the responder is a live member, and its
    // window is as of its answer (half the round trip ago).
    if (peer.lastHeard < now) {
      peer.member = true;
      peer.left = false;
      peer.lastHeard = now;
      peer.delayMs = Math.max(0, (now - m.t0) / 2);
    }
    core.stamp++;
    core.refresh(now);
    return { ok: true };
  }

  /**
   * By origin index of an answer from `from`: true for an origin whose counts this node may take
   * from it (see {@link receive}): not this node, not the responder, and not heard here itself
   * (no member now, no gossip of it ever merged, not being ignored; a slot an earlier answer made
   * is taken again).
   */
  private goneNames(origins: readonly string[], from: string): boolean[] {
    const core = this.core;
    const out: boolean[] = [false];
    for (let i = 1; i < origins.length; i++) {
      const id = origins[i]!;
      if (id === from || id === core.nodeId) {
        out.push(false);
        continue;
      }
      const known = core.peers.get(id);
      out.push(known === undefined || (known.gone && !(core.lastNow < known.ignoredUntil)));
    }
    return out;
  }

  /**
   * The slot for member gone `id`: the one an earlier answer made, or a new one while fewer than
   * {@link goneSlotsMax} are held (the rest of the table stays for members); undefined when none.
   */
  private goneSlot(id: string): PeerState | undefined {
    const peers = this.core.peers;
    const known = peers.get(id);
    if (known !== undefined) return known.gone ? known : undefined;
    let held = 0;
    for (const p of peers.byIdx) if (p?.gone === true) held++;
    if (held >= this.goneSlotsMax()) return undefined;
    const p = peers.ensure(id);
    if (p !== undefined) p.gone = true;
    return p;
  }

  /** Slots for members gone held at once: a quarter of the origin table, at least 16. */
  private goneSlotsMax(): number {
    return Math.max(16, Math.floor(this.core.cfg.maxPeers / 4));
  }

  /**
   * This node's own windows as a sync answer from itself (docs/wire-format.md). `withFloor`: each
   * key's unattributed floor too, as origin 1 (for a handover to a rebuilt engine in this process,
   * which adds it to the own counts; a snapshot file holds own counts only).
   */
  snapshot(now: number, withFloor = false): Uint8Array {
    const core = this.core;
    const entries = this.windowEntries(now, undefined, withFloor);
    return encodeSyncResponse({
      policies: core.wireTable,
      t0: now,
      t1: now,
      origins: withFloor ? [core.nodeId, `${core.nodeId}/floor`] : [core.nodeId],
      entries,
    });
  }

  /**
   * Count a snapshot's windows on the unattributed floor, or with `asOwn` its own counts as own
   * and its floor (origin 1) on the floor; see {@link Engine.restoreSnapshot}.
   */
  restore(bytes: Uint8Array, now: number, asOwn = false): ReceiveResult & { restored?: number } {
    const core = this.core;
    if (!(bytes instanceof Uint8Array)) return core.drop('snapshot-bad-type');
    const dec = decodeMessage(bytes);
    if (!dec.ok) return core.drop(`snapshot-${dec.reason}`);
    const m = dec.message;
    if (m.type !== TYPE_SYNC_RESPONSE) return core.drop('snapshot-bad-type');
    // policies restore only at the version they were saved under (the table says which)
    const map = core.mapTable(undefined, m.policies, now);
    const bad = validateEntries(m.entries, map);
    if (bad !== undefined) return core.drop(`snapshot-${bad}`);
    // the floor's entries: all of a snapshot's, or origin 1 of this node's own (snapshot(now, true))
    const floorOrigin = asOwn ? 1 : 0;
    let restored = 0;
    for (const e of m.entries) {
      const rt = map[e.policy];
      if (rt === undefined) continue;
      if (e.origin === floorOrigin) this.gossip.merge(rt, FLOOR, e, now, 0);
      else if (asOwn && e.origin === 0) this.mergeOwn(rt, e, now);
      else continue;
      restored++;
    }
    core.stamp++;
    return { ok: true, restored };
  }

  /**
   * Max-merge entry `e` into this node's own counts, bucket by bucket (its own windows handed
   * over in this process: the same id, so peers hold them as this node's already). They carry no
   * times: each bucket's counts may be anywhere in it. Capped at L a bucket, as any origin's.
   */
  private mergeOwn(rt: PolicyRuntime, e: WireEntry, now: number): void {
    const ks = this.gossip.keyAt(rt, e.key, now);
    const kw = ks.window;
    const L = rt.policy.limit;
    for (let i = 0; i < e.counts.length; i++) kw.mergeOwnEntry(e.base + i, Math.min(e.counts[i]!, L));
    // gossiped whole from the next message on (peers merge each bucket as the larger copy)
    ks.pending = true;
    this.core.touch(ks);
  }

  /**
   * Every global key's window of our own counts (origin 0), and when `asker` is given what we
   * hold of its own counts (origin 1): the entries of a sync answer, and of a snapshot. With no
   * asker, `withFloor` puts each key's unattributed floor in origin 1 (see {@link snapshot}).
   */
  private windowEntries(now: number, asker: PeerState | undefined, withFloor = false): WireEntry[] {
    const entries: WireEntry[] = [];
    for (const rt of this.core.rts) {
      if (rt.local) continue;
      for (const [key, ks] of rt.windows.map) {
        const kw = ks.window;
        const c = Math.floor(now / rt.bw);
        if (c > kw.cur) kw.roll(c);
        if (kw.isEmpty()) continue;
        if (kw.ownEstimate(1) > 0) entries.push(ownEntry(ks, rt, now));
        if (withFloor) {
          const counts = kw.floorCounts();
          if (counts !== undefined)
            entries.push({ origin: 1, policy: rt.wire, key, base: kw.cur - kw.k, counts, demand: 0 });
        }
        if (asker === undefined) continue;
        const counts = kw.originCounts(asker.idx);
        const skews = kw.originSkews(asker.idx);
        if (counts !== undefined)
          entries.push({
            origin: 1,
            policy: rt.wire,
            key,
            base: kw.cur - kw.k,
            counts,
            ...(skews === undefined ? {} : { skews }),
            demand: kw.demandOf(asker.idx),
          });
      }
    }
    return entries;
  }
}
