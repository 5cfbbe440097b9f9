/**
 * What keys evicted under memory pressure had counted, kept in a bounded,
 * windowed count-min sketch (one per policy) so that a key that comes back
 * starts from at least what it had: forgetting over-counts, never under-counts.
 *
 * Time is cut into slots of W / 4. A count recorded at time t belongs to
 * counts that leave the window by t + W, so a slot stays relevant for four
 * more slots and the ring holds five. Each slot is a `depth × width` table of
 * float64 cells updated conservatively (each row's cell for the key is raised
 * to the smallest row value plus the count), so every row over-estimates the
 * key's true recorded count in that slot; the estimate is the smallest row sum
 * over the live slots. Hashing is seeded (per process by default) so an
 * outsider cannot aim collisions at a chosen key.
 *
 * Memory: `5 × depth × width × 8` bytes, allocated on the first record
 * (1,310,720 bytes at the defaults, depth 4 and width 8,192).
 */
export class EvictedSketch {
  static readonly SLOTS = 5;
  readonly depth: number;
  readonly width: number;
  readonly slotMs: number;
  private cells: Float64Array | undefined;
  private readonly slotIds = new Float64Array(EvictedSketch.SLOTS).fill(Number.NaN);
  /** Newest slot id holding a record (-Infinity: none). */
  private newest = Number.NEGATIVE_INFINITY;
  private readonly idx: Int32Array;
  /** Records made, since start. */
  records = 0;

  constructor(
    windowMs: number,
    private readonly seed: number,
    depth = 4,
    width = 8192,
  ) {
    if (!Number.isInteger(Math.log2(width))) throw new Error('width must be a power of two');
    this.depth = depth;
    this.width = width;
    this.slotMs = windowMs / 4;
    this.idx = new Int32Array(depth);
  }

  /** Bytes held (0 until the first record). */
  get bytes(): number {
    return this.cells === undefined ? 0 : this.cells.byteLength;
  }

  private hash(key: string): void {
    // FNV-1a over UTF-16 code units, seeded; a second hash by a murmur3 finaliser
    let h = (0x811c9dc5 ^ this.seed) >>> 0;
    for (let i = 0; i < key.length; i++) {
      h ^= key.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    let h2 = h ^ (h >>> 16);
    h2 = Math.imul(h2, 0x85ebca6b);
    h2 ^= h2 >>> 13;
    h2 = Math.imul(h2, 0xc2b2ae35);
    h2 ^= h2 >>> 16;
    h2 |= 1;
    const mask = this.width - 1;
    for (let r = 0; r < this.depth; r++) this.idx[r] = (h + Math.imul(r, h2)) & mask;
  }

  /** Record that `key` held `count` in its window at `now`. */
  add(key: string, count: number, now: number): void {
    if (!(count > 0)) return;
    const sid = Math.floor(now / this.slotMs);
    const ring = EvictedSketch.SLOTS;
    const slot = ((sid % ring) + ring) % ring;
    const rowCells = this.width;
    const slotCells = this.depth * rowCells;
    if (this.cells === undefined) this.cells = new Float64Array(ring * slotCells);
    const cells = this.cells;
    const base = slot * slotCells;
    if (this.slotIds[slot] !== sid) {
      cells.fill(0, base, base + slotCells);
      this.slotIds[slot] = sid;
    }
    if (sid > this.newest) this.newest = sid;
    this.hash(key);
    let min = Number.POSITIVE_INFINITY;
    for (let r = 0; r < this.depth; r++) {
      const v = cells[base + r * rowCells + this.idx[r]!]!;
      if (v < min) min = v;
    }
    const target = min + count;
    for (let r = 0; r < this.depth; r++) {
      const at = base + r * rowCells + this.idx[r]!;
      if (cells[at]! < target) cells[at] = target;
    }
    this.records++;
  }

  /** At least what was recorded for `key` whose counts may still be in the window at `now`; 0 when none. */
  estimate(key: string, now: number): number {
    const cells = this.cells;
    if (cells === undefined) return 0;
    const sid = Math.floor(now / this.slotMs);
    const oldest = sid - (EvictedSketch.SLOTS - 1);
    if (this.newest < oldest) return 0;
    this.hash(key);
    const rowCells = this.width;
    const slotCells = this.depth * rowCells;
    let best = Number.POSITIVE_INFINITY;
    for (let r = 0; r < this.depth; r++) {
      let sum = 0;
      for (let s = 0; s < EvictedSketch.SLOTS; s++) {
        const id = this.slotIds[s]!;
        if (!(id >= oldest && id <= sid)) continue;
        sum += cells[s * slotCells + r * rowCells + this.idx[r]!]!;
      }
      if (sum < best) best = sum;
    }
    return best;
  }
}
