/** The local limiter algorithms; each is pure with time passed in. */
export type AlgorithmName =
  | 'gcra'
  | 'token-bucket'
  | 'fixed-window'
  | 'sliding-window-counter'
  | 'sliding-window-log'
  | 'leaky-bucket';

export const ALGORITHMS: readonly AlgorithmName[] = [
  'gcra',
  'token-bucket',
  'fixed-window',
  'sliding-window-counter',
  'sliding-window-log',
  'leaky-bucket',
];

/** What to do when the limiter cannot decide (not started, internal error, isolated beyond fallback). */
export type FailureMode = 'open' | 'closed';

/** `controlled` shares the headroom between nodes (default); `naive` spends whenever estimate + cost <= limit. */
export type OverAdmission = 'controlled' | 'naive';

/**
 * Where a global policy's keys are decided (docs/owner.md). `local`: every node decides alone
 * (the decision rule, zero calls). `owner`: each key by its owner among the live members
 * (rendezvous hashing over the membership), exactly, one round trip from any other node.
 * `auto` (the default): `owner` while a node's fair part of L is under {@link OWNER_BELOW_UNITS}
 * units (L < 4 N, N the live members), else `local`.
 */
export type Placement = 'local' | 'owner' | 'auto';

/**
 * A local algorithm: `limit` cells per `windowMs` (the rate), with algorithm
 * specific extras. As user input every field is validated by the policy compiler.
 */
export interface LocalAlgorithmSpec {
  algorithm: AlgorithmName;
  /** Cells admitted per window (the sustained rate is limit / windowMs). */
  limit: number;
  windowMs: number;
  /** gcra, token-bucket: the most cells admitted at once. Default: limit. */
  burst?: number;
  /** sliding-window-counter: sub-buckets per window. Default: 10. */
  buckets?: number;
  /** leaky-bucket: queue capacity in cost units. Default: limit. */
  queue?: number;
  /** leaky-bucket: the longest a request may be told to wait. Default: windowMs. */
  deadlineMs?: number;
}

/** A named limit, as users write it. */
export interface PolicySpec {
  name: string;
  /**
   * `global` (default): enforced on the mesh-wide estimate kept in the windowed
   * G-counter. `local`: enforced by `algorithm` on this process alone.
   */
  scope?: 'global' | 'local';
  /** Cells per window: L. */
  limit: number;
  /** Window W in milliseconds. */
  windowMs: number;
  /**
   * global: buckets per window (k) of the G-counter. Default 10. More buckets on a short window
   * near its limit deny less (one key at 0.9 L of 1,000 per 1 s on 8 nodes, g = 100 ms: 2.3 % of
   * what an exact limiter admits with 10, 0.5 % with 20) and cost memory (about 1.5 KB a key at
   * 10, 3.7 KB at 50); buckets much shorter than the gossip interval can pass L a little (50 of
   * 20 ms: a key at 2 L reached L + 0.4 %). docs/decision-rule.md, the frontier.
   */
  buckets?: number;
  /** local scope only: the algorithm. Default gcra. */
  algorithm?: AlgorithmName;
  /** local scope only: see {@link LocalAlgorithmSpec}. */
  burst?: number;
  queue?: number;
  deadlineMs?: number;
  /** global scope only: a local algorithm checked in front of the global one (absorbs bursts). */
  local?: LocalAlgorithmSpec;
  /** Default `open`. */
  failureMode?: FailureMode;
  /** Decide and count, but always allow. Default false. */
  shadow?: boolean;
  /** Largest cost one request may carry. Default: limit. Costs above the limit are denied, never admitted. */
  maxCost?: number;
  /** global scope only. Default `controlled`. */
  overAdmission?: OverAdmission;
  /** global scope only: fall back to L/N when the view of peers is stale. Default true. */
  fallback?: boolean;
  /** global scope only: where keys are decided ({@link Placement}). Default `auto`. */
  placement?: Placement;
  /**
   * global scope only, keys placed on an owner: how long a node waits for the owner's answer
   * before the policy's `failureMode` decides (`open`: this node's local rule; `closed`: deny).
   * Default 50 ms.
   */
  ownerDeadlineMs?: number;
}

/** A validated policy with every default filled in. Produced only by the policy compiler. */
export interface Policy {
  readonly name: string;
  readonly scope: 'global' | 'local';
  readonly limit: number;
  readonly windowMs: number;
  readonly buckets: number;
  /** scope local: the algorithm; scope global: the front local algorithm, if any. */
  readonly local: Readonly<Required<LocalAlgorithmSpec>> | undefined;
  readonly failureMode: FailureMode;
  readonly shadow: boolean;
  readonly maxCost: number;
  readonly overAdmission: OverAdmission;
  readonly fallback: boolean;
  /** Absent for `auto` (the default), so policies that do not set it keep their version. */
  readonly placement?: Exclude<Placement, 'auto'>;
  /** Absent for the default (50 ms). */
  readonly ownerDeadlineMs?: number;
}

/** How a decision was reached. */
export type DecisionMode = 'global' | 'fallback' | 'local';

/** Why a decision came out as it did. */
export type DecisionRule =
  /** Every key had room. */
  | 'allow'
  /** The estimated global sum plus the cost exceeds the limit. */
  | 'global-limit'
  /** This node has spent its share of the remaining global headroom. */
  | 'headroom-share'
  /** Stale view: this node's own counts reached L/N. */
  | 'fallback-share'
  /** The local algorithm (local scope, or the front limiter) refused. */
  | 'local-limit'
  /** The cost is larger than the limit: it can never be admitted. */
  | 'cost-exceeds-limit'
  /** This node has said its farewell (a graceful stop): it decides no global policy. */
  | 'left-mesh'
  /** Just joined: a member its peers named is not heard yet, so it holds the start-up share L/N. */
  | 'startup-hold'
  /** Starting: the members this node hears have not all heard it yet (or none is heard): it decides no global policy yet. */
  | 'starting'
  /** The key's owner did not answer within the policy's ownerDeadlineMs, and the policy fails closed. */
  | 'owner-unreachable';

/**
 * Every term of one decision ({@link Engine.explain}), as numbers: what this node has seen, what
 * it reserves for members it may not have seen, its share of the headroom, and what would let
 * the request through (`retryAfterMs`). Sections a decision did not reach are absent.
 */
export interface Explanation {
  policy: string;
  key: string;
  cost: number;
  /** The time decided at (epoch ms, this node's clock). */
  at: number;
  allowed: boolean;
  rule: DecisionRule;
  mode: DecisionMode;
  /** The rule in words, with the numbers that decided it. */
  reason: string;
  limit: number;
  windowMs: number;
  remaining: number;
  /** When denied: ms after which the same request would pass if nothing else arrives; -1: never on this node's view. */
  retryAfterMs: number;
  resetMs: number;
  /** Global scope: the windowed counts this node holds for the key, by origin class (the estimate). */
  seen?: { total: number; own: number; peers: number; unattributed: number };
  /** Global scope: the members as this node sees them; `n` is the N of an L/N split. */
  members?: { live: number; stale: number; left: number; otherVersion: number; n: number };
  /** Global scope: counted on top of the seen counts for members that may have admitted unseen. */
  reserves?: { stale: number; otherVersion: number; narrowView: number };
  /**
   * Controlled mode: everything live peers admitted more than `horizonMs` ago has reached this
   * node; the headroom left by the counts before the recent buckets is shared, and this node's
   * own recent counts must stay within its share of it (`allowance`).
   */
  share?: {
    horizonMs: number;
    recentCounts: number;
    headroom: number;
    weight: number;
    weights: number;
    sharers: number;
    share: number;
    allowance: number;
    ownRecent: number;
  };
  /** Every peer stale (or still starting): this node's own counts within L/N. */
  fallback?: { share: number; own: number };
  /** Just joined, a named member not heard: the start-up share. */
  startupHold?: { share: number; own: number; untilMs: number };
  /**
   * Starting (the start gate): `heard` of the `expected` members (this node included) are heard;
   * `waitingMs`: how long the members heard have yet to send after our message reached them, or,
   * none heard, how long the join wait has left (an estimate: the next round).
   */
  starting?: { heard: number; expected: number; waitingMs: number };
  /** A key placed on its owner (docs/owner.md): the member that owns it in this node's view. */
  owner?: string;
}

/** The outcome of one check. Being limited is a value, never a throw. */
export interface Decision {
  /** Whether the caller should serve the request (true in shadow mode even when limited). */
  allowed: boolean;
  /** Whether the limit was reached (in shadow mode the request is still allowed). */
  limited: boolean;
  /** The policy that decided: the first that refused, else the one with the least remaining. */
  policy: string;
  /** The key that decided. */
  key: string;
  rule: DecisionRule;
  mode: DecisionMode;
  /** The deciding policy's limit. */
  limit: number;
  /** Cells left for the deciding key after this decision (never negative). */
  remaining: number;
  /** When denied: ms until a request of this cost may be admitted; 0 when allowed; -1 when never. */
  retryAfterMs: number;
  /** ms until the deciding key's window has room for a full limit again. */
  resetMs: number;
  /** leaky-bucket only: ms the caller should wait before proceeding; 0 otherwise. */
  delayMs: number;
  /** True when the deciding policy is in shadow mode. */
  shadow: boolean;
  /** Keys placed on an owner (docs/owner.md): who owns the deciding key, and how it was decided. */
  owner?: OwnerInfo;
}

/** How a key placed on an owner was decided (Decision.owner). */
export interface OwnerInfo {
  /** The member that owns the key in this node's view. */
  id: string;
  /**
   * `owner`: decided here, this node being the owner, exactly (its window against L);
   * `asked`: the owner's answer, over the authenticated link to it;
   * `local`: decided here by the local rule (this node is the owner and the ownership is still
   * settling, or the owner could not be asked: see `reason`).
   */
  decidedBy: 'owner' | 'asked' | 'local';
  /**
   * Why `local`: `settling` (this node owns the key since less than a hold period: a previous
   * owner's last admissions may not have reached it), `shared` (this node owns the key and a
   * peer reported demand for it within a window: that peer decides it by the local rule, so
   * the owner shares the headroom by the same rule), `full` (the key is owned elsewhere and the
   * counts this node holds that are certainly inside the window already fill L: denied here
   * without asking, as the owner and an exact limiter would deny it), `sync-check` (a synchronous check on a key
   * owned elsewhere: use checkAsync), `timeout` (no answer within ownerDeadlineMs), `unreachable`
   * (no link to the owner, or it failed), `not-owner` (the member asked is not the owner in its
   * own view: the views disagree while the membership changes), `refused` (the owner refused
   * the ask).
   */
  reason?:
    | 'settling'
    | 'shared'
    | 'full'
    | 'sync-check'
    | 'timeout'
    | 'unreachable'
    | 'not-owner'
    | 'refused';
  /** `asked`: the round trip of the ask, ms (this node's clock). */
  rttMs?: number;
}

/** One (policy, key) part of a multi-policy check, as reported back. */
export interface KeyOutcome {
  policy: string;
  key: string;
  limit: number;
  windowMs: number;
  remaining: number;
  resetMs: number;
  /** When this pair refused: ms until it may admit (-1: never); 0 when it allowed. */
  retryAfterMs: number;
  limited: boolean;
  shadow: boolean;
}

/** A (policy, key) pair to check. */
export type PolicyKey = readonly [policy: string, key: string];

/**
 * What every ratemesh limiter offers (a purely local one and a mesh one alike).
 * `check` is synchronous: no network on the hot path. A request spends only if
 * every key allows; a denied request spends nothing on any key. Invalid input
 * (unknown policy, bad key, bad cost) throws a RateMeshError; being limited never throws.
 */
export interface RateLimiter {
  /** Check and, if allowed, spend `cost` (default 1) on every key under one policy. */
  check(policy: string, keys: string | readonly string[], cost?: number): Decision;
  /**
   * Check several (policy, key) pairs as one request; `outcomes` lists every
   * pair. `cost` is one cost for every pair, or a list with one cost per pair
   * where 0 evaluates that pair without spending on it.
   */
  checkAll(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): Decision & { outcomes: KeyOutcome[] };
  /** The validated policy of that name, if configured. */
  policy(name: string): Policy | undefined;
  /** Whether the limiter can decide now (started and not failed). */
  readonly ready: boolean;
  /**
   * {@link check} for keys that may be decided by their owner on another node (placement
   * `owner`, or `auto` on thin keys; docs/owner.md): asks the owner over the mesh and resolves
   * with its answer, or, past the policy's `ownerDeadlineMs`, with the policy's failure mode.
   * Resolves at once, with no call, for keys decided here. Never rejects on a limit; invalid
   * input rejects with a RateMeshError as `check` throws. Absent on limiters without owners.
   */
  checkAsync?(policy: string, keys: string | readonly string[], cost?: number): Promise<Decision>;
  /**
   * For the HTTP middleware, the daemon and the Envoy RLS: the decision at once (as `check` for
   * one pair, `checkAll` for more) when every key is decided here, else a promise of the owners'
   * answers (as {@link checkAllAsync}). Dense keys so pay no promise.
   */
  checkOrAsk?(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): (Decision & { outcomes?: KeyOutcome[] }) | Promise<Decision & { outcomes: KeyOutcome[] }>;
  /** Whether any of `pairs` is decided now by its owner on another node (owner placement; absent without owners). */
  ownedElsewhere?(pairs: readonly PolicyKey[]): boolean;
  /** {@link checkAll} for pairs whose keys may be decided by their owner (see {@link checkAsync}). */
  checkAllAsync?(
    pairs: readonly PolicyKey[],
    cost?: number | readonly number[],
  ): Promise<Decision & { outcomes: KeyOutcome[] }>;
}

/**
 * Which pairs a counted check spends on, whatever their outcome: `every`, all of them (hits
 * over the limit count, envoyproxy/ratelimit's default); `refused`, when any pair refused (or
 * the caller refused the request itself), the refused pairs only, else every pair (their
 * `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`).
 */
export type CountMode = 'every' | 'refused';

/**
 * A limiter that can count as envoyproxy/ratelimit does (the decision engine, and the mesh
 * limiter through it): {@link RateLimiter.checkAll} with one cost per pair, then the costs
 * spent by {@link CountMode} whatever the decision. A global pair's forced spend stops where
 * the node's own count over the window reaches L (its peers credit an origin with at most what
 * it could have admitted). `allowed` is checkAll's, and false when `over`.
 */
export interface CountingLimiter {
  checkAllCounted(
    pairs: readonly PolicyKey[],
    costs: readonly number[],
    mode: CountMode,
    over?: boolean,
  ): Decision & { outcomes: KeyOutcome[] };
}
