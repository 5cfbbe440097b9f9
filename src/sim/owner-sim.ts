import type { Decision } from '../types.js';
import { type Cut, type SimOptions, Simulator } from './simulator.js';

/** The default ownerDeadlineMs of a policy (policy/compile.ts). */
const DEFAULT_OWNER_DEADLINE_MS = 50;

/** One request's outcome on a simulated mesh with owner placement. */
export interface AskOutcome {
  decision: Decision;
  /** The node the request arrived at. */
  node: number;
  /** When it arrived (ms since start). */
  sentAt: number;
  /** When it was decided and spent (ms since start): at the owner for an ask, here otherwise. */
  decidedAt: number;
  /** When the answer was back at `node` (ms since start): `decidedAt`, or later by the way back. */
  answeredAt: number;
  /** Calls to other nodes it took (0 or 1). */
  calls: number;
}

/**
 * A simulated mesh whose nodes ask a key's owner as the live mesh does (src/mesh/owner-service.ts):
 * a request for a key another node owns (Engine.remoteOwner) travels to it with the link delay,
 * the owner decides and spends (Engine.answerAsk), and the answer comes back with the delay.
 * An ask not answered within the policy's ownerDeadlineMs (the link is cut, the owner killed, or
 * two delays are longer) is decided by the asker without it (Engine.decideWithoutOwner: the
 * policy's failure mode). A killed node is cut off for good: it sends and receives nothing.
 * Every other request is decided where it arrives, at once, with no call.
 */
export class OwnerSim {
  readonly sim: Simulator;
  private readonly cuts: Cut[];
  private readonly dead = new Set<number>();
  /** Asks sent, answered in time, and decided without their owner (by reason). */
  asks = 0;
  answered = 0;
  readonly fallbacks: Record<string, number> = {};

  constructor(opts: SimOptions) {
    this.cuts = [...(opts.cuts ?? [])];
    this.sim = new Simulator({ ...opts, cuts: this.cuts });
    for (const e of this.sim.engines) e.enableOwnerPlacement();
  }

  get now(): number {
    return this.sim.now;
  }

  /** Kill node `node` now (kill -9): it sends and receives nothing from now on. */
  kill(node: number): void {
    this.dead.add(node);
    this.cuts.push({ node, fromMs: this.sim.now, toMs: Number.POSITIVE_INFINITY });
  }

  /** Replace node `node` by a fresh process (Simulator.replace), owner placement on. */
  replace(node: number, opts: { sync?: boolean; graceful?: boolean } = {}): string {
    const id = this.sim.replace(node, opts);
    this.sim.engines[node]!.enableOwnerPlacement();
    return id;
  }

  isDead(node: number): boolean {
    return this.dead.has(node);
  }

  /** A request at node `node` now; `done` runs when it is decided (at once, or when the ask ends). */
  request(node: number, policy: string, key: string, cost: number, done: (o: AskOutcome) => void): void {
    const sim = this.sim;
    const t = sim.now;
    if (this.dead.has(node)) throw new Error(`node ${node} was killed`);
    const e = sim.engines[node]!;
    const owner = e.remoteOwner(policy, key, undefined, cost);
    if (owner === undefined) {
      const d = sim.request(node, policy, key, cost);
      done({ decision: d, node, sentAt: t, decidedAt: t, answeredAt: t, calls: 0 });
      return;
    }
    const o = sim.ids.indexOf(owner);
    const deadline = e.policy(policy)?.ownerDeadlineMs ?? DEFAULT_OWNER_DEADLINE_MS;
    const d = sim.opts.delayMs;
    this.asks++;
    let settled = false;
    const fallback = (reason: 'timeout' | 'unreachable' | 'not-owner' | 'refused'): void => {
      if (settled) return;
      settled = true;
      this.fallbacks[reason] = (this.fallbacks[reason] ?? 0) + 1;
      const now = sim.now;
      const dec = sim.engines[node]!.decideWithoutOwner(policy, key, cost, reason);
      sim.publishIfEarly(node);
      done({ decision: dec, node, sentAt: t, decidedAt: now, answeredAt: now, calls: 1 });
    };
    if (o < 0) {
      fallback('unreachable');
      return;
    }
    const target = sim.engines[o]!;
    sim.at(t + deadline, () => fallback('timeout'));
    if (sim.isCut(node, t) || sim.isCut(o, t)) return;
    sim.at(t + d, () => {
      // the owner killed, cut off, or replaced meanwhile: no answer
      if (sim.isCut(o, t + d) || sim.engines[o] !== target) return;
      const ans = target.answerAsk(sim.ids[node]!, policy, key, cost);
      sim.publishIfEarly(o);
      const decidedAt = sim.now;
      sim.at(t + 2 * d, () => {
        if (settled || sim.isCut(node, t + 2 * d)) return;
        if ('refused' in ans) {
          fallback(ans.refused === 'not-owner' ? 'not-owner' : 'refused');
          return;
        }
        settled = true;
        this.answered++;
        const reason = ans.owner?.reason === 'settling' ? { reason: 'settling' as const } : {};
        ans.owner = { id: owner, decidedBy: 'asked', ...reason, rttMs: 2 * d };
        done({ decision: ans, node, sentAt: t, decidedAt, answeredAt: sim.now, calls: 1 });
      });
    });
  }
}
