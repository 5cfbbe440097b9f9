import {
  decodeMessage,
  encodeSyncRequest,
  encodeSyncResponse,
  TYPE_SYNC_REQUEST,
  TYPE_SYNC_RESPONSE,
  type WireEntry,
} from '../crdt/codec.js';
import { FLOOR } from '../crdt/window.js';
import type { EngineCore } from './core.js';
import { type Gossip, ownEntry, validateEntries } from './gossip.js';
import { appliedOffset, type PeerState } from './peers.js';
import type { ReceiveResult } from './types.js';

/**
 * State sync on bytes: the request (our time, for a clock-offset sample), the answer (our own
 * windows and what we hold of the asker's), the merge of an answer (credited to the responder
 * only), and the snapshot of a lone node's windows, which is a sync answer from itself.
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

  /** Answer a sync request: our own windows, and what we hold of the asker's own counts. */
  answer(from: string, request: Uint8Array, now: number): Uint8Array | ReceiveResult {
    const core = this.core;
    const dec = decodeMessage(request);
    if (!dec.ok) return core.drop(`sync-${dec.reason}`);
    if (dec.message.type !== TYPE_SYNC_REQUEST) return core.drop('sync-bad-type');
    // Our own windows, and what we hold of the requester's own counts (a
    // restarted node learns what it admitted before). Nothing of third parties:
    // a receiver credits a sync answer only to the responder.
    const origins = [core.nodeId];
    const asker = typeof from === 'string' && from !== core.nodeId ? core.peers.get(from) : undefined;
    if (asker !== undefined) {
      origins.push(asker.id);
      // a (re)starting node may number its gossip from 1 again, and its first messages may be
      // lost unseen: ask it, in our next messages, for its whole window
      asker.nack = 0;
    }
    const entries = this.windowEntries(now, asker);
    return encodeSyncResponse({
      policies: core.wireTable,
      t0: dec.message.t0,
      t1: now,
      origins,
      entries,
    });
  }

  /**
   * Merge a sync response and take a clock-offset sample from its round trip.
   * Counts are credited only to the responder `from` (the transport's
   * authenticated peer, origin 0 of the answer). Entries the responder gives
   * for this node's own id (a restarted node's earlier admissions) go to the
   * unattributed floor: they count here, bounded like any origin's, but are
   * never gossiped as this node's own. Entries of any other origin are
   * skipped and counted (`sync-foreign-entry`): no name fills a peer slot here.
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
    let foreign = 0;
    // its windows (and what it holds of ours) are in its buckets: moved by its offset
    const merge = this.gossip.checkSkew(peer, peer.clockOffsetMs);
    const off = merge ? appliedOffset(peer, core.cfg.expectedDelayMs) : 0;
    for (const e of m.entries) {
      if (!merge) break;
      const rt = map[e.policy];
      if (rt === undefined) {
        core.counters.foreignEntries++;
        continue;
      }
      if (e.origin === 0) {
        if (this.gossip.merge(rt, peer.idx, e, now, off)) capped = true;
      } else if (e.origin === self) {
        if (this.gossip.merge(rt, FLOOR, e, now, off)) capped = true;
      } else foreign++;
    }
    if (foreign > 0)
      core.counters.dropped['sync-foreign-entry'] =
        (core.counters.dropped['sync-foreign-entry'] ?? 0) + foreign;
    if (capped && this.gossip.strike(peer, now)) return { ok: true };
    // A sync answer is direct contact: the responder is a live member, and its
    // window is as of its answer (half the round trip ago).
    if (peer.lastHeard < now) {
      peer.member = true;
      peer.lastHeard = now;
      peer.delayMs = Math.max(0, (now - m.t0) / 2);
    }
    core.stamp++;
    core.refresh(now);
    return { ok: true };
  }

  /** This node's own windows as a sync answer from itself (docs/wire-format.md). */
  snapshot(now: number): Uint8Array {
    const core = this.core;
    const entries = this.windowEntries(now, undefined);
    return encodeSyncResponse({
      policies: core.wireTable,
      t0: now,
      t1: now,
      origins: [core.nodeId],
      entries,
    });
  }

  /** Count a snapshot's windows on the unattributed floor; see {@link Engine.restoreSnapshot}. */
  restore(bytes: Uint8Array, now: number): ReceiveResult & { restored?: number } {
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
    let restored = 0;
    for (const e of m.entries) {
      const rt = map[e.policy];
      if (e.origin !== 0 || rt === undefined) continue;
      this.gossip.merge(rt, FLOOR, e, now, 0);
      restored++;
    }
    core.stamp++;
    return { ok: true, restored };
  }

  /**
   * Every global key's window of our own counts (origin 0), and when `asker` is given what we
   * hold of its own counts (origin 1): the entries of a sync answer, and of a snapshot.
   */
  private windowEntries(now: number, asker: PeerState | undefined): WireEntry[] {
    const entries: WireEntry[] = [];
    for (const rt of this.core.rts) {
      if (rt.local) continue;
      for (const [key, ks] of rt.windows.map) {
        const kw = ks.window;
        const c = Math.floor(now / rt.bw);
        if (c > kw.cur) kw.roll(c);
        if (kw.isEmpty()) continue;
        if (kw.ownEstimate(1) > 0) entries.push(ownEntry(ks, rt, now));
        if (asker === undefined) continue;
        const counts = kw.originCounts(asker.idx);
        if (counts !== undefined)
          entries.push({
            origin: 1,
            policy: rt.wire,
            key,
            base: kw.cur - kw.k,
            counts,
            demand: kw.demandOf(asker.idx),
          });
      }
    }
    return entries;
  }
}
