/**
 * Windowed G-counter for one (policy, key).
 *
 * Time is cut into buckets of width `bw = W / k`, keyed by wall-clock bucket id
 * `floor(t / bw)`. In each bucket there is one count per origin node; only the
 * origin writes its own entry and merging takes the max per entry, so merges are
 * commutative, associative and idempotent. A ring of `k + 2` slots holds buckets
 * `c-k .. c+1` where `c` is the current bucket: `c-k` is the oldest, partly inside
 * the window, and `c+1` takes counts from peers whose clocks run slightly ahead.
 * Older buckets expire when the ring rolls.
 *
 * Per slot the sum over origins is kept up to date, and so is the sum of the
 * full-weight slots, so the estimate is O(1):
 *   estimate(t) = Σ_{b=c-k+1}^{c+1} S[b] + (1 - frac(t / bw)) · S[c-k]
 * (the sliding-window-counter estimate: the oldest bucket is weighted by the part
 * of it still inside the window). This node's own counts in the oldest bucket are
 * counted by when they were admitted instead: per slot they are kept by eighth of the
 * bucket (OWN_PARTS) with the time of the last admission in each eighth (to 1/504 of the
 * bucket, rounded up), and the eighths from the one the window's start falls in on count
 * whole, but for one whose last admission is out. Never less than what is inside, so one
 * node's own admissions never pass L in any window, however they are batched (a batch decided
 * at one instant is wholly in or wholly out); at most an eighth of a bucket's counts more
 * (steady traffic: a sixteenth on average). Interpolating between the first and last admission
 * of the bucket, as before, under-counted a small batch early and a large one late as the
 * bucket slid out (1,142 in a window of L = 1,000 at k = 10, bench:own-bursts). Quarters held
 * steady traffic's counts (and the skew a peer is sent: {@link ownDeficit}) twice as long:
 * 4.07 % false denials at 0.9 L on 8 nodes against 3.56 (bench:two-sided).
 *
 * Peers' counts carry no times, and were weighted by the part of the bucket still inside, as
 * if spread evenly over it: a peer's burst late in a bucket was under-counted as the bucket slid
 * out, and the other nodes admitted that part again (a burst of 90 late in a 6 s bucket, L = 100
 * per minute: 134 to 152 in a window, bench:peer-bursts). But a node knows when each count
 * reached it, and a count was admitted before it arrived. So where buckets are long against the
 * gossip horizon (SPAN_MAX_AGE), each peer's counts in a bucket keep when they arrived (see
 * {@link packSpan} and {@link peerLeft}): none is counted once the window has passed its
 * arrival, the last group of arrivals (each within `age` of the one before: a burst published in
 * parts) is counted whole until then, and earlier ones whole until the end of the group before
 * the last. Where counts kept arriving over the whole bucket (steady traffic), nothing is kept
 * and the uniform weight stays. The estimate then loops over the oldest bucket's peers with a
 * span (listed once per bucket), no longer O(1) there. Counts folded into
 * a bucket later than their arrival (a peer whose clock runs ahead) are out as soon as the bucket
 * is the oldest: they were admitted before it began. No clock offset enters the bound.
 * {@link peerEstimate} (the stale and foreign reserves) and {@link timeToDrain} (retry hints)
 * weigh them the same way.
 *
 * Entries of peer origins live in one array of numbers per origin (a plain array of doubles: a
 * Float64Array of this size takes 136 bytes more, its buffer's), of length R + 2: R slot counts,
 * then the origin's reported demand (cost offered over a window) and the local time of that
 * report; R more, one span per slot, from the origin's first counts that span less than a whole
 * bucket (8·R bytes more for such an origin of such a key).
 */
/** Parts of a bucket own admissions are kept by (see {@link KeyWindow.parts}). */
export const OWN_PARTS = 8;
/**
 * A last admission's time in its part is kept as q / TIME_STEP of the part, q = 0 .. TIME_STEP
 * (rounded up: an admission at a part's start is there exactly), in TIME_BITS bits.
 */
const TIME_BITS = 6;
const TIME_STEP = 2 ** TIME_BITS - 1;
/** Parts whose times one float32 holds: 4 × 6 bits, an integer under 2^24 (exact as a float32). */
const TIMES_A_WORD = 4;
/**
 * Numbers of {@link KeyWindow.parts} a slot takes: its OWN_PARTS counts, then their times packed
 * in OWN_PARTS / TIMES_A_WORD more (next to the counts: an admission writes one cache line).
 */
const PART_STRIDE = OWN_PARTS + OWN_PARTS / TIMES_A_WORD;
/** A word of times with every part's at its end (counts without a time). */
const ALL_AT_END = 2 ** (TIME_BITS * TIMES_A_WORD) - 1;

/** Indices of the window's scalars in {@link KeyWindow.d}. */
const CUR = 0;
const FULL = 1;
const OWN_FULL = 2;
const OFFERED_FULL = 3;
/** The bucket the oldest bucket's span list was made for (NaN: none). */
const SPANS_AT = 4;
/** {@link KeyWindow.ownWeight}'s last answer: for the oldest bucket of OWN_AT (NaN: none), cuts + 2^-23 in [OWN_LO, OWN_HI). */
const OWN_AT = 5;
const OWN_LO = 6;
const OWN_HI = 7;
const OWN_VAL = 8;
/** The cuts + 2^-23 {@link KeyWindow.ownLeft}'s last answer holds for, [LEFT_LO, LEFT_HI) (empty when it varies with the cut). */
const LEFT_LO = 9;
const LEFT_HI = 10;
/** The scalars before the owner's numbers in {@link KeyWindow.d}. */
export const SCALARS = 11;
/** Numbers a slot holds in `d`: own, Σ, offered. */
const SLOT = 3;

/** Part j's step (0 .. TIME_STEP) in its word of times: its last admission is at or before it. */
function partStep(word: number, j: number): number {
  return (word >>> (TIME_BITS * (j % TIMES_A_WORD))) & TIME_STEP;
}

/** Part j's end at step q, at `(j << TIME_BITS) | q`: a table, no division on the hot path. */
const PART_ENDS = Float64Array.from(
  { length: OWN_PARTS << TIME_BITS },
  (_, i) => ((i >>> TIME_BITS) * TIME_STEP + (i & TIME_STEP)) / (TIME_STEP * OWN_PARTS),
);

/** Where part j's word of times is, in the slot whose parts start at `at`. */
function timesAt(at: number, j: number): number {
  return at + OWN_PARTS + ((j / TIMES_A_WORD) | 0);
}

/** Where part j of the slot whose parts start at `at` had its last admission at the latest, as a fraction of the bucket. */
function partEnd(parts: Float32Array, at: number, j: number): number {
  return PART_ENDS[(j << TIME_BITS) | partStep(parts[timesAt(at, j)]! | 0, j)]!;
}

/** The origin of the unattributed floor in {@link KeyWindow.mergeCapped}. */
export const FLOOR = -1;

export class KeyWindow {
  /** Slots in the ring: k + 2. */
  readonly r: number;
  readonly k: number;
  /**
   * Every number the window keeps but the parts and peers' entries, in one array (a key's memory
   * is mostly per-object overhead: one array instead of four and no boxed number fields): the
   * scalars below at their fixed indices, `extra` numbers for the owner of the window (see
   * {@link KeyWindow.constructor}), then per slot, side by side (a decision reads a slot's numbers
   * together: one cache line, not three), own admitted cost (at `ob + SLOT * s`), Σ over every
   * origin, own included (at `sb + SLOT * s`), and own offered cost, admitted or not: this node's
   * demand (at `fb + SLOT * s`).
   */
  readonly d: Float64Array;
  /** Where own admitted cost, the sum over origins and own offered cost start in `d`. */
  readonly ob: number;
  readonly sb: number;
  readonly fb: number;
  /**
   * Per slot, own admitted cost by part of the bucket: `parts[PART_STRIDE * s + j]` for the j-th
   * of OWN_PARTS equal parts, then the time of the last admission in each, packed TIMES_A_WORD to
   * a number ({@link partEnd}). Own counts learned back from peers have no times and are spread
   * evenly, each part to its end. It shares `d`'s buffer.
   */
  readonly parts: Float32Array;
  /** Per slot, how many peer origins have counts there spanning less than the whole bucket (made with the first). */
  spanned: Int32Array | undefined = undefined;
  /**
   * The oldest bucket's peers with a span, as their count and span decoded (SPAN_FIELDS numbers
   * each: 32 bytes per such peer, kept with the key), so the estimate loops over them only; rebuilt when `d[SPANS_AT]` is not the current bucket (a merge into the oldest
   * bucket, a drop or a roll resets it).
   */
  private oldestSpans: Float64Array | undefined = undefined;
  private oldestSpansN = 0;
  /**
   * Per origin index (>= 1) its counts, demand and report time, then, from its first counts that
   * span less than a whole bucket, one span per slot ({@link packSpan}; -1: the whole bucket);
   * undefined when never heard.
   */
  peers: (number[] | undefined)[] = NO_PEERS;
  /**
   * Counts attributed to no origin, max-merged per bucket and included in `sum`:
   * what an evicted key had (from the eviction sketch) and this node's own
   * counts as a sync responder reports them. They only ever add to the estimate
   * (over-count), are never gossiped, and age out with their bucket.
   */
  floor: Float64Array | undefined = undefined;
  /**
   * Per slot, the sum over peers of the skew each reported for that bucket (see
   * {@link ownDeficit}): how much of its counts there may still be inside the window beyond the
   * even spread the estimate weighs them by; undefined until a peer reports one. Each peer's own
   * skews are kept in its entry array, after the spans (at `2r + 2 + s`).
   */
  skews: Float64Array | undefined = undefined;
  /** Slot of bucket c-k (the partly weighted one). */
  oldest = 0;
  /** Slot of bucket c. */
  curSlot = 0;
  /** Slot of bucket c + 1. */
  nextSlot = 0;

  /**
   * @param k buckets per window
   * @param extra numbers kept in `d` for the window's owner, at `SCALARS ..` (the engine's
   *   per-key bookkeeping: one array per key, not two)
   */
  constructor(k: number, extra = 0) {
    this.k = k;
    const r = k + 2;
    this.r = r;
    this.ob = SCALARS + extra;
    this.sb = this.ob + 1;
    this.fb = this.ob + 2;
    const n = this.ob + SLOT * r;
    const buf = new ArrayBuffer(8 * n + 4 * PART_STRIDE * r);
    this.d = new Float64Array(buf, 0, n);
    this.parts = new Float32Array(buf, 8 * n, PART_STRIDE * r);
    this.d[CUR] = Number.NEGATIVE_INFINITY;
    this.d[SPANS_AT] = Number.NaN;
    this.d[OWN_AT] = Number.NaN;
    this.d[LEFT_HI] = -1;
  }

  /** The current bucket id the ring is rolled to (-Infinity before first use). */
  get cur(): number {
    return this.d[CUR]!;
  }
  /** Σ sum over the full-weight buckets c-k+1 .. c+1. */
  get full(): number {
    return this.d[FULL]!;
  }
  set full(v: number) {
    this.d[FULL] = v;
  }
  /** Σ own over the full-weight buckets. */
  get ownFull(): number {
    return this.d[OWN_FULL]!;
  }
  set ownFull(v: number) {
    this.d[OWN_FULL] = v;
  }
  /** Σ offered over the full-weight buckets. */
  get offeredFull(): number {
    return this.d[OFFERED_FULL]!;
  }
  set offeredFull(v: number) {
    this.d[OFFERED_FULL] = v;
  }
  /** Own admitted cost in the window: the full-weight buckets and the oldest, whole. */
  ownTotal(): number {
    return this.ownFull + this.ownOf(this.oldest);
  }
  /** Own admitted cost in slot `s`. */
  ownOf(s: number): number {
    return this.d[this.ob + SLOT * s]!;
  }
  /** Σ over every origin (own included) in slot `s`. */
  sumOf(s: number): number {
    return this.d[this.sb + SLOT * s]!;
  }
  /** The bucket id slot `s` holds: the one of c-k .. c+1 that maps to it (NaN before first use). */
  bucketOf(s: number): number {
    const c = this.cur;
    if (c === Number.NEGATIVE_INFINITY) return Number.NaN;
    const lo = c - this.k;
    return lo + ((((s - (lo % this.r)) % this.r) + this.r) % this.r);
  }

  /** Slot index of bucket id `b`. */
  slotOf(b: number): number {
    const r = this.r;
    // a bucket near the ring's (every bucket a decision reads) from the current bucket's slot: a
    // bucket id is past 2^31, a double, and its remainder a float modulo (a call into C)
    const off = b - this.d[CUR]!;
    if (off >= -r && off <= r) {
      const s = this.curSlot + off;
      return (s < 0 ? s + r : s >= r ? s - r : s) | 0;
    }
    return this.ringSlot(b);
  }

  /** Slot index of bucket id `b`, from the id alone. */
  private ringSlot(b: number): number {
    const s = b % this.r;
    // as an int32: a bucket id is past 2^31 (a double), and so is its remainder unless told
    // otherwise; stored in oldest / curSlot / nextSlot a double is a boxed number of 16 bytes each
    // (every key's fields turn double), read through the box on every decision
    return (s < 0 ? s + this.r : s) | 0;
  }

  /**
   * Move the ring to current bucket `c`; buckets outside `c-k .. c+1` expire.
   * A `c` earlier than the current one is ignored (time never runs backwards here).
   */
  roll(c: number): void {
    const prev = this.cur;
    if (c <= prev) return;
    const { r, k, d, ob, sb, fb, peers, floor } = this;
    let full = 0;
    let ownFull = 0;
    let offeredFull = 0;
    for (let b = c - k; b <= c + 1; b++) {
      const s = this.slotOf(b);
      // the ring held c' - k .. c' + 1 for the previous c': buckets after that are new here
      if (b > prev + 1) {
        d[ob + SLOT * s] = 0;
        // the counts and the packed times
        this.parts.fill(0, PART_STRIDE * s, PART_STRIDE * (s + 1));
        d[fb + SLOT * s] = 0;
        d[sb + SLOT * s] = 0;
        if (this.spanned !== undefined) this.spanned[s] = 0;
        if (floor !== undefined) floor[s] = 0;
        if (this.skews !== undefined) this.skews[s] = 0;
        for (let o = 1; o < peers.length; o++) {
          const p = peers[o];
          if (p !== undefined) {
            p[s] = 0;
            if (p.length > r + 2) p[r + 2 + s] = -1;
            if (p.length > 2 * r + 2) p[2 * r + 2 + s] = 0;
          }
        }
      }
      if (b > c - k) {
        full += d[sb + SLOT * s]!;
        ownFull += d[ob + SLOT * s]!;
        offeredFull += d[fb + SLOT * s]!;
      }
    }
    d[FULL] = full;
    d[OWN_FULL] = ownFull;
    d[OFFERED_FULL] = offeredFull;
    d[CUR] = c;
    this.oldest = this.ringSlot(c - k);
    this.curSlot = this.ringSlot(c);
    this.nextSlot = this.ringSlot(c + 1);
  }

  /**
   * {@link estimate} with peers' counts in the oldest bucket counted whole, not by the part `w`
   * of the bucket still inside: they carry no times, and may all be inside the window.
   */
  estimateWhole(w: number): number {
    const o = this.oldest;
    const own = this.d[this.ob + SLOT * o]!;
    return this.full + (this.d[this.sb + SLOT * o]! - own) + this.ownInside(own, w);
  }

  /**
   * The global estimate given `w`, the weight (0..1] of the oldest bucket still inside the
   * window: peers' counts there weighted by `w`, our own by {@link ownWeight}.
   */
  estimate(w: number): number {
    const o = this.oldest;
    const own = this.d[this.ob + SLOT * o]!;
    const sp = this.spanned;
    let others =
      sp === undefined || sp[o] === 0 ? (this.d[this.sb + SLOT * o]! - own) * w : this.othersLeft(w);
    const sk = this.skews;
    if (sk !== undefined && sk[o]! > 0) others = Math.min(this.d[this.sb + SLOT * o]! - own, others + sk[o]!);
    return this.full + others + this.ownInside(own, w);
  }

  /**
   * Peers' and the floor's counts in the oldest bucket still inside the window (part `w` of it
   * is): each peer's by the part of its span inside, the rest by `w`.
   */
  private othersLeft(w: number): number {
    const o = this.oldest;
    if (this.d[SPANS_AT] !== this.cur) this.listOldestSpans();
    const list = this.oldestSpans!;
    const cut = 1 - w;
    let rest = this.d[this.sb + SLOT * o]! - this.d[this.ob + SLOT * o]!;
    let left = 0;
    for (let i = 0; i < this.oldestSpansN; i += SPAN_FIELDS) {
      const c = list[i]!;
      rest -= c;
      left += c * leftAt(cut, list[i + 1]!, list[i + 2]!, list[i + 3]!);
    }
    return left + rest * w;
  }

  /** Lists the oldest bucket's peers with a span (see {@link oldestSpans}). */
  private listOldestSpans(): void {
    const n = this.spanNumbers(this.oldest);
    if (this.oldestSpans === undefined || this.oldestSpans.length < n)
      this.oldestSpans = new Float64Array(Math.max(n, 8));
    this.oldestSpansN = this.decodeSpans(this.oldest, this.oldestSpans);
    this.d[SPANS_AT] = this.cur;
  }

  /** How many numbers slot `s`'s decoded spans take (SPAN_FIELDS per peer with a span). */
  private spanNumbers(s: number): number {
    return SPAN_FIELDS * (this.spanned?.[s] ?? 0);
  }

  /**
   * Decodes the spans of slot `s` into `list` (SPAN_FIELDS numbers per peer with a span: count,
   * last, prev, before; room for {@link spanNumbers}); returns how many numbers it wrote.
   */
  private decodeSpans(s: number, list: Float64Array): number {
    const at = this.r + 2 + s;
    const n = this.spanNumbers(s);
    let j = 0;
    const peers = this.peers;
    for (let i = 1; i < peers.length && j < n; i++) {
      const p = peers[i];
      if (p === undefined || p.length <= at) continue;
      const v = p[at]!;
      if (v < 0) continue;
      list[j++] = p[s]!;
      list[j++] = spanLast(v);
      list[j++] = spanPrev(v);
      list[j++] = spanShare(v);
    }
    return j;
  }

  /** This node's own admitted cost in the window, weighted by when it was admitted. */
  ownEstimate(w: number): number {
    return this.ownFull + this.ownInside(this.d[this.ob + SLOT * this.oldest]!, w);
  }

  /**
   * Of `own`, our own admissions in the oldest bucket, what is still inside the window (see
   * {@link ownWeight}); none to weigh where there are none (an oldest bucket without own counts
   * is the common case, and has no interval to keep its weight for).
   */
  private ownInside(own: number, w: number): number {
    return own > 0 ? own * this.ownWeight(w) : 0;
  }

  /**
   * The part of our own admissions in the oldest bucket still inside the window, whose
   * first `1 - w` of the bucket is already out (see {@link ownLeft}).
   */
  ownWeight(w: number): number {
    const cut = 1 - w;
    // the answer only changes where the cut passes a part's last admission: kept for the
    // interval it holds on, for the oldest bucket of `ownAt` (a roll or a merge into it clears it)
    const c = cut + 2 ** -23;
    const d = this.d;
    if (d[OWN_AT] === d[CUR] && c >= d[OWN_LO]! && c < d[OWN_HI]! && cut + 1e-9 < 1) return d[OWN_VAL]!;
    const val = this.ownLeft(this.oldest, cut);
    if (d[LEFT_LO]! <= d[LEFT_HI]!) {
      d[OWN_AT] = d[CUR]!;
      d[OWN_LO] = d[LEFT_LO]!;
      d[OWN_HI] = d[LEFT_HI]!;
      d[OWN_VAL] = val;
    }
    return val;
  }

  /**
   * How much more of slot `s`'s own admissions may be inside the window, at worst as the bucket
   * slides out, than a peer counts, who weighs them as if spread evenly over the bucket: the most,
   * over the cuts, of (own counts of every part whose last admission is after the cut) less (own
   * counts × the part of the bucket after the cut): the cut just before a part's last admission.
   * 0 for counts early in the bucket; about an eighth of them for counts spread evenly.
   */
  ownDeficit(s: number): number {
    const own = this.d[this.ob + SLOT * s]!;
    if (!(own > 0)) return 0;
    const parts = this.parts;
    const at = PART_STRIDE * s;
    let worst = 0;
    let inside = 0;
    // a part's last admission is within it: later parts' are later
    for (let j = OWN_PARTS - 1; j >= 0; j--) {
      const v = parts[at + j]!;
      inside += v;
      if (!(v > 0)) continue;
      const dj = inside - own * (1 - partEnd(parts, at, j));
      if (dj > worst) worst = dj;
    }
    return worst;
  }

  /**
   * The part of slot `s`'s own admissions still inside the window when the part `cut` (0..1) of
   * the bucket is out: those of every part of the bucket whose last admission is after the cut,
   * whole (the tolerance absorbs float error at whole-ms boundaries); 1 - cut when it has none.
   */
  ownLeft(s: number, cut: number): number {
    this.d[LEFT_LO] = 0;
    this.d[LEFT_HI] = -1;
    if (cut + 1e-9 >= 1) return 0;
    const parts = this.parts;
    const at = PART_STRIDE * s;
    // a cut within 2^-23 of a bucket of a last admission (rounded up) has it out
    const c = cut + 2 ** -23;
    // part j's last admission is within it: every part before the cut's is out, every part after
    // it in; only the cut's own part is read by its time (and the nearest held parts either side,
    // for the interval the answer holds on)
    const jc = Math.min(OWN_PARTS - 1, Math.max(0, Math.floor(c * OWN_PARTS)));
    let all = 0;
    let left = 0;
    let below = -1;
    let above = -1;
    for (let j = 0; j < OWN_PARTS; j++) {
      const v = parts[at + j]!;
      if (!(v > 0)) continue;
      all += v;
      if (j < jc) below = j;
      else if (j > jc) {
        left += v;
        if (above < 0) above = j;
      }
    }
    if (!(all > 0)) return 1 - Math.max(0, cut);
    let lo = Number.NEGATIVE_INFINITY;
    let hi = Number.POSITIVE_INFINITY;
    const vc = parts[at + jc]!;
    if (vc > 0) {
      const end = partEnd(parts, at, jc);
      if (c < end) {
        left += vc;
        hi = end;
      } else lo = end;
    }
    if (lo === Number.NEGATIVE_INFINITY && below >= 0) lo = partEnd(parts, at, below);
    if (hi === Number.POSITIVE_INFINITY && above >= 0) hi = partEnd(parts, at, above);
    this.d[LEFT_LO] = lo;
    this.d[LEFT_HI] = hi;
    // float32 parts: exact for whole counts under 2^24 a part
    return left >= all ? 1 : left / all;
  }

  /** This node's own offered cost in the window (its demand), weighted the same way. */
  offeredEstimate(w: number): number {
    return this.offeredFull + this.d[this.fb + SLOT * this.oldest]! * w;
  }

  /**
   * Record own admitted cost in the current bucket (call after roll); `at` is when, as a
   * fraction of the bucket (0..1). Without it the admission spans the whole bucket.
   */
  addOwn(cost: number, at = -1): void {
    const s = this.curSlot;
    if (at < 0 || at > 1) this.spreadOwn(s, cost);
    else {
      const x = at * OWN_PARTS;
      const j = Math.min(OWN_PARTS - 1, Math.floor(x));
      const parts = this.parts;
      const i = PART_STRIDE * s;
      parts[i + j] = parts[i + j]! + cost;
      // the time in the part, rounded up to a step: never earlier than the admission
      const q = Math.min(TIME_STEP, Math.ceil((x - j) * TIME_STEP));
      const t = timesAt(i, j);
      const word = parts[t]! | 0;
      const sh = TIME_BITS * (j % TIMES_A_WORD);
      if (q > ((word >>> sh) & TIME_STEP)) parts[t] = (word & ~(TIME_STEP << sh)) | (q << sh);
    }
    const d = this.d;
    const o = this.ob + SLOT * s;
    const a = this.sb + SLOT * s;
    d[o] = d[o]! + cost;
    d[a] = d[a]! + cost;
    d[FULL] = d[FULL]! + cost;
    d[OWN_FULL] = d[OWN_FULL]! + cost;
  }

  /** Own cost without a time in slot `s`: spread evenly over its parts, each to its end. */
  private spreadOwn(s: number, cost: number): void {
    const at = PART_STRIDE * s;
    for (let j = 0; j < OWN_PARTS; j++) this.parts[at + j] = this.parts[at + j]! + cost / OWN_PARTS;
    for (let t = OWN_PARTS; t < PART_STRIDE; t++) this.parts[at + t] = ALL_AT_END;
  }

  /** True when this node offered any cost in the window, the partly weighted oldest bucket included. */
  hasOffered(): boolean {
    return this.offeredFull > 0 || this.d[this.fb + SLOT * this.oldest]! > 0;
  }

  /** Record own offered cost in the current bucket (call after roll). */
  addOffered(cost: number): void {
    const s = this.curSlot;
    this.d[this.fb + SLOT * s] = this.d[this.fb + SLOT * s]! + cost;
    this.offeredFull += cost;
  }

  /** The entry array of origin `o`, created on first use. */
  peer(o: number): number[] {
    let p = this.peers[o];
    if (p === undefined) {
      p = zeros(this.r + 2);
      // a key only this node admitted shares the empty list (a list a key saves 32 bytes)
      if (this.peers === NO_PEERS) this.peers = [];
      while (this.peers.length < o) this.peers.push(undefined);
      this.peers[o] = p;
    }
    return p;
  }

  /**
   * Merge origin `o`'s count for bucket `b` (max per entry). Returns the increase
   * applied (0 when the entry already held as much, or `b` is outside the ring).
   * `at`: when it arrived, in buckets (our time / bw), and `age`, in buckets, how old the
   * counts of one arrival may be (see the class comment); without them the counts span the
   * whole bucket. Call after roll.
   */
  mergeEntry(o: number, b: number, count: number, at = Number.NaN, age = 0): number {
    if (b < this.cur - this.k || b > this.cur + 1) return 0;
    const s = this.slotOf(b);
    let p = this.peer(o);
    const had = p[s]!;
    const delta = count - had;
    if (delta <= 0) return 0;
    const i = this.r + 2 + s;
    const old = p.length > i ? p[i]! : -1;
    // the span after this increase: where counts already span the whole bucket they still do
    let span = -1;
    if (!Number.isNaN(at) && keepsSpans(age) && (had === 0 || old >= 0)) {
      const last = at - b;
      if (had === 0) span = packSpan(last - age, last, last, 0);
      else {
        // the first arrival's counts may be `age` older than it. An arrival within `age` of the
        // one before (a burst published in parts, or relayed) joins its group, the counts
        // counted whole until the group's last arrival; a later one starts a new group, and
        // what had arrived before it is the earlier counts
        const prevLast = spanLast(old);
        const before = spanShare(old);
        span =
          last - prevLast <= age
            ? packSpan(spanFrom(old), spanPrev(old), last, (before * had) / count)
            : // a span with an earlier group is never the whole bucket's steady traffic: its
              // start is kept past the bucket's start
              packSpan(Math.max(spanFrom(old), 1 / SPAN_Q), prevLast, last, had / count);
      }
    }
    if (span >= 0 || old >= 0) {
      // its first span: the entry array grows by one span per slot, the whole bucket for now
      if (p.length <= i) p = this.growEntry(o, 2 * this.r + 2);
      this.spanned ??= new Int32Array(this.r);
      if (old >= 0 !== span >= 0) this.spanned[s] = this.spanned[s]! + (span >= 0 ? 1 : -1);
      p[i] = span;
    }
    p[s] = count;
    if (s === this.oldest) this.d[SPANS_AT] = Number.NaN;
    this.d[this.sb + SLOT * s] = this.d[this.sb + SLOT * s]! + delta;
    if (b > this.cur - this.k) this.full += delta;
    return delta;
  }

  /**
   * Max-merge origin `o`'s skew for bucket `b` (its {@link ownDeficit} there: how much of its
   * counts may be inside the window beyond an even spread), never more than its count there.
   * Call after its counts are merged, and after roll.
   */
  mergeSkew(o: number, b: number, skew: number): void {
    if (!(skew > 0) || b < this.cur - this.k || b > this.cur + 1) return;
    const s = this.slotOf(b);
    const r = this.r;
    let p = this.peer(o);
    if (p.length < 3 * r + 2) p = this.growEntry(o, 3 * r + 2);
    const i = 2 * r + 2 + s;
    const v = Math.min(skew, p[s]!);
    if (!(v > p[i]!)) return;
    this.skews ??= new Float64Array(r);
    this.skews[s] = this.skews[s]! + v - p[i]!;
    p[i] = v;
  }

  /**
   * Origin `o`'s entry array grown to `length` numbers, what it held kept: new spans -1 (the whole
   * bucket), new skews 0 (see {@link peers}, {@link mergeSkew}).
   */
  private growEntry(o: number, length: number): number[] {
    const old = this.peers[o]!;
    const r2 = 2 * this.r + 2;
    const grown = Array.from({ length }, (_, j) => (j < old.length ? old[j]! : j < r2 ? -1 : 0));
    this.peers[o] = grown;
    return grown;
  }

  /** Own skews ({@link ownDeficit}) of buckets `from` .. current, rounded up. */
  ownSkews(from = this.cur - this.k): number[] {
    const out: number[] = [];
    // the same buckets as ownCounts(from): none before the ring
    for (let b = Math.max(from, this.cur - this.k); b <= this.cur; b++)
      out.push(Math.ceil(this.ownDeficit(this.slotOf(b)) - 1e-9));
    return out;
  }

  /**
   * Max-merge a count of this node's own origin learned back from a peer (after
   * a restart this node's counts live on only there). Call after roll.
   */
  mergeOwnEntry(b: number, count: number): void {
    if (b < this.cur - this.k || b > this.cur + 1) return;
    const s = this.slotOf(b);
    const delta = count - this.d[this.ob + SLOT * s]!;
    if (delta <= 0) return;
    this.d[this.ob + SLOT * s] = count;
    // learned back without times: they may be anywhere in the bucket
    this.spreadOwn(s, delta);
    this.d[OWN_AT] = Number.NaN;
    this.d[this.sb + SLOT * s] = this.d[this.sb + SLOT * s]! + delta;
    if (b > this.cur - this.k) {
      this.full += delta;
      this.ownFull += delta;
    }
  }

  /** Max-merge an unattributed count into bucket `b` (see {@link floor}). Call after roll. */
  mergeFloor(b: number, count: number): number {
    if (b < this.cur - this.k || b > this.cur + 1) return 0;
    if (this.floor === undefined) this.floor = new Float64Array(this.r);
    const s = this.slotOf(b);
    const delta = count - this.floor[s]!;
    if (delta <= 0) return 0;
    this.floor[s] = count;
    this.d[this.sb + SLOT * s] = this.d[this.sb + SLOT * s]! + delta;
    if (b > this.cur - this.k) this.full += delta;
    return delta;
  }

  /** The unattributed part of the estimate, weighted the same way. */
  floorEstimate(w: number): number {
    const f = this.floor;
    if (f === undefined) return 0;
    let total = f[this.oldest]! * w;
    for (let b = this.cur - this.k + 1; b <= this.cur + 1; b++) total += f[this.slotOf(b)]!;
    return total;
  }

  /** Origin `o`'s estimate in the window (0 when never heard), its oldest bucket weighted as in {@link estimate}. */
  peerEstimate(o: number, w: number): number {
    const p = this.peers[o];
    if (p === undefined) return 0;
    const at = this.r + 2 + this.oldest;
    const v = p.length > at ? p[at]! : -1;
    let total = p[this.oldest]! * (v < 0 ? w : peerLeft(1 - w, v));
    const sk = p.length > 2 * this.r + 2 ? p[2 * this.r + 2 + this.oldest]! : 0;
    if (sk > 0) total = Math.min(p[this.oldest]!, total + sk);
    for (let s = 0; s < this.r; s++) if (s !== this.oldest) total += p[s]!;
    return total;
  }

  /**
   * The oldest bucket in the window, the partly weighted oldest included, where an origin but
   * ours (the unattributed floor included) has counts; +Infinity when none has.
   */
  firstPeerBucket(): number {
    for (let x = this.cur - this.k; x <= this.cur + 1; x++) {
      const s = this.slotOf(x);
      if (this.d[this.sb + SLOT * s]! - this.d[this.ob + SLOT * s]! > 1e-9) return x;
    }
    return Number.POSITIVE_INFINITY;
  }

  /** True when any origin has counts in the window, the partly weighted oldest bucket included. */
  hasCounts(): boolean {
    return this.full > 0 || this.d[this.sb + SLOT * this.oldest]! > 0;
  }

  /**
   * Counts since a horizon, into `out`: `out[0]` every origin's counts after bucket `h` (peers'
   * counts in `h` count as before the horizon: they may all precede it, the safe side of a "what
   * was admitted since" question for the headroom) and our own since `ownFrom`; `out[1]` our own
   * since `ownFrom` (a time in buckets: our time / bw; by part of a bucket, a part whose last
   * admission is at or after it counting whole). A horizon before the ring counts every bucket in
   * it. Nothing allocated: `out` is the caller's.
   */
  countsSince(h: number, ownFrom: number, out: Float64Array): void {
    const d = this.d;
    const r = this.r;
    const cur = d[CUR]!;
    const c = Math.floor(ownFrom);
    let others = 0;
    let own = 0;
    let b = Math.max(Math.min(h + 1, c), cur - this.k);
    // one slot lookup, then the next slot's by step
    let s = b <= cur + 1 ? this.slotOf(b) : 0;
    for (; b <= cur + 1; b++) {
      if (b > h) others += d[this.sb + SLOT * s]! - d[this.ob + SLOT * s]!;
      own += this.ownInSlot(s, b, c, ownFrom);
      s = s + 1 === r ? 0 : s + 1;
    }
    out[0] = others + own;
    out[1] = own;
  }

  /** Our own admissions in bucket `b` (in the ring) since `from` (a time in buckets), by part of a bucket (see {@link ownSince}). */
  ownInBucket(b: number, from: number): number {
    const c = Math.floor(from);
    return b < c ? 0 : this.ownInSlot(this.slotOf(b), b, c, from);
  }

  /** {@link ownInBucket} of bucket `b` in slot `s`, `c` the bucket of `from`. */
  private ownInSlot(s: number, b: number, c: number, from: number): number {
    if (b < c) return 0;
    return b === c ? this.ownSince(s, from - c) : this.d[this.ob + SLOT * s]!;
  }

  /**
   * Slot `s`'s own admissions at or after part `frac` of its bucket: every part of the bucket
   * whose last admission is at or after it, whole (its times are rounded up, never earlier than
   * an admission); all of them when `frac` is 0 or less.
   */
  ownSince(s: number, frac: number): number {
    const own = this.d[this.ob + SLOT * s]!;
    if (!(frac > 0) || !(own > 0)) return own;
    const parts = this.parts;
    const at = PART_STRIDE * s;
    // parts after frac's are after it, parts two or more before it before; the two between, by
    // their times (the one just before may end exactly at frac)
    const jf = Math.min(OWN_PARTS - 1, Math.floor(frac * OWN_PARTS));
    let before = 0;
    for (let j = 0; j < jf - 1; j++) before += parts[at + j]!;
    for (let j = Math.max(0, jf - 1); j <= jf; j++) {
      const v = parts[at + j]!;
      if (v > 0 && partEnd(parts, at, j) < frac) before += v;
    }
    return before > 0 ? Math.max(0, own - before) : own;
  }

  /**
   * How long (ms, buckets `bw` wide) until `need` of the window's counts have left it at time
   * `now`, with nothing new admitted: `ownOnly` counts our own admissions only, else every
   * origin's. Peers' counts leave a bucket evenly over it, or as their spans say (see
   * {@link peerLeft}); ours by part of the bucket (see {@link ownWeight}),
   * so the answer matches what the estimate will say then. Call after roll.
   */
  timeToDrain(need: number, ownOnly: boolean, now: number, bw: number): number {
    if (need <= 1e-9) return 0;
    const frac = (now - this.cur * bw) / bw;
    let start = frac < 0 ? 0 : Math.min(1, frac);
    let t = 0;
    for (let b = this.cur - this.k; b <= this.cur + 1; b++) {
      const s = this.slotOf(b);
      const own = this.d[this.ob + SLOT * s]!;
      // peers' counts with a span leave as it says (listLeft: what they hold at a cut), decoded
      // once per slot into the scratch list
      const room = ownOnly ? 0 : this.spanNumbers(s);
      if (scratch.length < room) scratch = new Float64Array(2 * room);
      const n = room > 0 ? this.decodeSpans(s, scratch) : 0;
      const spans = n > 0;
      const others = ownOnly ? 0 : this.d[this.sb + SLOT * s]! - own - (spans ? listLeft(scratch, n, -1) : 0);
      // drained(c) for the cut at c in [start, 1]: others' evenly, ours by part of the bucket
      // (ownLeft): monotone, so the first c that drains `need` is found by bisection (this runs
      // on denials only; no closures, nothing allocated)
      const w0 = b === this.cur - this.k ? this.ownLeft(s, start) : 1;
      // held as the bucket's turn starts: as the estimate weighs the oldest bucket now, a later
      // one whole (its counts that arrived before it began leave as it becomes the oldest)
      const sp0 = spans ? listLeft(scratch, n, b === this.cur - this.k ? start : -1) : 0;
      // peers' skews (mergeSkew): as the estimate, at most the counts, the rest leaving at the end
      const sk = ownOnly || this.skews === undefined ? 0 : this.skews[s]!;
      const o0 = Math.min(others, others * (1 - start) + sk);
      const all = o0 + own * w0 + sp0;
      if (all >= need - 1e-9) {
        const atStart = own * (w0 - this.ownLeft(s, start)) + (spans ? sp0 - listLeft(scratch, n, start) : 0);
        if (atStart >= need - 1e-9) return t;
        let lo = start;
        let hi = 1;
        for (let i = 0; i < 48 && hi - lo > 1e-12; i++) {
          const mid = (lo + hi) / 2;
          const drained =
            o0 -
            Math.min(others, others * (1 - mid) + sk) +
            own * (w0 - this.ownLeft(s, mid)) +
            (spans ? sp0 - listLeft(scratch, n, mid) : 0);
          if (drained >= need - 1e-9) hi = mid;
          else lo = mid;
        }
        return t + (hi - start) * bw;
      }
      need -= all;
      t += (1 - start) * bw;
      start = 0;
    }
    return t;
  }

  /**
   * Merge origin `origin`'s counts for buckets `base + shift`, `base + shift + 1`, ... (FLOOR:
   * the unattributed {@link floor}), max per bucket, with what the origin holds capped over
   * the whole ring, across every merge and not per call: at most `cap` in a bucket,
   * `fullCap` over the full-weight buckets and `ringCap` over the ring. Buckets at or past
   * our newest (an origin whose clock runs ahead, or counts moved later by an offset) are
   * folded into the newest instead of dropped: kept longer, never lost. Buckets before the
   * ring are skipped. Returns true when anything was capped. Call after roll.
   */
  mergeCapped(
    origin: number,
    base: number,
    shift: number,
    counts: readonly number[],
    cap: number,
    fullCap: number,
    ringCap: number,
    at = Number.NaN,
    age = 0,
  ): boolean {
    const lo = this.cur - this.k;
    const hi = this.cur + 1;
    const held = origin === FLOOR ? this.floor : this.peers[origin];
    let ring = 0;
    let full = 0;
    if (held !== undefined) {
      for (let b = lo; b <= hi; b++) {
        const v = held[this.slotOf(b)]!;
        ring += v;
        if (b > lo) full += v;
      }
    }
    let capped = false;
    for (let i = 0; i < counts.length; i++) {
      let b = base + i + shift;
      let v = counts[i]!;
      if (v > cap) {
        v = cap;
        capped = true;
      }
      if (b >= hi) {
        for (let j = i + 1; j < counts.length; j++) {
          const x = counts[j]!;
          if (x > cap) capped = true;
          v += Math.min(x, cap);
        }
        if (v > cap) v = cap;
        b = hi;
        i = counts.length; // the last bucket merged
      }
      if (b < lo) continue;
      const had = held === undefined ? 0 : held[this.slotOf(b)]!;
      let delta = v - had;
      if (delta <= 0) continue;
      if (ring + delta > ringCap) {
        delta = ringCap - ring;
        capped = true;
      }
      if (b > lo && full + delta > fullCap) {
        delta = fullCap - full;
        capped = true;
      }
      if (delta <= 0) continue;
      if (origin === FLOOR) this.mergeFloor(b, had + delta);
      else this.mergeEntry(origin, b, had + delta, at, age);
      ring += delta;
      if (b > lo) full += delta;
    }
    return capped;
  }

  /** Whether origin `o` has an entry for this key (anything of it was ever merged). */
  hasOrigin(o: number): boolean {
    return this.peers[o] !== undefined;
  }

  /** Origin `o`'s reported demand (cost offered over a window); 0 when never heard. */
  demandOf(o: number): number {
    const p = this.peers[o];
    return p === undefined ? 0 : p[this.r]!;
  }

  /** When (our time) origin `o` reported {@link demandOf}; -Infinity when never heard. */
  demandAt(o: number): number {
    const p = this.peers[o];
    return p === undefined ? Number.NEGATIVE_INFINITY : p[this.r + 1]!;
  }

  /** Record origin `o`'s reported demand and when it was reported (our time). */
  setDemand(o: number, demand: number, at: number): void {
    const p = this.peer(o);
    p[this.r] = demand;
    p[this.r + 1] = at;
  }

  /** Our own counts of buckets `from` .. c (c-k .. c by default), oldest first (what a gossip entry carries). */
  ownCounts(from = this.cur - this.k): number[] {
    const counts: number[] = [];
    for (let b = Math.max(from, this.cur - this.k); b <= this.cur; b++)
      counts.push(this.d[this.ob + SLOT * this.slotOf(b)]!);
    return counts;
  }

  /** Origin `o`'s counts of buckets c-k .. c+1, oldest first; undefined when it has none there. */
  originCounts(o: number): number[] | undefined {
    const p = this.peers[o];
    return p === undefined ? undefined : this.ringCounts(p);
  }

  /** Origin `o`'s skews ({@link mergeSkew}) of buckets c-k .. c+1, oldest first, rounded up; undefined when it has none. */
  originSkews(o: number): number[] | undefined {
    const p = this.peers[o];
    if (p === undefined || p.length < 3 * this.r + 2) return undefined;
    const out: number[] = [];
    for (let b = this.cur - this.k; b <= this.cur + 1; b++)
      out.push(Math.ceil(p[2 * this.r + 2 + this.slotOf(b)]! - 1e-9));
    return out;
  }

  /** The unattributed floor's counts of buckets c-k .. c+1, oldest first; undefined when it has none there. */
  floorCounts(): number[] | undefined {
    return this.floor === undefined ? undefined : this.ringCounts(this.floor);
  }

  /** Per-slot numbers `a` (counts first) by bucket c-k .. c+1; undefined when none is positive. */
  private ringCounts(a: ArrayLike<number>): number[] | undefined {
    const counts: number[] = [];
    let any = false;
    for (let b = this.cur - this.k; b <= this.cur + 1; b++) {
      const v = a[this.slotOf(b)]!;
      if (v > 0) any = true;
      counts.push(v);
    }
    return any ? counts : undefined;
  }

  /** True when nobody has anything left in the window (safe to forget the key). */
  isEmpty(): boolean {
    if (this.full > 0 || this.offeredFull > 0) return false;
    return this.d[this.sb + SLOT * this.oldest] === 0 && this.d[this.fb + SLOT * this.oldest] === 0;
  }

  /**
   * Forget origin `o`. `fold` (a departed peer, forgotten while its counts may still be in a long
   * window): its counts move into the unattributed floor, added, and its origin slot is free; the
   * estimate stays the same except that counts with arrival times lose them (the floor weighs
   * its oldest bucket evenly: windows over RETAIN_MAX_MS only). Else (counts not believed) they
   * are dropped.
   */
  dropOrigin(o: number, fold = false): void {
    const p = this.peers[o];
    if (p === undefined) return;
    this.d[SPANS_AT] = Number.NaN;
    const spanned = this.spanned;
    if (spanned !== undefined && p.length > this.r + 2)
      for (let s = 0; s < this.r; s++) if (p[this.r + 2 + s]! >= 0) spanned[s] = spanned[s]! - 1;
    // folded counts keep their skews in the sum (the floor is weighed evenly too); dropped ones lose them
    if (!fold && this.skews !== undefined && p.length > 2 * this.r + 2)
      for (let s = 0; s < this.r; s++) this.skews[s] = this.skews[s]! - p[2 * this.r + 2 + s]!;
    for (let s = 0; s < this.r; s++) {
      const v = p[s]!;
      if (v === 0) continue;
      if (fold) {
        this.floor ??= new Float64Array(this.r);
        this.floor[s] = this.floor[s]! + v;
        continue;
      }
      this.d[this.sb + SLOT * s] = this.d[this.sb + SLOT * s]! - v;
      if (s !== this.oldest && this.cur !== Number.NEGATIVE_INFINITY) this.full -= v;
    }
    this.peers[o] = undefined;
  }
}

/**
 * Spans are kept only where `age` (a gossip interval and the data's age) is at most this part of
 * a bucket: at g = 100 ms and d = 10 ms, buckets of 0.74 s or more (a window of 7.4 s or more
 * at k = 10). In shorter buckets a peer's counts mostly arrive over the whole bucket anyway;
 * spans there made most estimates loop over the origins (36 to 65 % of them with buckets of
 * 100 ms at g = 100 ms), and dense arrivals at the limit formed groups counted whole (the seed
 * trace's k = 10 row, age 0.2 of a bucket: 9,617 admitted to 9,371 with spans kept up to 0.5).
 */
export const SPAN_MAX_AGE = 0.15;

/**
 * Whether peers' counts keep arrival spans where the gossip horizon is `age` buckets
 * (SPAN_MAX_AGE); where they keep none, their senders' skews weigh the oldest bucket instead.
 */
export function keepsSpans(age: number): boolean {
  return age <= SPAN_MAX_AGE;
}

/** Steps of a bucket in which a span's times are kept (rounded up: later, an over-count). */
const SPAN_Q = 1024;
/** One more than the largest step, a power of two: three times take 33 bits. */
const SPAN_M = 2048;
/**
 * Steps of the share of a span's counts that arrived before its last group (rounded down): the
 * other 19 bits of 2^52. Fine enough that rescaling it as each part of a burst joins its group
 * loses next to nothing: at 1/255 a burst of 80 in parts of 5 rounded it down to 0.
 */
const SHARE_Q = 524_287;

function step(x: number): number {
  return x >= 1 ? SPAN_Q : x <= 0 ? 0 : Math.ceil(x * SPAN_Q);
}

/**
 * When a peer's counts in a bucket arrived (fractions of the bucket, clamped to 0..1), packed into
 * one number of its entry array: `from`, the first arrival less `age` (the earliest its counts
 * may have been admitted; only whether it is past the bucket's start is read), `prev`, the last
 * arrival of the group before the last (see {@link peerLeft}), `last`, the last arrival, and
 * `before`, the share of the counts that had arrived before the last group. -1 where they span
 * the whole bucket in one group: they may be from its start, kept arriving, and the last came
 * after its end (steady traffic, in which a later burst then weighs as without arrival times
 * too), and the part of the bucket still inside weighs them. Times are rounded up and the share
 * down: both count more, never less.
 */
export function packSpan(from: number, prev: number, last: number, before: number): number {
  const l = step(last);
  const f = Math.min(l, step(from));
  if (f === 0 && l === SPAN_Q && !(before > 0)) return -1;
  const times = (f * SPAN_M + Math.min(l, step(prev))) * SPAN_M + l;
  return times * (SHARE_Q + 1) + (before <= 0 ? 0 : before >= 1 ? SHARE_Q : Math.floor(before * SHARE_Q));
}

function spanTimes(v: number): number {
  return Math.floor(v / (SHARE_Q + 1));
}

function spanFrom(v: number): number {
  return Math.floor(spanTimes(v) / (SPAN_M * SPAN_M)) / SPAN_Q;
}

function spanPrev(v: number): number {
  return (Math.floor(spanTimes(v) / SPAN_M) % SPAN_M) / SPAN_Q;
}

function spanLast(v: number): number {
  return (spanTimes(v) % SPAN_M) / SPAN_Q;
}

function spanShare(v: number): number {
  return (v % (SHARE_Q + 1)) / SHARE_Q;
}

/**
 * The part of a peer's counts in the oldest bucket still inside the window when the part `cut`
 * of the bucket is out, from their span `v` (see {@link packSpan}): all of them until `prev`,
 * the last arrival of the group before the last, then the last group's until `last`, then none.
 * A group is arrivals each within `age` of the one before (a burst published in parts, or
 * relayed). Every count had arrived, so been admitted, by the end of its group; where in the
 * `age` before its arrivals it was admitted is not known, and bunched at the end (a burst) it
 * stays in until then. Counting the earlier groups evenly instead let a burst in a middle group
 * (an early request, the burst, one more request) slide out as before (128 of L = 100).
 */
export function peerLeft(cut: number, v: number): number {
  return leftAt(cut, spanLast(v), spanPrev(v), spanShare(v));
}

/** Numbers per peer in KeyWindow's lists of decoded spans: count, last, prev, before. */
const SPAN_FIELDS = 4;

/**
 * The peers' entries of a key no peer has reported: one empty list for all, never written
 * ({@link KeyWindow.peer} gives a key its own list first). Not frozen: a frozen list slowed every
 * key's reads of it (bench:decide mesh_10k 1.56-1.62 M/s against 1.72-1.74).
 */
const NO_PEERS: (number[] | undefined)[] = [];

/** `n` zeros in a packed array of exactly `n` elements (doubles once doubles are stored). */
function zeros(n: number): number[] {
  return Array.from({ length: n }, () => 0);
}

/** Scratch list of one slot's decoded spans (timeToDrain; single-threaded, never held across calls). */
let scratch = new Float64Array(64);

/** {@link peerLeft} on a decoded span. */
function leftAt(cut: number, last: number, prev: number, before: number): number {
  if (cut + 1e-9 >= last) return 0;
  return cut + 1e-9 >= prev ? 1 - before : 1;
}

/** What the `n` numbers of a decoded span list hold at `cut` (cut < 0: their whole counts). */
function listLeft(list: Float64Array, n: number, cut: number): number {
  let left = 0;
  for (let i = 0; i < n; i += SPAN_FIELDS) {
    left += cut < 0 ? list[i]! : list[i]! * leftAt(cut, list[i + 1]!, list[i + 2]!, list[i + 3]!);
  }
  return left;
}
