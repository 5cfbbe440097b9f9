import { describe, expect, it } from 'vitest';
import { parseOptions } from '../../src/mesh/options.js';
import { holdMs, nextTickMs, roundWaitMs } from '../../src/mesh/rounds.js';

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

  it('one tick a round: a mesh clock set back after its tick never brings that mark round again', () => {
    // armed for the mark 1,090 (g = 100, lead 10); it fires when the clock, its estimate moved
    // back by 2 ms, reads 1,088.5: the next tick is 1,190's, not 1,090's in 1.5 ms
    expect(roundWaitMs(1_088.5, 100, 10, 1_090)).toBe(101.5);
    // on time or late: the next mark
    expect(roundWaitMs(1_090, 100, 10, 1_090)).toBe(100);
    expect(roundWaitMs(1_093, 100, 10, 1_090)).toBe(97);
    // a clock set forward past the next mark: that one's, not skipped
    expect(roundWaitMs(1_191, 100, 10, 1_090)).toBe(99);
    // no tick before
    expect(roundWaitMs(1_000, 100, 10, Number.NEGATIVE_INFINITY)).toBe(90);
    // over many ticks on a clock whose estimate wanders by ±3 ms: every mark once
    let mark = Number.NEGATIVE_INFINITY;
    let t = 0;
    const marks: number[] = [];
    for (let i = 0; i < 1_000; i++) {
      const wander = ((i * 7919) % 61) / 10 - 3;
      const wait = roundWaitMs(t + wander, 100, 10, mark);
      mark = t + wander + wait;
      marks.push(mark);
      t += wait;
    }
    for (let i = 1; i < marks.length; i++) expect(marks[i]! - marks[i - 1]!).toBeGreaterThanOrEqual(50);
  });
});

describe('gossipRounds: spread by default, aligned when asked (docs/decision-rule.md, "Rounds")', () => {
  const base = { policies: [{ name: 'api', limit: 100, windowMs: 1000 }], listen: ['/ip4/127.0.0.1/tcp/0'] };

  it('spread unless set: no round lead, whatever the interval and delay', () => {
    expect(parseOptions(base).roundLeadMs).toBeUndefined();
    expect(parseOptions({ ...base, gossipIntervalMs: 100, expectedDelayMs: 10 }).roundLeadMs).toBeUndefined();
    expect(parseOptions({ ...base, gossipRounds: 'spread' }).roundLeadMs).toBeUndefined();
  });

  it('aligned: the lead is the expected delay, which must be under the interval', () => {
    expect(parseOptions({ ...base, gossipRounds: 'aligned', expectedDelayMs: 20 }).roundLeadMs).toBe(20);
    expect(() =>
      parseOptions({ ...base, gossipRounds: 'aligned', gossipIntervalMs: 10, expectedDelayMs: 10 }),
    ).toThrow(/gossipRounds/);
    expect(() => parseOptions({ ...base, gossipRounds: 'round' as 'aligned' })).toThrow(/gossipRounds/);
  });
});
