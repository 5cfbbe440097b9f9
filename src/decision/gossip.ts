import {
  decodeMessage,
  encodeGossip,
  entryBytes,
  gossipHeaderBytes,
  LIMITS,
  peekGossipEntries,
  TYPE_GOSSIP,
  type WireEntry,
  type WireNack,
} from '../crdt/codec.js';
import { FLOOR, keepsSpans } from '../crdt/window.js';
import { validateKey } from '../keys/key.js';
import { TICK_TIMES_MASK } from './constants.js';
import type { EngineCore, PolicyRuntime } from './core.js';
import type { KeyState } from './key-state.js';
import { reportDemand } from './key-state.js';
import { appliedOffset, type PeerState, sampleOffset } from './peers.js';
import type { ReceiveResult } from './types.js';

/**
 * Gossip on bytes: the message of each tick (own counts of recently touched keys, and a
 * heartbeat), and the merge of a peer's message (validated whole first, counts capped to what
 * its origin could have admitted, moved by its clock offset). Also the merge helpers sync uses.
 */
export class Gossip {
  constructor(private readonly core: EngineCore) {}

  /**
   * The message for this tick: what changed since the last message, and repairs.
   *
   * - A key whose own counts changed since it was last sent carries its counts from the
   *   bucket it was sent in the time before last on (usually one or two buckets: counts are
   *   absolute per bucket, so a resent bucket merges idempotently, and one lost message is
   *   repaired by the next that carries the key), and its demand.
   * - A key offered requests without an admission since it was last sent carries its demand
   *   alone (peers age a demand by the time since it came, so it goes every tick it is offered).
   * - Loss repair: a peer that saw a gap in our sequence numbers asks (a nack in its
   *   messages) from which number on; the next message resends the whole window of every
   *   key sent in those messages, and says so in its header (`repair`).
   * - Every `antiEntropyTicks` gossip intervals (by time) every key with own counts goes whole
   *   (a slow backstop).
   *
   * Past `maxKeysPerMessage` keys or `maxGossipBytes` bytes, the keys with unsent admissions
   * (and repairs) stay due (`pending`) and go in the next ticks, the ones nearest their
   * early-publish threshold first. An idle node sends only the header (a heartbeat).
   * `reach`: see {@link Engine.buildGossip}.
   */
  build(now: number, reach: number | undefined): Uint8Array {
    const core = this.core;
    const { repeatTicks, antiEntropyTicks, maxKeysPerMessage: max, maxGossipBytes } = core.cfg;
    core.tick++;
    core.stamp++;
    core.early = false;
    const tick = core.tick;
    core.tickTimes[tick & TICK_TIMES_MASK] = now;
    const seq = core.seq + 1;
    // anti-entropy and the sweep of keys not due go by time (early publishes are ticks too)
    const g = core.cfg.gossipIntervalMs;
    const relaying = core.cfg.relayHops > 0;
    const anti = now - core.antiAt >= antiEntropyTicks * g;
    if (anti) core.antiAt = now;
    const sweep = anti || now - core.sweepAt >= g;
    if (sweep) core.sweepAt = now;
    const entries: WireEntry[] = [];
    const dirty = core.dirty;
    let repair = 0;
    if (core.repairFrom !== Number.POSITIVE_INFINITY) {
      repair = core.repairFrom;
      core.repairFrom = Number.POSITIVE_INFINITY;
      core.lastRepairFrom = repair;
      core.lastRepairAt = seq;
      for (const ks of dirty) {
        if (ks.sentSeq >= repair) {
          ks.sentBucket = Number.NEGATIVE_INFINITY;
          ks.prevBucket = Number.NEGATIVE_INFINITY;
          ks.pending = true;
        }
      }
    }
    const nacks = this.nacks();
    let size = gossipHeaderBytes(core.wireTable, nacks);
    for (let pass = dirty.size > max ? 0 : 2; pass < 3; pass++) {
      for (const ks of dirty) {
        if (ks.sentTick === tick) continue;
        const rt = core.rts[ks.policy]!;
        const due = ks.unsynced > 0 || ks.pending;
        if (pass === 0 && ks.unsynced < rt.earlyAt) continue;
        if (pass === 1 && !due) continue;
        // offered since it was last sent, or within the last interval g: at fast ticks (a tight key)
        // a key offered less often than every tick still sends its demand each tick, or peers
        // would age it by our messages without it (their weight for us faded 8 % on a node taking
        // all of a key at 2 L in batches 10-120 ms apart)
        const touched =
          ks.touchTick >= ks.sentTick ||
          (tick - ks.touchTick <= TICK_TIMES_MASK &&
            core.tickTimes[ks.touchTick & TICK_TIMES_MASK]! >= now - g);
        const recent = tick - ks.touchTick <= repeatTicks + 1;
        if (!due && !touched && !sweep && !(recent && repeatTicks > 0)) continue;
        const kw = ks.window;
        const c = Math.floor(now / rt.bw);
        if (c > kw.cur) kw.roll(c);
        // from the bucket of the send before last: one lost message is repaired by the next
        let from = relaying ? Number.NEGATIVE_INFINITY : ks.prevBucket;
        let demand = -1;
        if (!due) {
          const ownLeft = kw.ownEstimate(1);
          if (anti && ownLeft > 0) from = Number.NEGATIVE_INFINITY;
          else if (recent && repeatTicks > 0 && ks.sentTick > tick - repeatTicks - 2) {
            // a repeat: the buckets of the last send again
          } else if (touched) {
            // peers age a demand by the time since it came: a touched key's goes every tick
            demand = Math.ceil(demandPerWindow(ks, now, rt.policy.windowMs, rt.bw));
            from = Number.POSITIVE_INFINITY; // no counts changed: the demand alone
          } else {
            if (!recent && ownLeft === 0) {
              dirty.delete(ks);
              ks.inDirty = false;
            }
            continue;
          }
        }
        const e = ownEntry(ks, rt, now, from, demand);
        const bytes = entryBytes(e);
        if (entries.length >= max || size + bytes > maxGossipBytes) {
          // a repeat or a demand that did not fit is no loss; unsent admissions are
          if (due) ks.pending = true;
          continue;
        }
        size += bytes;
        entries.push(e);
        ks.sentDemand = e.demand;
        ks.sentDemandAt = now;
        reportDemand(ks, e.demand, now, core.builtAt);
        ks.unsynced = 0;
        ks.pending = false;
        ks.sentTick = tick;
        ks.sentSeq = seq;
        if (from !== Number.POSITIVE_INFINITY) {
          // a demand alone carried no counts: what the next message carries stays as it was
          ks.prevBucket = from === Number.NEGATIVE_INFINITY ? kw.cur : ks.sentBucket;
          ks.sentBucket = kw.cur;
        }
      }
    }
    return this.encode(now, seq, core.peers.live.length + 1, reach, repair, nacks, entries);
  }

  /** Our message numbered `seq`, sent at `now`, saying `members` (0: a farewell); counted. */
  private encode(
    now: number,
    seq: number,
    members: number,
    reach: number | undefined,
    repair: number,
    nacks: WireNack[],
    entries: WireEntry[],
  ): Uint8Array {
    const core = this.core;
    core.seq = seq;
    core.builtAt = now;
    if (!core.startGate(now)) {
      // the start gate: a member has heard us once it sends D after our first message with it live
      if (core.firstSentAt === Number.POSITIVE_INFINITY) core.firstSentAt = now;
      for (const p of core.peers.live) if (p.sentToAt === Number.POSITIVE_INFINITY) p.sentToAt = now;
    }
    const live = core.peers.live.length;
    const bytes = encodeGossip({
      policies: core.wireTable,
      seq,
      sentAt: now,
      members,
      reach: reach === undefined ? live + 1 : Math.max(1, Math.min(LIMITS.origins, Math.floor(reach) || 1)),
      repair,
      nacks,
      entries,
    });
    core.counters.gossipOut++;
    core.counters.gossipBytesOut += bytes.length;
    return bytes;
  }

  /**
   * The farewell (Engine.farewell): the last message of a node that has stopped deciding. Its
   * header says 0 members, and it carries the whole window of every global key this node holds
   * own counts of, with its demand, and no repair requests, so a peer that merges it holds every
   * count this node admitted that is still in a window, whatever messages it missed.
   * Undefined where it could not carry all that: when those do not fit one message
   * (`maxKeysPerMessage`, `maxGossipBytes`; a part would leave a peer without the rest), when a
   * key with own counts still in a window was evicted (its counts are in no message), and when
   * this node holds counts on its unattributed floor (a restart's earlier admissions, a
   * snapshot's: never gossiped as its own, and a peer that joined since may not hold them). The
   * node then leaves as before: its peers see it stale and keep a share for it until it departs.
   */
  farewell(now: number, reach: number | undefined): Uint8Array | undefined {
    const core = this.core;
    const { maxKeysPerMessage: max, maxGossipBytes } = core.cfg;
    if (now - core.ownEvictedAt < 2 * core.maxWindowMs) return undefined;
    const entries: WireEntry[] = [];
    let size = gossipHeaderBytes(core.wireTable, []);
    for (const rt of core.rts) {
      if (rt.local) continue;
      const c = Math.floor(now / rt.bw);
      for (const ks of rt.windows.map.values()) {
        const kw = ks.window;
        if (c > kw.cur) kw.roll(c);
        if (kw.floorEstimate(1) > 0) return undefined;
        if (!(kw.ownEstimate(1) > 0)) continue;
        // its demand as it was: the peers fade it over a window (Rule.computeShare)
        const e = ownEntry(ks, rt, now);
        size += entryBytes(e);
        if (entries.length >= max || size > maxGossipBytes) return undefined;
        entries.push(e);
      }
    }
    core.tick++;
    core.stamp++;
    return this.encode(now, core.seq + 1, 0, reach, 0, [], entries);
  }

  /** The repair requests of our next message: every member (not ignored, not skewed) we missed messages of. */
  private nacks(): WireNack[] {
    const out: WireNack[] = [];
    // The one gate of repair requests in relay mode (entries are whole windows, and a relay
    // drops the messages between, so gaps are the rule): none is asked for, whatever the
    // peers' nack state says; nacked() is the gate of the answering side.
    if (this.core.cfg.relayHops > 0) return out;
    const now = this.core.lastNow;
    for (const p of this.core.peers.byIdx) {
      if (p === undefined || p.nack < 0 || !p.member || p.skewed || now < p.ignoredUntil) continue;
      out.push({ origin: p.id, have: p.nack, seen: Math.max(p.seq, p.nack) });
      if (out.length >= LIMITS.nacks) break;
    }
    return out;
  }

  /**
   * A peer asks us to resend what we sent in messages numbered `have + 1` and up. Not when a
   * repair from there is already on its way to it (made in a message it had not seen yet), nor
   * for numbers we never sent (a peer that heard our previous life: it starts over when it
   * hears this one).
   */
  private nacked(x: WireNack): void {
    const core = this.core;
    if (core.cfg.relayHops > 0 || x.seen > core.seq) return;
    if (core.lastRepairAt > x.seen && core.lastRepairFrom <= x.have + 1) return;
    core.repairFrom = Math.min(core.repairFrom, x.have + 1);
  }

  /**
   * Loss detection on a message numbered `seq` from `peer` (accepted; `merged`: its entries
   * were merged): a gap after the last one we hold, a first message that is not its first, or
   * a restart that is not at its first message, asks for a repair; a message repairing from
   * no later than what we hold ends the ask.
   */
  private track(peer: PeerState, seq: number, repair: number, merged: boolean): void {
    const had = peer.seq;
    let nack = peer.nack;
    if (peer.messages === 0 || seq < had) {
      // first heard, or restarted (a new life numbers from 1 again)
      nack = seq > 1 ? 0 : -1;
    } else if (seq > had + 1) {
      nack = nack < 0 ? had : Math.min(nack, had);
    }
    if (!merged) nack = nack < 0 ? Math.max(0, seq - 1) : Math.min(nack, seq - 1);
    else if (nack >= 0 && repair > 0 && repair <= nack + 1) nack = -1;
    peer.nack = nack;
  }

  /**
   * Merge a peer's gossip. The message is decoded and every entry validated
   * before anything is merged: a bad message is dropped whole and counted by
   * reason. Counts above what the origin could have admitted are capped.
   */
  receive(from: string, bytes: Uint8Array, now: number, relayed = false): ReceiveResult {
    const core = this.core;
    const max = core.cfg.maxKeysPerMessage;
    if (typeof from !== 'string' || from.length === 0 || from.length > 128) return core.drop('bad-sender');
    if (from === core.nodeId) return core.drop('self');
    const known = core.peers.get(from);
    if (known !== undefined && now < known.ignoredUntil) return core.drop('peer-ignored');
    // refused from the header alone: a message with too many keys costs no decoding
    if (peekGossipEntries(bytes) > max) return core.drop('too-many-keys');
    const dec = decodeMessage(bytes);
    if (!dec.ok) return core.drop(dec.reason);
    const m = dec.message;
    if (m.type !== TYPE_GOSSIP) return core.drop('bad-type');
    if (m.entries.length > max) return core.drop('too-many-keys');
    const map = core.mapTable(undefined, m.policies, now);
    const bad = validateEntries(m.entries, map);
    if (bad !== undefined) return core.drop(bad);
    const peer = known ?? core.peers.ensure(from);
    if (peer === undefined) return core.drop('too-many-peers');
    // A restarted peer starts its sequence again: accept when its clock moved on. A farewell only
    // when it is newer than all we heard (an old life's, replayed by a relay after a restart,
    // would depart a live member).
    if (m.seq <= peer.seq && m.sentAt <= peer.lastSentAt) return core.drop('duplicate');
    if (m.members === 0 && m.sentAt < peer.lastSentAt) return core.drop('duplicate');
    if (core.awaitNames.size > 0) core.awaitNames.delete(peer.id);
    // a member a sync answer said was gone speaks for itself: its own counts replace that word
    // (a new peer's first messages ask for its whole window)
    if (peer.gone) {
      peer.gone = false;
      core.forgetCounts(peer);
    }
    core.counters.gossipIn++;
    core.counters.gossipBytesIn += bytes.length;
    core.mapTable(peer, m.policies, now);
    for (const x of m.nacks) if (x.origin === core.nodeId) this.nacked(x);
    // a relayed copy's delay includes its hops: no sample of the offset (a lower bound only when direct)
    const applied = peer.appliedOffsetMs;
    const off = relayed ? peer.clockOffsetMs : sampleOffset(peer, m.sentAt, now, core.cfg.expectedDelayMs);
    const merged = this.checkSkew(peer, off);
    this.track(peer, m.seq, m.repair, merged);
    if (merged) {
      const shift = appliedOffset(peer, core.cfg.expectedDelayMs);
      // its counts so far sit where the old offset put them: ask for its whole window again, to
      // put them where they belong (the old places stay counted until they age out: an over-count)
      if (shift !== applied) peer.nack = 0;
      let capped = false;
      for (const e of m.entries) {
        const rt = map[e.policy];
        if (rt === undefined) core.counters.foreignEntries++;
        else if (this.merge(rt, peer.idx, e, now, shift)) capped = true;
      }
      if (capped && this.strike(peer, now)) return { ok: true };
    }
    // heard again after a silence past staleness (a partition, most likely both ways): what we
    // sent meanwhile is resent whole now, without waiting for its nack
    if (peer.messages > 0 && now - peer.lastHeard > core.cfg.staleAfterMs) {
      core.repairFrom = Math.min(core.repairFrom, peer.ourSeqHeard + 1);
      core.early = true;
    }
    peer.ourSeqHeard = core.seq;
    const wasMember = peer.member;
    // a farewell merged: see below (a repeated one leaves it no member)
    const farewell = m.members === 0 && merged && !(now < peer.switchedUntil);
    peer.member = !farewell;
    if (!farewell) peer.left = false;
    peer.messages++;
    peer.seq = m.seq;
    peer.lastSentAt = m.sentAt;
    peer.lastHeard = now;
    peer.members = m.members;
    const delay = now - (m.sentAt - peer.clockOffsetMs);
    peer.delayMs = delay < 0 ? 0 : Math.min(delay, 60_000);
    core.stamp++;
    // A farewell merged: its sender has stopped deciding and every count of it still in a window
    // is here now, so it leaves the mesh at once (no share of L kept for it while it would turn
    // stale and depart). Not one whose counts were not merged (a skewed clock): that peer turns
    // stale and departs as before, its reserve kept meanwhile; nor one that moved from another
    // version of one of our policies to ours within the longest window: what it admitted of the
    // other one is in no window here, and its reserve as a member on another version, which
    // covered it, ended with the move, so it too turns stale and departs as before. One on
    // another version now keeps that reserve for a window (EngineCore.expireForeign).
    if (farewell) {
      core.peerLeft(peer, now, wasMember);
      return { ok: true };
    }
    if (!wasMember || peer.stale) core.refresh(now);
    else core.heardLive(peer);
    return { ok: true };
  }

  /** False (and the peer marked skewed, counted, logged once) when its offset is past maxClockOffsetMs. */
  checkSkew(p: PeerState, off: number): boolean {
    const core = this.core;
    const maxClockOffsetMs = core.cfg.maxClockOffsetMs;
    const skewed = !(Math.abs(off) <= maxClockOffsetMs);
    if (skewed) core.counters.clockSkewed++;
    if (skewed !== p.skewed) {
      p.skewed = skewed;
      core.stamp++;
      if (skewed)
        core.cfg.logger?.warn(
          { peer: p.id, clockOffsetMs: off, maxClockOffsetMs },
          'ratemesh peer clock is too far off: its counts are not merged and it counts as stale',
        );
    }
    return !skewed;
  }

  /**
   * A peer's message was capped: count it, and past `strikesToIgnore` capped
   * messages within a window ignore the peer for `ignoreMs`. Returns true when
   * it was ignored now. An ignored peer is put outside the mesh: the counts it
   * sent are dropped, and it is no member (no share of L is kept for it) until
   * the ignore ends and it is heard again. It has shown that it claims counts
   * it could not have admitted, and a member that lies about its admissions is
   * outside what any limiter can see (docs/security.md); keeping L/N for it
   * held honest nodes to 8,548 of 9,980 in the hostile drill.
   */
  strike(peer: PeerState, now: number): boolean {
    const core = this.core;
    core.counters.capped++;
    if (now - peer.strikeSince > core.maxWindowMs) {
      peer.strikes = 0;
      peer.strikeSince = now;
    }
    peer.strikes++;
    if (peer.strikes < core.cfg.strikesToIgnore) return false;
    peer.strikes = 0;
    peer.ignoredUntil = now + core.ignoreMs;
    core.counters.peersIgnored++;
    core.ignore(peer, now);
    core.cfg.logger?.warn(
      { peer: peer.id, ignoreMs: core.ignoreMs, strikes: core.cfg.strikesToIgnore },
      'ratemesh peer sent counts it could not have admitted: ignored for a while',
    );
    return true;
  }

  /** Key `key` of `rt` (created when not tracked), its window rolled to `now`. */
  keyAt(rt: PolicyRuntime, key: string, now: number): KeyState {
    let ks = rt.windows.get(key);
    if (ks === undefined) ks = this.core.createKey(rt, key);
    const c = Math.floor(now / rt.bw);
    if (c > ks.window.cur) ks.window.roll(c);
    return ks;
  }

  /**
   * Merge one entry into origin `origin`'s slot (FLOOR: the unattributed
   * floor). What one origin holds for a key is capped over the whole ring,
   * across every message it sent, not per message: at most L in a bucket,
   * L + maxCost over the full-weight buckets (an honest node's own estimate
   * never passes L) and 2L over the ring (the oldest bucket may still hold up
   * to L while the rest refills). Its demand is capped at L, as every node caps
   * its own. Returns true when anything was capped.
   */
  merge(rt: PolicyRuntime, origin: number, e: WireEntry, now: number, offsetMs = 0): boolean {
    // Its bucket b covers our time [b·bw - off, (b+1)·bw - off): moved to the
    // later of the two of ours it overlaps (its counts then stay in our window
    // at least as long as they should); a tenth of a bucket is tolerated.
    const shift = offsetMs === 0 ? 0 : -Math.floor(offsetMs / rt.bw + 0.1);
    const L = rt.policy.limit;
    const fullCap = L + Math.min(rt.policy.maxCost, L);
    const ringCap = 2 * L;
    const kw = this.keyAt(rt, e.key, now).window;
    // counts arriving now were admitted before now, and most within a gossip interval and the
    // data's age of it (KeyWindow: peers' counts span that part of their bucket)
    const cfg = this.core.cfg;
    const age = (cfg.gossipIntervalMs + cfg.dataDelayMs) / rt.bw;
    const capped = kw.mergeCapped(origin, e.base, shift, e.counts, L, fullCap, ringCap, now / rt.bw, age);
    // where counts keep no arrival spans (buckets short against gossip), the sender's skews: how
    // far its counts in a bucket run later than the even spread the estimate weighs them by
    const sk = e.skews;
    if (sk !== undefined && origin !== FLOOR && !keepsSpans(age))
      for (let i = 0; i < sk.length; i++) if (sk[i]! > 0) kw.mergeSkew(origin, e.base + i + shift, sk[i]!);
    // the share rule uses at most L of it (computeShare); the stale reserve bounds it by L - seen
    if (origin !== FLOOR) kw.setDemand(origin, Math.min(e.demand, 1000 * L), now);
    return capped;
  }
}

/**
 * A key's wire entry of our own counts (origin 0) and demand, in the policy's wire row: the
 * counts of buckets `from` .. current (clamped to the window; the whole window by default,
 * none when `from` is past the current bucket). `demand` < 0: computed now.
 */
export function ownEntry(
  ks: KeyState,
  rt: PolicyRuntime,
  now: number,
  from = Number.NEGATIVE_INFINITY,
  demand = -1,
): WireEntry {
  const kw = ks.window;
  const lo = Math.max(from, kw.cur - kw.k);
  return {
    origin: 0,
    policy: rt.wire,
    key: ks.key,
    base: Math.min(lo, kw.cur),
    counts: lo > kw.cur ? [] : kw.ownCounts(lo),
    skews: lo > kw.cur ? [] : kw.ownSkews(lo),
    demand: demand >= 0 ? demand : Math.ceil(demandPerWindow(ks, now, rt.policy.windowMs, rt.bw)),
  };
}

/**
 * Every entry, merged or not, must hold a valid key; one of a policy we run
 * at the same version (`map`) at most buckets + 2 counts. Entries of policies
 * we do not run, or run at another version, are not an error: they are
 * skipped when merging.
 */
export function validateEntries(
  entries: readonly WireEntry[],
  map: readonly (PolicyRuntime | undefined)[],
): string | undefined {
  for (const e of entries) {
    if (!isValidKey(e.key)) return 'bad-key';
    const rt = map[e.policy];
    if (rt !== undefined && e.counts.length > rt.policy.buckets + 2) return 'bad-field';
  }
  return undefined;
}

/**
 * This node's demand for a key in cost per window: what it was offered in the window, and while
 * the key is younger than a window, at least the rate its arrivals so far show, scaled to a window
 * from the first: (offered − 1) · W / age. The first arrival says nothing of a rate (one request
 * on a new key is not a window's worth of them: it would claim all the room its peers' first
 * requests need), a burst does (its cost at once is its whole window's demand).
 */
function demandPerWindow(ks: KeyState, now: number, W: number, bw: number): number {
  const kw = ks.window;
  const w = Math.min(1, 1 - (now - kw.cur * bw) / bw);
  const offered = kw.offeredEstimate(w);
  const age = now - ks.created;
  return age >= W ? offered : Math.max(offered, ((offered - 1) * W) / Math.max(age, bw));
}

function isValidKey(key: string): boolean {
  try {
    validateKey(key);
    return true;
  } catch {
    return false;
  }
}
