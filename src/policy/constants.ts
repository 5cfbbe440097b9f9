/** Bounds and defaults of policy fields; the compiler and its error messages read them from here. */

/** Longest policy name. Names match {@link NAME_PATTERN}. */
export const MAX_NAME_LENGTH = 64;
/** Letters, digits and `_ . : -`: safe in keys, metrics labels and `RateLimit-Policy` tokens. */
export const NAME_PATTERN = /^[A-Za-z0-9_.:-]+$/;

/** Largest `limit`, `burst`, `queue` and `maxCost` (cells). Keeps every sum far below 2^53. */
export const MAX_CELLS = 1_000_000_000;

/** Shortest window: 1 ms. */
export const MIN_WINDOW_MS = 1;
/**
 * Longest window: 366 days (envoyproxy/ratelimit's `year` is 365). A window is at most 60
 * buckets whatever its length, so a long window costs no more to gossip than a short one; a
 * departed peer's counts in a long window are kept in each key's floor, not its table slot.
 */
export const MAX_WINDOW_MS = 366 * 86_400_000;
/** Longest a request may wait in a local queue (`deadlineMs`): one day. */
export const MAX_DEADLINE_MS = 86_400_000;

/** Default number of G-counter (or sliding-window-counter) buckets per window. */
export const DEFAULT_BUCKETS = 10;
/** Most buckets per window (each one is a gossiped entry per origin). */
export const MAX_BUCKETS = 60;
