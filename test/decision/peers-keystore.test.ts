import { describe, expect, it } from 'vitest';
import { PeerTable } from '../../src/decision/peers.js';
import { KeyBudget, KeyStore, takeRef } from '../../src/keys/key-store.js';

describe('PeerTable', () => {
  function heard(t: PeerTable, id: string, at: number) {
    const p = t.ensure(id)!;
    p.member = true;
    p.lastHeard = at;
    return p;
  }

  it('assigns origin indexes from 1, reuses freed ones, and caps the table', () => {
    const t = new PeerTable('self', 50, 500, 3);
    expect(t.ensure('a')!.idx).toBe(1);
    expect(t.ensure('b')!.idx).toBe(2);
    expect(t.ensure('a')!.idx).toBe(1);
    expect(t.ensure('c')!.idx).toBe(3);
    expect(t.ensure('d')).toBeUndefined();
    expect(t.size).toBe(3);
    expect(t.remove('b')).toBe(2);
    expect(t.remove('b')).toBe(-1);
    expect(t.ensure('d')!.idx).toBe(2);
    expect(t.byIdx[2]!.id).toBe('d');
  });

  it('live / stale / depart / knownN / allStale', () => {
    const t = new PeerTable('self', 50, 500, 10);
    heard(t, 'a', 0);
    heard(t, 'b', 0);
    t.ensure('sync-only'); // known through sync, not a member
    t.refresh(10);
    expect([t.live.length, t.stale.length, t.knownN, t.allStale]).toEqual([2, 0, 3, false]);
    t.refresh(51); // both stale: nothing departs, N stays
    expect([t.live.length, t.stale.length, t.knownN, t.allStale]).toEqual([0, 2, 3, true]);
    expect(t.refresh(10_000)).toEqual([]);
    expect(t.knownN).toBe(3);
    heard(t, 'a', 10_000);
    expect(t.refresh(10_000)).toEqual(['b']); // a is live again, b silent > 500 ms departs
    expect([t.live.length, t.stale.length, t.knownN, t.allStale]).toEqual([1, 0, 2, false]);
    expect(t.views(10_020)).toEqual([
      {
        id: 'a',
        ageMs: 20,
        stale: false,
        delayMs: 0,
        clockOffsetMs: 0,
        members: 1,
        messages: 0,
        ignoredMs: 0,
        skewed: false,
      },
    ]);
  });

  it('a peer is stale strictly after staleAfterMs', () => {
    const t = new PeerTable('self', 50, 500, 10);
    heard(t, 'a', 100);
    t.refresh(150);
    expect(t.live.length).toBe(1);
    t.refresh(150.5);
    expect(t.stale.length).toBe(1);
  });
});

describe('KeyStore under one KeyBudget', () => {
  interface V {
    id: string;
    ref: boolean;
  }
  const v = (id: string): V => ({ id, ref: false });

  it('never holds more than maxKeys; drops expired entries first, then the oldest inserted', () => {
    const expired = new Set<string>();
    const evicted: string[] = [];
    const budget = new KeyBudget(10);
    const store = new KeyStore<V>(budget, {
      isExpired: (x) => expired.has(x.id),
      onEvict: (k, _v, live) => evicted.push(live ? k : `(${k})`),
      takeUsed: takeRef,
    });
    for (let i = 0; i < 10; i++) store.insert(`k${i}`, v(`k${i}`));
    expect(store.size).toBe(10);
    expired.add('k3');
    expired.add('k7');
    // 2 expired ones free at least a tenth of the cap (1): nothing live is dropped
    store.insert('n0', v('n0'));
    expect(evicted).toEqual(['(k3)', '(k7)']);
    expect(store.size).toBe(9);
    store.insert('n1', v('n1'));
    // full again, nothing expired: the oldest go until 90 % of the cap
    store.insert('n2', v('n2'));
    expect(evicted).toEqual(['(k3)', '(k7)', 'k0']);
    expect(store.size).toBe(10);
    expect(store.evictions).toBe(3);
    expect(store.get('k0')).toBeUndefined();
    expect(store.get('n2')!.id).toBe('n2');
  });

  it('second chance: a key used since it was inserted is passed over once', () => {
    const evicted: string[] = [];
    const budget = new KeyBudget(10);
    const store = new KeyStore<V>(budget, {
      isExpired: () => false,
      onEvict: (k) => evicted.push(k),
      takeUsed: takeRef,
    });
    for (let i = 0; i < 10; i++) store.insert(`k${i}`, v(`k${i}`));
    store.get('k0')!.ref = true;
    store.insert('n0', v('n0'));
    expect(evicted).toEqual(['k1']);
    expect(store.get('k0')!.ref).toBe(false);
    store.insert('n1', v('n1'));
    expect(evicted).toEqual(['k1', 'k2']);
  });

  it('maxKeys is one cap over every store: a flood in one evicts from the largest, never past the cap', () => {
    const budget = new KeyBudget(1000);
    const a = new KeyStore<V>(budget, { isExpired: () => false, takeUsed: takeRef });
    const b = new KeyStore<V>(budget, { isExpired: () => false, takeUsed: takeRef });
    for (let i = 0; i < 100; i++) b.insert(`b${i}`, v(`b${i}`));
    for (let i = 0; i < 100_000; i++) {
      a.insert(`k${i}`, v(`k${i}`));
      if (budget.size > 1000) throw new Error(`size ${budget.size} at ${i}`);
    }
    expect(a.size + b.size).toBe(budget.size);
    expect(budget.size).toBeLessThanOrEqual(1000);
    expect(b.size).toBe(100); // the flooded store paid for its own flood
    expect(a.size + a.evictions).toBe(100_000);
    expect(budget.evictions).toBe(a.evictions);
    expect(a.delete('k99999')).toBe(true);
    expect(a.delete('k99999')).toBe(false);
    expect(budget.size).toBe(a.size + b.size);
  });
});

describe('departed peers are forgotten once their counts left every window', () => {
  it('PeerTable.forgetDeparted frees non-members older than the retention, keeps members and ignored peers', () => {
    const t = new PeerTable('self', 50, 500, 4);
    for (const id of ['a', 'b', 'c']) {
      const p = t.ensure(id)!;
      p.member = true;
      p.lastHeard = 0;
    }
    t.get('b')!.member = false;
    t.get('c')!.member = false;
    t.get('c')!.ignoredUntil = 10_000;
    expect(t.forgetDeparted(1000, 1000)).toEqual([]); // not older than the retention yet
    expect(t.forgetDeparted(1001, 1000)).toEqual([2]);
    expect(t.get('b')).toBeUndefined();
    expect(t.get('c')).toBeDefined(); // ignored: kept so the ignore holds
    expect(t.ensure('d')!.idx).toBe(2); // the slot is reused
    expect(t.size).toBe(3);
  });
});
