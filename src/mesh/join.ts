/**
 * Readiness at start: has a node joined the mesh it was pointed at? One rule for the daemon's
 * `/readyz` (src/daemon/server.ts) and an embedded node's `health().ready`
 * (src/mesh/mesh-limiter.ts), so a probe says the same thing of both.
 */

/** How long readiness waits at start to join the mesh, ms, by default (then ready in the L/N fallback). */
export const JOIN_TIMEOUT_MS = 10_000;

/** Why a node is not ready while its start gate is shut (EngineStats.starting): `/readyz` and `health()`. */
export const STARTING_REASON = 'starting: waiting until the members heard have heard this node';

/** What {@link JoinWatch} reads of a node's stats (a subset of MeshStats). */
export interface JoinSignals {
  sync: { pullsOk: number };
  discovery: { rounds: number; lastOthers: number };
}

/**
 * Has this node joined the mesh it was pointed at? True (and kept) once it runs alone (no
 * bootstrap), or a sync answer has been merged (it holds its peers' windows and the live
 * members' names, and holds each key to the start-up share until it hears them all), or a
 * discovery round found no member but itself (the first pod: the headless Service resolves
 * to itself or to nothing yet), or `timeoutMs` passed since `since` (members found, none
 * answering: the L/N fallback decides, as in a partition).
 *
 * Until then a new pod of a rolling update knows no count of the mesh's and decides in the
 * start-up fallback, whose N is 1 + the bootstrap entries (2 for one DNS name however many
 * pods it resolves to): routed to at once, it admitted L/2 on its own above what the others
 * had admitted in the window (the Docker rolling drill: worst 1 s 617 against L = 500).
 */
export class JoinWatch {
  private done: boolean;

  /**
   * @param standalone no bootstrap configured: a lone node's own view is complete.
   * @param timeoutMs how long to wait for a sync answer while members are found.
   * @param since when the wait began, on the clock the caller passes to {@link joined}.
   */
  constructor(
    standalone: boolean,
    private readonly timeoutMs: number,
    private readonly since: number,
  ) {
    this.done = standalone;
  }

  /** Whether the node has joined at `now` (same clock as `since`); reads `signals` only while not yet. */
  joined(now: number, signals: () => JoinSignals): boolean {
    if (this.done) return true;
    if (now - this.since >= this.timeoutMs) {
      this.done = true;
    } else {
      const s = signals();
      this.done = s.sync.pullsOk > 0 || (s.discovery.rounds > 0 && s.discovery.lastOthers === 0);
    }
    return this.done;
  }
}
