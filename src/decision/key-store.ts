/** Per-key state a {@link KeyStore} can evict: `ref` is set on each use (second chance). */
export interface Evictable {
  ref: boolean;
}

/**
 * One cap on the keys of several stores (every policy of an engine): `maxKeys`
 * is a single budget, never one per policy.
 *
 * Eviction rule (documented for users): when an insert would pass `maxKeys`,
 * first every key whose state has nothing left in its window is dropped, in
 * every store; if that frees less than a tenth of the cap, keys are evicted from
 * the largest store, oldest-inserted first but skipping (once) any used since it
 * was inserted or last skipped (second chance), until the stores are at 90 % of
 * the cap. Work is amortised O(1) per insert, so a flood of distinct keys can
 * neither grow memory nor make inserts quadratic. A live key's state is handed
 * to the store's `onEvict` first (the engine records its counts in a sketch, so
 * the key returns over-counted, never under-counted).
 */
export class KeyBudget {
  /** Keys held over every store. */
  size = 0;
  readonly stores: KeyStore<Evictable>[] = [];

  constructor(readonly maxKeys: number) {}

  /** Keys dropped because of the cap, since start, over every store. */
  get evictions(): number {
    let n = 0;
    for (const s of this.stores) n += s.evictions;
    return n;
  }

  /** Make room for one insert. */
  makeRoom(): void {
    if (this.size < this.maxKeys) return;
    for (const s of this.stores) s.dropExpired();
    if (this.size < this.maxKeys - Math.max(1, Math.floor(this.maxKeys / 10))) return;
    const target = Math.floor(this.maxKeys * 0.9);
    while (this.size > target) {
      let big = this.stores[0]!;
      for (const s of this.stores) if (s.size > big.size) big = s;
      big.evictOldest(Math.min(this.size - target, Math.max(1, Math.ceil(big.size / 10))));
    }
  }
}

/**
 * A map of per-key state under a shared {@link KeyBudget}. `isExpired` says a
 * state holds nothing a fresh one would not (dropped first, silently);
 * `onEvict` is told of every live state evicted under pressure.
 */
export class KeyStore<T extends Evictable> {
  readonly map = new Map<string, T>();
  /** Keys this store dropped because of the cap, since start. */
  evictions = 0;

  constructor(
    private readonly budget: KeyBudget,
    private readonly isExpired: (value: T) => boolean,
    private readonly onEvict?: (key: string, value: T, live: boolean) => void,
  ) {
    budget.stores.push(this as unknown as KeyStore<Evictable>);
  }

  get size(): number {
    return this.map.size;
  }

  get(key: string): T | undefined {
    return this.map.get(key);
  }

  /** Insert a new key, evicting first when the budget is spent. */
  insert(key: string, value: T): void {
    if (this.budget.size >= this.budget.maxKeys) this.budget.makeRoom();
    this.map.set(key, value);
    this.budget.size++;
  }

  delete(key: string): boolean {
    if (!this.map.delete(key)) return false;
    this.budget.size--;
    return true;
  }

  /** Remove and return every key (freed from the budget), for a caller that moves them to another store. */
  drain(): [string, T][] {
    const out = [...this.map];
    this.budget.size -= this.map.size;
    this.map.clear();
    return out;
  }

  /** Leave the budget for good (the policy was removed): every key is dropped, the store is not used again. */
  dispose(): void {
    const i = this.budget.stores.indexOf(this as unknown as KeyStore<Evictable>);
    if (i >= 0) this.budget.stores.splice(i, 1);
    this.budget.size -= this.map.size;
    this.map.clear();
  }

  /** Drop every state with nothing left in its window. */
  dropExpired(): void {
    for (const [k, v] of this.map) {
      if (!this.isExpired(v)) continue;
      this.map.delete(k);
      this.budget.size--;
      this.evictions++;
      this.onEvict?.(k, v, false);
    }
  }

  /** Evict up to `n` live states, oldest-inserted first, giving each used one a second chance. */
  evictOldest(n: number): void {
    for (const [k, v] of this.map) {
      if (n <= 0) return;
      this.map.delete(k);
      if (v.ref) {
        // used since inserted or last skipped: to the back (Map iteration reaches it again)
        v.ref = false;
        this.map.set(k, v);
        continue;
      }
      this.budget.size--;
      this.evictions++;
      n--;
      this.onEvict?.(k, v, true);
    }
  }
}
