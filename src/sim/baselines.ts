import type { Trace } from './trace.js';

/**
 * The seed's three baselines (shared/seeds/000), ported exactly: GCRA in
 * integer nanoseconds, a central store, a static L/N split and leases of 20
 * tokens with a 50 ms TTL and a 5 ms back-off.
 */

const MS = 1_000_000;

interface Limit {
  t: number;
  b: number;
}

class Gcra {
  tat = 0;
  grant(n: number, now: number, l: Limit): number {
    const base = Math.max(this.tat, now);
    const room = Math.floor(Math.max(0, l.b * l.t - (base - now)) / l.t);
    const g = Math.min(n, room);
    this.tat = base + g * l.t;
    return g;
  }
}

class Central {
  private readonly gcra = new Gcra();
  calls = 0;
  take(n: number, now: number, l: Limit): number {
    this.calls++;
    return this.gcra.grant(n, now, l);
  }
}

export interface BaselineResult {
  design: 'central' | 'static' | 'lease';
  /** Arrival times (ms) of admitted requests. */
  admitted: number[];
  calls: number;
}

/** The most a GCRA of `burst` and 1 cell per `periodMs` can admit by the trace's last arrival. */
export function gcraBound(trace: Trace, periodMs = 1, burst = 96): number {
  const end = Math.round(trace.t[trace.t.length - 1]! * MS);
  return burst + Math.floor(end / (periodMs * MS));
}

/** Run the seed's three designs on the trace (1,000/s, burst 96, 8 nodes). */
export function runBaselines(trace: Trace, nodes = 8): BaselineResult[] {
  const lim: Limit = { t: MS, b: 96 };
  const split: Limit = { t: lim.t * nodes, b: Math.floor(lim.b / nodes) };
  const out: BaselineResult[] = [];
  for (const design of ['central', 'static', 'lease'] as const) {
    const c = new Central();
    const stat = Array.from({ length: nodes }, () => new Gcra());
    const lease = Array.from({ length: nodes }, () => ({ tokens: 0, exp: 0, blockedUntil: 0 }));
    const admitted: number[] = [];
    for (let i = 0; i < trace.t.length; i++) {
      const now = Math.round(trace.t[i]! * MS);
      const node = trace.node[i]!;
      let ok: boolean;
      if (design === 'central') ok = c.take(1, now, lim) === 1;
      else if (design === 'static') ok = stat[node]!.grant(1, now, split) === 1;
      else {
        const l = lease[node]!;
        if (now >= l.exp) l.tokens = 0;
        if (l.tokens === 0 && now >= l.blockedUntil) {
          const g = c.take(20, now, lim);
          if (g > 0) {
            l.tokens = g;
            l.exp = now + 50 * MS;
          } else l.blockedUntil = now + 5 * MS;
        }
        if (l.tokens > 0) {
          l.tokens--;
          ok = true;
        } else ok = false;
      }
      if (ok) admitted.push(trace.t[i]!);
    }
    out.push({ design, admitted, calls: c.calls });
  }
  return out;
}
