import { describe, expect, it } from 'vitest';
import { PeerTable } from '../../src/decision/peers.js';
import { staticAllowance } from '../../src/decision/rule.js';
import { Prng } from '../../src/sim/prng.js';

function heard(t: PeerTable, id: string, at: number): void {
  const p = t.ensure(id)!;
  p.member = true;
  p.lastHeard = at;
}

const one = new PeerTable('self', 50, 500, 10);
/** A table whose only assignment is `rank` among `n`, in force (one table, reused). */
function assigned(rank: number, n: number): PeerTable {
  one.unitRank[0] = rank;
  one.unitN[0] = n;
  return one;
}

describe('static units: the window L dealt equally over the members', () => {
  it('the members of one assignment hold floor(L) units between them, whatever L, N and phase', () => {
    const prng = new Prng(3);
    const bad: string[] = [];
    for (let run = 0; run < 2000; run++) {
      const n = 1 + Math.floor(prng.next() * 300);
      const L = 1 + Math.floor(prng.next() * 600) + (run % 3 === 0 ? prng.next() : 0);
      const phase = prng.next();
      let sum = 0;
      let least = Number.POSITIVE_INFINITY;
      let most = 0;
      for (let r = 0; r < n; r++) {
        const u = staticAllowance(assigned(r, n), L, phase, 0, 1000);
        least = Math.min(least, u);
        most = Math.max(most, u);
        sum += u;
      }
      // equal slices: every member holds floor or ceil of floor(L) / n
      const fair = Math.floor(L) / n;
      if (sum !== Math.floor(L) || least < Math.floor(fair) || most > Math.ceil(fair))
        bad.push(`n ${n} L ${L} phase ${phase}: sum ${sum}, least ${least}, most ${most}`);
    }
    expect(bad).toEqual([]);
  });

  it('under one unit per member, L of the members hold one each, and the key phase picks which', () => {
    const holders = (phase: number) =>
      Array.from({ length: 64 }, (_, r) => staticAllowance(assigned(r, 64), 20, phase, 0, 1000));
    const a = holders(0.1);
    const b = holders(0.7);
    expect(a.filter((u) => u === 1).length).toBe(20);
    expect(b.filter((u) => u === 1).length).toBe(20);
    expect(a).not.toEqual(b);
  });

  it('a node holds none for a window and a margin after its view formed, where a key may be bound', () => {
    // self sorts after a and b: rank 2 of 3; L = 10 gives ranks 0..2 units 3, 3, 4 at phase 0
    const t = new PeerTable('self', 50, 500, 10, 3);
    t.unitKeepMs = 1000;
    heard(t, 'a', 100);
    t.refresh(100);
    heard(t, 'b', 120);
    t.refresh(120);
    expect([...t.unitRank]).toEqual([-1, 2]);
    // no key information: every assignment binds
    expect(staticAllowance(t, 10, 0, 120, 1000)).toBe(0);
    expect(staticAllowance(t, 10, 0, 1119, 1000)).toBe(0);
    expect(staticAllowance(t, 10, 0, 1120, 1000)).toBe(4);
    // a key no peer admitted before the view formed (binds: 0): its units at once
    expect(staticAllowance(t, 10, 0, 200, 1000, () => false)).toBe(4);
    expect(staticAllowance(t, 10, 0, 200, 1000, () => true)).toBe(0);
  });

  it('a node that had no peer live holds none for the whole span after, whatever the key', () => {
    const t = new PeerTable('self', 50, 100_000, 10);
    t.unitKeepMs = 1000;
    heard(t, 'a', 0);
    t.refresh(0);
    t.refresh(200); // a stale: cut off
    expect(t.unitRank.slice(-1)).toEqual([-2]);
    heard(t, 'a', 300);
    t.refresh(300);
    // rank 1 of 2 at L = 10: 5 units, but the cut-off binds until 300 + 1000 even for a free key
    expect(staticAllowance(t, 10, 0, 400, 1000, () => false)).toBe(0);
    expect(staticAllowance(t, 10, 0, 1300, 1000, () => false)).toBe(5);
  });

  it('a member change: the fewer units of the two assignments until the old one no longer binds', () => {
    const t = new PeerTable('self', 1000, 100_000, 10);
    t.unitKeepMs = 5000;
    heard(t, 'a', 0);
    heard(t, 'b', 0);
    t.refresh(0);
    // ranks of 3 at L = 10, phase 0: 3, 3, 4; self (after a and b) holds 4
    expect(staticAllowance(t, 10, 0, 6000, 5000)).toBe(4);
    // c joins (sorts before self): self is rank 3 of 4, holding 10 - floor(7.5) = 3 units
    heard(t, 'c', 6000);
    heard(t, 'a', 6000);
    heard(t, 'b', 6000);
    t.refresh(6000);
    expect(t.unitRank.slice(-1)).toEqual([3]);
    expect(staticAllowance(t, 10, 0, 6000, 5000)).toBe(3);
    // c leaves again at once: back to 4 units, but the 4-member assignment binds until 6000 + 5000
    t.remove('c');
    t.refresh(6500);
    expect(staticAllowance(t, 10, 0, 6500, 5000)).toBe(3);
    expect(staticAllowance(t, 10, 0, 10_999, 5000)).toBe(3);
    expect(staticAllowance(t, 10, 0, 11_000, 5000)).toBe(3); // the 4-member one binds until 6500 + 5000
    expect(staticAllowance(t, 10, 0, 11_500, 5000)).toBe(4);
  });

  it('a node alone from the start missed nothing: its first peer does not cost it a window', () => {
    const t = new PeerTable('self', 50, 100_000, 10);
    t.unitKeepMs = 1000;
    t.refresh(0);
    t.refresh(500);
    expect([...t.unitRank]).toEqual([-1]);
    heard(t, 'a', 600);
    t.refresh(600);
    // rank 1 of 2 at L = 10: 5 units, for a key no peer admitted before
    expect(staticAllowance(t, 10, 0, 700, 1000, () => false)).toBe(5);
  });

  it('members changing faster than the list keeps: the oldest go, and bind as none where they would', () => {
    const t = new PeerTable('self', 1_000_000, 10_000_000, 128);
    t.unitKeepMs = 10_000;
    heard(t, 'a', 0);
    t.refresh(0);
    for (let i = 0; i < 70; i++) {
      heard(t, `x${String(i).padStart(2, '0')}`, 100 + i);
      t.refresh(100 + i);
    }
    expect(t.unitRank.length).toBeLessThan(64);
    expect(t.unitLostUntil).toBeGreaterThan(100);
    // a key they may bind: none until the dropped ones could no longer bind
    expect(staticAllowance(t, 100, 0, 1000, 10_000)).toBe(0);
    // a key none binds: the members in force (self rank 1 of 72) deal its units at once
    expect(staticAllowance(t, 100, 0, 1000, 10_000, () => false)).toBe(
      Math.floor((2 * 100) / 72) - Math.floor(100 / 72),
    );
    expect(staticAllowance(t, 100, 0, 20_200, 10_000)).toBe(
      Math.floor((2 * 100) / 72) - Math.floor(100 / 72),
    );
  });
});
