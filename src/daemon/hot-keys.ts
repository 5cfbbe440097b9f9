import type { Clock } from '../clock.js';

/** One row of the hottest-keys table. */
export interface HotKey {
  policy: string;
  key: string;
  /** Admitted cost per second, exponentially decayed (time constant: halfLifeMs / ln 2). */
  rate: number;
  /** The most `rate` may overstate the key's true rate (Space-Saving's error bound). */
  error: number;
}

interface Entry {
  policy: string;
  key: string;
  /** Forward-decayed weight, in units of the current landmark. */
  count: number;
  error: number;
}

/**
 * The hottest keys by admitted rate, in bounded memory: the Space-Saving
 * algorithm (Metwally et al.) over exponentially decayed counts. At most
 * `capacity` keys are tracked; a new key evicts the coldest and inherits its
 * count as an error bound, so any key whose rate exceeds total/capacity is
 * always present. Decay is "forward": a hit at time t weighs e^((t-L)/tau)
 * against a landmark L, so stored counts never need touching as time passes
 * (relative order is fixed) until the landmark is moved to avoid overflow.
 */
export class HotKeys {
  private readonly entries = new Map<string, Entry>();
  private readonly tauMs: number;
  private landmark: number;

  constructor(
    private readonly capacity: number,
    private readonly clock: Clock,
    halfLifeMs = 10_000,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError('capacity must be a positive integer');
    this.tauMs = halfLifeMs / Math.LN2;
    this.landmark = clock.now();
  }

  /** Counts `cost` admitted on (policy, key) now. */
  add(policy: string, key: string, cost: number): void {
    const now = this.now();
    let x = (now - this.landmark) / this.tauMs;
    if (x > 40) {
      this.rescale(now);
      x = 0;
    }
    const w = cost * Math.exp(x);
    const id = `${policy}\u0000${key}`;
    const e = this.entries.get(id);
    if (e !== undefined) {
      e.count += w;
      return;
    }
    if (this.entries.size < this.capacity) {
      this.entries.set(id, { policy, key, count: w, error: 0 });
      return;
    }
    let minId = '';
    let min: Entry | undefined;
    for (const [k, v] of this.entries) {
      if (min === undefined || v.count < min.count) {
        min = v;
        minId = k;
      }
    }
    this.entries.delete(minId);
    const floor = min?.count ?? 0;
    this.entries.set(id, { policy, key, count: floor + w, error: floor });
  }

  /** The `n` hottest keys, hottest first, with rates per second at the current time. */
  top(n: number): HotKey[] {
    const scale = Math.exp(-(this.now() - this.landmark) / this.tauMs) / (this.tauMs / 1000);
    return [...this.entries.values()]
      .sort((a, b) => b.count - a.count)
      .slice(0, Math.max(0, n))
      .map((e) => ({ policy: e.policy, key: e.key, rate: e.count * scale, error: e.error * scale }));
  }

  get size(): number {
    return this.entries.size;
  }

  /** The clock, never before the landmark: a clock that steps back counts hits as if at the landmark. */
  private now(): number {
    return Math.max(this.clock.now(), this.landmark);
  }

  private rescale(now: number): void {
    const f = Math.exp(-(now - this.landmark) / this.tauMs);
    for (const e of this.entries.values()) {
      e.count *= f;
      e.error *= f;
    }
    this.landmark = now;
  }
}
