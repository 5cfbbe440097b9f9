/** Default cap on tracked keys (the engine's over all its policies, a KeyedLimiter's). */
export const DEFAULT_MAX_KEYS = 100_000;

/**
 * The one capped key map of ratemesh: the engine's per-policy key states and the standalone
 * {@link KeyedLimiter} both hold their keys in {@link KeyStore}s under a {@link KeyBudget}.
 *
 * Eviction rule (documented for users): when an insert finds `maxKeys` held, first every state
 * with nothing left in it (`isExpired`) is dropped, in every store; then, until at most
 * `maxKeys - evictBatch` are held, states are evicted from the largest store, oldest-inserted
 * first, skipping once any the store's `takeUsed` says was used since it was inserted or last
 * skipped (second chance; a store without `takeUsed` gives none). Work is amortised O(1) per
 * insert (a round frees `evictBatch` at least), so a flood of distinct keys can neither grow
 * memory nor make inserts quadratic. A live state is handed to the store's `onEvict` first (the
 * engine records its counts in a sketch, so the key returns over-counted, never under-counted).
 * Insertion order rather than recency: recency would cost a delete and re-insert per hit.
 */
export class KeyBudget {
  /** Keys held over every store. */
  size = 0;
  readonly stores: KeyStore<never>[] = [];

  /**
   * @param maxKeys the cap over every store
   * @param evictBatch the fewest states one eviction round frees (default: a tenth of the cap,
   *   rounded up, so a round leaves the stores at 90 %)
   */
  constructor(
    readonly maxKeys: number,
    readonly evictBatch = maxKeys - Math.floor(maxKeys * 0.9),
  ) {}

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
    const target = this.maxKeys - this.evictBatch;
    while (this.size > target) {
      let big = this.stores[0]!;
      for (const s of this.stores) if (s.size > big.size) big = s;
      big.evictOldest(Math.min(this.size - target, Math.max(1, Math.ceil(big.size / 10))));
    }
  }
}

/** What a {@link KeyStore} asks of its states. */
export interface KeyStoreHooks<T> {
  /** The state holds nothing a fresh one would not: dropped first (silently, as far as decisions go). */
  isExpired(value: T): boolean;
  /** Told of every state that leaves by eviction or expiry (`live`: evicted under pressure). */
  onEvict?(key: string, value: T, live: boolean): void;
  /** Second chance: whether the state was used since inserted or last skipped; clears that mark. */
  takeUsed?(value: T): boolean;
}

/** A map of per-key state under a shared {@link KeyBudget}; see there for the eviction rule. */
export class KeyStore<T> {
  readonly map = new Map<string, T>();
  /** Keys this store dropped because of the cap, since start. */
  evictions = 0;

  constructor(
    private readonly budget: KeyBudget,
    private readonly hooks: KeyStoreHooks<T>,
  ) {
    budget.stores.push(this as unknown as KeyStore<never>);
  }

  get size(): number {
    return this.map.size;
  }

  get(key: string): T | undefined {
    return this.map.get(key);
  }

  has(key: string): boolean {
    return this.map.has(key);
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

  /** Forget every key (freed from the budget). */
  clear(): void {
    this.budget.size -= this.map.size;
    this.map.clear();
  }

  /** Remove and return every key (freed from the budget), for a caller that moves them to another store. */
  drain(): [string, T][] {
    const out = [...this.map];
    this.clear();
    return out;
  }

  /** Leave the budget for good (the policy was removed): every key is dropped, the store is not used again. */
  dispose(): void {
    const i = this.budget.stores.indexOf(this as unknown as KeyStore<never>);
    if (i >= 0) this.budget.stores.splice(i, 1);
    this.clear();
  }

  /** Drop every expired state (not counted as evictions); returns how many. */
  sweep(): number {
    let n = 0;
    for (const [k, v] of this.map) {
      if (!this.hooks.isExpired(v)) continue;
      this.map.delete(k);
      this.budget.size--;
      n++;
      this.hooks.onEvict?.(k, v, false);
    }
    return n;
  }

  /** Drop every expired state, counted as evictions (an eviction round's first step). */
  dropExpired(): void {
    this.evictions += this.sweep();
  }

  /** Evict up to `n` live states, oldest-inserted first, giving each used one a second chance. */
  evictOldest(n: number): void {
    const takeUsed = this.hooks.takeUsed;
    for (const [k, v] of this.map) {
      if (n <= 0) return;
      this.map.delete(k);
      if (takeUsed?.(v) === true) {
        // used since inserted or last skipped: to the back (Map iteration reaches it again)
        this.map.set(k, v);
        continue;
      }
      this.budget.size--;
      this.evictions++;
      n--;
      this.hooks.onEvict?.(k, v, true);
    }
  }
}

/** `takeUsed` for states that carry a `ref` mark set on each use. */
export function takeRef(value: { ref: boolean }): boolean {
  if (!value.ref) return false;
  value.ref = false;
  return true;
}
