import { describe, expect, it } from 'vitest';
import { KeyStore } from '../../src/decision/key-store.js';
import { PeerTable } from '../../src/decision/peers.js';

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
      { id: 'a', ageMs: 20, stale: false, delayMs: 0, clockOffsetMs: 0, members: 1, messages: 0 },
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

describe('KeyStore', () => {
  it('never holds more than maxKeys; drops expired entries first, then the oldest inserted', () => {
    const expired = new Set<string>();
    const store = new KeyStore<string>(10, (v) => expired.has(v));
    const evicted: string[] = [];
    for (let i = 0; i < 10; i++) store.insert(`k${i}`, `k${i}`, (k) => evicted.push(k));
    expect(store.size).toBe(10);
    expired.add('k3');
    expired.add('k7');
    // 2 expired ones free at least a tenth of the cap (1): nothing live is dropped
    store.insert('n0', 'n0', (k) => evicted.push(k));
    expect(evicted).toEqual(['k3', 'k7']);
    expect(store.size).toBe(9);
    store.insert('n1', 'n1', (k) => evicted.push(k));
    // full again, nothing expired: the oldest go until 90 % of the cap
    store.insert('n2', 'n2', (k) => evicted.push(k));
    expect(evicted).toEqual(['k3', 'k7', 'k0']);
    expect(store.size).toBe(10);
    expect(store.evictions).toBe(3);
    expect(store.get('k0')).toBeUndefined();
    expect(store.get('n2')).toBe('n2');
  });

  it('a flood stays bounded and every insert past the cap is paid by an eviction', () => {
    const store = new KeyStore<number>(1000, () => false);
    for (let i = 0; i < 100_000; i++) {
      store.insert(`k${i}`, i);
      if (store.size > 1000) throw new Error(`size ${store.size} at ${i}`);
    }
    expect(store.size + store.evictions).toBe(100_000);
    expect(store.delete('k99999')).toBe(true);
    expect(store.delete('k99999')).toBe(false);
  });
});
