/** Sequence numbers of one origin remembered: the highest seen and a bitmask of the 31 below it. */
const WIDTH = 32;
/**
 * A gap this large cannot come from one run of an origin (its numbers go up
 * by one per message): the origin restarted (its numbers start from its clock
 * in µs), so the window starts over.
 */
const RESTART_GAP = 1_000_000;

/**
 * Duplicate detection for one origin's messages without a string or an entry
 * per message: copies of a message (the direct one and relayed ones) carry the
 * same sequence number. A number more than 31 below the highest seen is too
 * old to tell and counts as seen (the next message carries the same window).
 */
export class SeqWindow {
  private hi = -1;
  private bits = 0;
  /** When a number was last accepted (ms, the caller's clock). */
  last = 0;

  /** Whether `seq` was accepted before (or is too old to tell). */
  seen(seq: number): boolean {
    if (this.hi < 0 || seq > this.hi) return false;
    const d = this.hi - seq;
    if (d >= RESTART_GAP) return false;
    if (d >= WIDTH) return true;
    return (this.bits & (1 << d)) !== 0;
  }

  /**
   * Whether `seq` is newer than every number accepted (or starts over after a
   * restart): what a relay batch merges. An older one, even unseen, carries
   * nothing its origin's newer message did not (each message holds the whole window).
   */
  newer(seq: number): boolean {
    return this.hi < 0 || seq > this.hi || this.hi - seq >= RESTART_GAP;
  }

  /** Records `seq`; false when it was seen already (see {@link seen}). */
  accept(seq: number, now: number): boolean {
    if (this.hi < 0 || seq > this.hi + RESTART_GAP || this.hi - seq >= RESTART_GAP) {
      this.hi = seq;
      this.bits = 1;
      this.last = now;
      return true;
    }
    if (seq > this.hi) {
      const shift = seq - this.hi;
      this.bits = shift >= WIDTH ? 1 : ((this.bits << shift) | 1) >>> 0;
      this.hi = seq;
      this.last = now;
      return true;
    }
    const d = this.hi - seq;
    if (d >= WIDTH) return false;
    const mask = 1 << d;
    if ((this.bits & mask) !== 0) return false;
    this.bits = (this.bits | mask) >>> 0;
    this.last = now;
    return true;
  }
}
