import { describe, expect, it } from 'vitest';
import { alignsRounds, holdMs, nextTickMs } from '../../src/mesh/rounds.js';

describe('aligned gossip rounds: the schedule (src/mesh/rounds.ts)', () => {
  it('a tick when the clock reads k·g − lead', () => {
    expect(nextTickMs(1_000, 100, 10)).toBe(90);
    expect(nextTickMs(1_089, 100, 10)).toBe(1);
    expect(nextTickMs(1_090, 100, 10)).toBe(0);
    expect(nextTickMs(1_091, 100, 10)).toBe(99);
    expect(nextTickMs(1_000, 100, 0)).toBe(0);
    expect(nextTickMs(-5, 100, 10)).toBe(95);
  });

  it('a message that arrives within the lead before k·g waits for it; any other goes in at once', () => {
    expect(holdMs(1_095, 100, 10)).toBe(5);
    expect(holdMs(1_090, 100, 10)).toBe(10);
    expect(holdMs(1_089.5, 100, 10)).toBe(0); // out of round (or a slow link): at once
    expect(holdMs(1_100, 100, 10)).toBe(0); // at the round itself
    expect(holdMs(1_101, 100, 10)).toBe(0); // late: at once
    expect(holdMs(1_095, 100, 0)).toBe(0);
  });

  it('aligned where a round’s messages arrive within it: d at most g/2', () => {
    expect(alignsRounds(100, 10)).toBe(true);
    expect(alignsRounds(100, 50)).toBe(true);
    expect(alignsRounds(100, 51)).toBe(false);
    expect(alignsRounds(10, 10)).toBe(false);
  });
});
