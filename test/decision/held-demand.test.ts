import { describe, expect, it } from 'vitest';
import { heldDemand, KeyState, recordSentDemand } from '../../src/decision/key-state.js';

/** A key whose own demand reports went out at `sent` ([time, demand]), as the gossip records them. */
function sentAt(sent: [number, number][], lag: number): KeyState {
  const ks = new KeyState(10, 0, 'k');
  for (const [t, v] of sent) {
    recordSentDemand(ks, v, t, lag);
    ks.sentDemand = v;
    ks.sentDemandAt = t;
  }
  return ks;
}

describe('heldDemand: own demand as every peer can hold it', () => {
  it('never reported: the demand as sent (nothing recorded)', () => {
    const ks = new KeyState(10, 0, 'k');
    expect(heldDemand(ks, 1000, 10)).toBe(0);
  });

  it('a rise counts only once its report is two epochs of lag old; until then the report before', () => {
    // lag 10: epochs of 10 ms. 1 at 100, 5 at 125.
    const ks = sentAt(
      [
        [100, 1],
        [125, 5],
      ],
      10,
    );
    expect(heldDemand(ks, 125, 10)).toBe(1);
    expect(heldDemand(ks, 134, 10)).toBe(1);
    // 135 is one epoch on (epoch 13 vs 12): 5 may still be in flight
    expect(heldDemand(ks, 139, 10)).toBe(1);
    expect(heldDemand(ks, 140, 10)).toBe(5);
    expect(heldDemand(ks, 10_000, 10)).toBe(5);
  });

  it('a first report counts as 0 until it is held', () => {
    const ks = sentAt([[100, 3]], 10);
    expect(heldDemand(ks, 100, 10)).toBe(0);
    expect(heldDemand(ks, 119, 10)).toBe(0);
    expect(heldDemand(ks, 120, 10)).toBe(3);
  });

  it('a fall counts at once (peers still on the larger hold back more)', () => {
    const ks = sentAt(
      [
        [100, 8],
        [200, 2],
      ],
      10,
    );
    expect(heldDemand(ks, 200, 10)).toBe(2);
  });

  it('reports faster than the lag: the smallest of those a peer may still be missing, never a newer rise', () => {
    // lag 50, a report every 10 ms rising 1, 2, ..., 10 from t = 0
    const sent: [number, number][] = Array.from({ length: 10 }, (_, i) => [i * 10, i + 1]);
    const ks = sentAt(sent, 50);
    // at 95 (epoch 1): reports in epochs 0 and 1 count as in flight, and before them there was
    // none: 0 (a peer surely holds 5 by then; two epochs of lag err on the safe side)
    expect(heldDemand(ks, 95, 50)).toBe(0);
    // at 100 (epoch 2): epoch 0's last (5) is held, epoch 1's may not be: min(5, 6..10) = 5
    expect(heldDemand(ks, 100, 50)).toBe(5);
    // at 150 (epoch 3): all held
    expect(heldDemand(ks, 150, 50)).toBe(10);
    // whatever the time, never more than a report that went out at least lag before
    for (let now = 0; now < 200; now++) {
      const held = heldDemand(ks, now, 50);
      const surely = sent.filter(([t]) => t <= now - 50).at(-1)?.[1] ?? 0;
      expect(held).toBeLessThanOrEqual(Math.max(surely, 0));
    }
  });

  it('without a lag (dataDelayMs 0) the demand as sent', () => {
    const ks = sentAt([[100, 4]], 0);
    expect(heldDemand(ks, 100, 0)).toBe(4);
  });
});
