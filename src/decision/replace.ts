import type { PolicySet } from '../policy/index.js';
import { policyVersion } from '../policy/index.js';
import type { EngineCore } from './core.js';
import type { PolicyReplacement, VersionMismatch } from './types.js';

/**
 * Make `next` the policy set in force at `now`; see {@link Engine.replacePolicies}. A policy
 * whose version is unchanged keeps everything; a changed one starts fresh (its window carried
 * over when only its limit changed); a removed one is dropped.
 */
export function replacePolicies(core: EngineCore, next: PolicySet, now: number): PolicyReplacement {
  const out: PolicyReplacement = { kept: [], changed: [], added: [], removed: [], version: next.version };
  const old = core.rtByName;
  core.policySet = next;
  const rts = next.policies.map((policy, idx) => {
    const was = old.get(policy.name);
    const version = next.versionOf(policy.name) ?? policyVersion(policy);
    if (was !== undefined && was.version === version) {
      out.kept.push(policy.name);
      if (was.idx !== idx) {
        was.idx = idx;
        for (const ks of was.windows.map.values()) ks.policy = idx;
      }
      return was;
    }
    if (was === undefined) out.added.push(policy.name);
    else out.changed.push(policy.name);
    const rt = core.makeRt(policy, idx);
    const carried =
      was !== undefined &&
      !was.local &&
      !rt.local &&
      was.policy.windowMs === policy.windowMs &&
      was.policy.buckets === policy.buckets;
    if (carried) {
      // Same window and buckets (say, only the limit changed): the counts in
      // the window are requests already admitted, under either definition.
      // They carry over (own counts are gossiped again under the new
      // version), so a node that changes does not admit a second window's
      // worth on top of what it just admitted. A front limiter's state does not.
      for (const [key, ks] of was.windows.drain()) {
        ks.policy = idx;
        ks.local = undefined;
        ks.shareStamp = -1;
        rt.windows.insert(key, ks);
        core.touch(ks);
      }
    }
    if (!rt.local) {
      // until they say otherwise, members run what they last told us
      for (const p of core.peers.live.concat(core.peers.stale)) {
        const row = p.policies.find((r) => r.name === policy.name);
        if (row !== undefined && row.version !== version) core.markForeign(rt, p, row.version, p.lastHeard);
      }
      // Peers that left by a farewell: what they admitted of the policy is in our windows only if
      // we merged it (they ran the version we ran) and the windows carried over; else it is in
      // none, so each counts as spending L/N of it until its last message is a window old.
      for (const p of core.peers.left) {
        const row = p.policies.find((r) => r.name === policy.name);
        if (row === undefined) continue;
        const merged = carried && row.version === was!.version;
        if (!merged) core.markForeign(rt, p, row.version, p.lastHeard);
      }
    }
    return rt;
  });
  const keep = new Set(rts);
  for (const [name, rt] of old) {
    if (keep.has(rt)) continue;
    if (!out.changed.includes(name)) out.removed.push(name);
    // (a changed policy's carried-over windows left this store already)
    for (const ks of rt.windows.map.values()) {
      if (ks.inDirty) {
        core.dirty.delete(ks);
        ks.inDirty = false;
      }
    }
    rt.windows.dispose();
    rt.locals.dispose();
    rt.hotKey = undefined;
    rt.hotKs = undefined;
    rt.fastKs = undefined;
  }
  core.installRts(rts);
  core.windowBounds();
  // A policy that changed may now match what members run: their counts of it were not merged
  // while versions differed, and only changes travel. Ask every member for its whole window,
  // and send ours whole (a rare event, within maxGossipBytes a message).
  for (const peer of core.peers.byIdx) if (peer?.member) peer.nack = 0;
  if (core.cfg.relayHops === 0) core.repairFrom = 1;
  core.counters.policyReplacements++;
  core.stamp++;
  core.refresh(now);
  return out;
}

/** Policies some members run at another version than ours, and which versions. */
export function versionMismatches(core: EngineCore): VersionMismatch[] {
  const out: VersionMismatch[] = [];
  for (const rt of core.rtByWire) {
    if (rt.foreign.length === 0) continue;
    const peers: Record<string, string> = {};
    for (let i = 0; i < rt.foreign.length; i++) peers[rt.foreign[i]!.id] = rt.foreignVer[i]!;
    out.push({ policy: rt.policy.name, ours: rt.version, peers });
  }
  return out;
}
