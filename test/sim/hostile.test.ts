import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeGossip, encodeSyncResponse, type WireEntry } from '../../src/crdt/codec.js';
import { worstRolling } from '../../src/sim/metrics.js';
import { Simulator } from '../../src/sim/simulator.js';
import { L, policy, TRACE } from './helpers.js';

const EPOCH = 1.7e12;
const BW = 20; // W / k of the seed policy

type Attack = 'none' | 'inflate' | 'demand' | 'forged-sync' | 'forged-gone' | 'huge';

/**
 * The seed trace on 8 nodes (g = d = 10) while a rogue member (it holds the
 * psk, so it can publish and answer sync) attacks every node every 10 ms.
 */
function run(attack: Attack) {
  const sim = new Simulator({ nodes: 8, policies: policy(), gossipIntervalMs: 10, delayMs: 10 });
  const policies = sim.engines[0]!.policyTable();
  let seq = 0;
  let huge: Uint8Array | undefined;
  let hugeBytes = 0;
  const gossipAt = (t: number, entries: WireEntry[]) =>
    encodeGossip({ policies, seq: ++seq, sentAt: EPOCH + t, members: 9, reach: 9, entries });
  const entry = (e: Partial<WireEntry>): WireEntry => ({
    origin: 0,
    policy: 0,
    key: 'global',
    base: 0,
    counts: [0],
    demand: 0,
    ...e,
  });
  if (attack === 'forged-gone') {
    // every node pulls the rogue at start; the rogue names 40 members gone that never were, each
    // with counts just under the caps (2L per key of them in one answer), and no live member
    sim.at(0, () => {
      for (let i = 0; i < 8; i++) {
        const req = decodeMessage(sim.engines[i]!.buildSyncRequest());
        if (!req.ok || req.message.type !== 2) throw new Error('no request');
        const cur = Math.floor(EPOCH / BW);
        const fakes = Array.from({ length: 40 }, (_, j) => `gone-${j}`);
        const res = encodeSyncResponse({
          policies,
          t0: req.message.t0,
          t1: req.message.t0,
          origins: ['rogue', ...fakes],
          entries: fakes.map((_, j) => entry({ origin: j + 1, base: cur - 50, counts: Array(51).fill(1) })),
        });
        sim.engines[i]!.receiveSyncResponse('rogue', res);
      }
    });
  }
  if (attack === 'forged-sync') {
    // every node pulls the rogue at start; the rogue answers with counts of other members and of the asker
    sim.at(0, () => {
      for (let i = 0; i < 8; i++) {
        const req = decodeMessage(sim.engines[i]!.buildSyncRequest());
        if (!req.ok || req.message.type !== 2) throw new Error('no request');
        const cur = Math.floor(EPOCH / BW);
        const res = encodeSyncResponse({
          policies,
          t0: req.message.t0,
          t1: req.message.t0,
          origins: ['rogue', ...sim.ids],
          entries: sim.ids.map((_, j) =>
            entry({ origin: j + 1, base: cur - 50, counts: Array(51).fill(50) }),
          ),
        });
        sim.engines[i]!.receiveSyncResponse('rogue', res);
      }
    });
  }
  const tick = (t: number) => {
    const cur = Math.floor((EPOCH + t) / BW);
    let bytes: Uint8Array | undefined;
    if (attack === 'inflate') {
      // L in one bucket per message, a different bucket each time: every message respects the per-message caps
      bytes = gossipAt(t, [entry({ base: cur + 1 - (seq % 52), counts: [L] })]);
    } else if (attack === 'demand') {
      bytes = gossipAt(t, [entry({ base: cur, counts: [0], demand: 2 ** 40 })]);
    } else if (attack === 'huge') {
      if (huge === undefined) {
        huge = gossipAt(
          t,
          Array.from({ length: 20_000 }, (_, i) => entry({ key: `k${i}`, base: cur, counts: [1] })),
        );
        hugeBytes = huge.length;
      }
      bytes = huge;
    } else if (attack === 'forged-sync' || attack === 'forged-gone') {
      bytes = gossipAt(t, []); // a heartbeat: it stays a live member
    }
    if (bytes !== undefined) for (const e of sim.engines) e.receiveGossip('rogue', bytes);
    if (t + 10 <= 10_000) sim.at(t + 10, () => tick(t + 10));
  };
  if (attack !== 'none') sim.at(5, () => tick(5));
  const admitted: number[] = [];
  for (let i = 0; i < TRACE.t.length; i++) {
    sim.runUntil(TRACE.t[i]!);
    if (sim.request(TRACE.node[i]!, 'seed', 'global').allowed) admitted.push(TRACE.t[i]!);
  }
  return {
    admitted: admitted.length,
    worst1s: worstRolling(admitted, 1000),
    stats: sim.engines.map((e) => e.stats()),
    hugeBytes,
  };
}

// Admitted (of the 9,980 admitted without a rogue) at the branch point of this work, same runs:
// inflate 10, demand 10, forged sync 9,134, 20,000-key messages 9,425.
describe('a hostile member on the seed trace (8 honest nodes, g = d = 10)', () => {
  const base = run('none');

  it('inflated counts spread over messages: capped, the rogue ignored and put outside the mesh; honest nodes admit at least 90 %, never over L + 2 %', () => {
    const r = run('inflate');
    expect(r.worst1s).toBeLessThanOrEqual(L * 1.02);
    // measured 9,979 of 9,980: once ignored the rogue's counts are dropped and no share is kept for it
    // (before: 8,548, the ignored rogue was a stale member counted as L/N with N = 9; before that 10)
    expect(r.admitted).toBeGreaterThanOrEqual(0.9 * base.admitted);
    for (const s of r.stats) {
      expect(s.peersIgnored).toBe(1);
      expect(s.members).toBe(8);
    }
  });

  it('demand claims backed by no counts: honest nodes admit at least 90 %', () => {
    const r = run('demand'); // measured 9,907 (before: 10)
    expect(r.worst1s).toBeLessThanOrEqual(L * 1.02);
    expect(r.admitted).toBeGreaterThanOrEqual(0.9 * base.admitted);
  });

  it('forged sync answers credit nothing to other members: honest nodes admit at least 90 %', () => {
    const r = run('forged-sync'); // measured 9,676 (before: 9,134)
    expect(r.worst1s).toBeLessThanOrEqual(L * 1.02);
    expect(r.admitted).toBeGreaterThanOrEqual(0.9 * base.admitted);
    // The answer names the 7 other members, not heard yet at 0 ms, as gone: counts a member gone
    // may carry, but each is over the 2L a key may take of members gone in one answer (and a
    // member's own gossip replaces what an answer said of it).
    for (const s of r.stats) {
      expect(s.dropped['sync-gone-over-limit']).toBe(7);
      expect(s.goneSynced).toBe(0);
    }
  });

  it('members gone that never were, within the caps: honest nodes admit at least 90 %, never over L + 2 %', () => {
    // measured 9,476 of 9,980: up to 2L of made-up counts per key at join, until they leave the window
    const r = run('forged-gone');
    expect(r.worst1s).toBeLessThanOrEqual(L * 1.02);
    expect(r.admitted).toBeGreaterThanOrEqual(0.9 * base.admitted);
    for (const s of r.stats) {
      // 39 of the 40 within 2L (the 40th passes it), passed on in the late sync's answers
      expect(s.dropped['sync-gone-over-limit']).toBe(1);
      expect(s.goneSynced).toBeGreaterThanOrEqual(39);
      // forgotten once their counts left the window: the table holds the members only
      expect(s.peerTable).toBe(8);
      expect(s.members).toBe(9);
    }
  });

  it('20,000-key messages are dropped before merging: nothing changes', () => {
    const r = run('huge'); // measured 9,980, unchanged (before: 9,425, 20,000 keys merged per message)
    expect(r.admitted).toBe(base.admitted);
    expect(r.hugeBytes).toBeGreaterThan(200_000);
    for (const s of r.stats) {
      expect(s.dropped['too-many-keys']).toBeGreaterThan(990);
      expect(s.keys).toBe(1);
    }
  });
});
