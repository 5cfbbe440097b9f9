/**
 * A map of per-key state with a cap on the number of keys.
 *
 * Eviction rule (documented for users): when an insert would exceed `maxKeys`,
 * first every key whose state has nothing left in its window is dropped; if that
 * frees less than a tenth of the cap, the oldest-inserted keys are dropped until
 * the store is at 90 % of the cap. Work is amortised O(1) per insert, so a flood
 * of distinct keys cannot grow memory without bound nor make inserts quadratic.
 * A dropped live key forgets its counts here; its next request starts from what
 * the peers report for it again.
 */
export class KeyStore<T> {
  readonly map = new Map<string, T>();
  /** Keys dropped because of the cap, since start. */
  evictions = 0;

  constructor(
    readonly maxKeys: number,
    private readonly isExpired: (value: T) => boolean,
  ) {}

  get size(): number {
    return this.map.size;
  }

  get(key: string): T | undefined {
    return this.map.get(key);
  }

  /** Insert a new key, evicting first when the store is full. */
  insert(key: string, value: T, onEvict?: (key: string, value: T) => void): void {
    if (this.map.size >= this.maxKeys) this.evict(onEvict);
    this.map.set(key, value);
  }

  delete(key: string): boolean {
    return this.map.delete(key);
  }

  private evict(onEvict?: (key: string, value: T) => void): void {
    const target = Math.floor(this.maxKeys * 0.9);
    for (const [k, v] of this.map) {
      if (this.isExpired(v)) {
        this.map.delete(k);
        this.evictions++;
        onEvict?.(k, v);
      }
    }
    if (this.map.size < this.maxKeys - Math.max(1, Math.floor(this.maxKeys / 10))) return;
    for (const [k, v] of this.map) {
      if (this.map.size <= target) break;
      this.map.delete(k);
      this.evictions++;
      onEvict?.(k, v);
    }
  }
}
