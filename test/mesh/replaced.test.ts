import { afterEach, describe, expect, it } from 'vitest';
import { isolateForTests } from '../../src/mesh/mesh-limiter.js';
import type { MeshLimiter } from '../../src/mesh/types.js';
import type { PolicySpec } from '../../src/types.js';
import { Cluster, deciding, dialable, waitFor } from './helpers.js';

/** A long window so nothing ages out while the test runs; naive so the sums are exact. */
const NAIVE: PolicySpec[] = [{ name: 'api', limit: 100, windowMs: 60_000, overAdmission: 'naive' }];

function spend(node: MeshLimiter, n: number, key = 'k'): number {
  let allowed = 0;
  for (let i = 0; i < n; i++) if (node.check('api', key).allowed) allowed++;
  return allowed;
}

/** What is left of the key's limit at `node`, looked at without spending. */
function left(node: MeshLimiter, key = 'k'): number {
  return node.checkAll([['api', key]], [0]).outcomes[0]!.remaining;
}

describe('live mesh: a pod replaced with a fresh id', () => {
  const cluster = new Cluster();
  afterEach(() => cluster.stopAll());

  /** Three nodes; c spends 70 of the key and a and b hold it. */
  async function threeWithSpent(): Promise<[MeshLimiter, MeshLimiter, MeshLimiter]> {
    const a = await cluster.add({ policies: NAIVE });
    const b = await cluster.add({ policies: NAIVE, bootstrap: [dialable(a)] });
    const c = await cluster.add({ policies: NAIVE, bootstrap: [dialable(a), dialable(b)] });
    const live = (n: MeshLimiter) => n.peers().filter((p) => !p.stale).length;
    await waitFor('every node sees two live peers', () =>
      [a, b, c].every((n) => live(n) === 2 && deciding(n)),
    );
    expect(spend(c, 70)).toBe(70);
    await waitFor('a and b hold the 70', () => left(a) === 30 && left(b) === 30);
    return [a, b, c];
  }

  /** Its successor, a fresh id: it must see the 70 and be allowed the 30 left. */
  async function successorGets30(a: MeshLimiter, b: MeshLimiter, gone: string): Promise<void> {
    const d = await cluster.add({ policies: NAIVE, bootstrap: [dialable(a), dialable(b)] });
    await waitFor('the successor synced the pod gone', () => d.stats().engine.goneSynced > 0 && deciding(d));
    // before sync answers carried members gone: 100 left here, and 100 more admitted (170 in the window)
    expect(left(d)).toBe(30);
    expect(d.peers().map((p) => p.id)).not.toContain(gone);
    await waitFor(
      'the successor sees two live peers',
      () => d.peers().filter((p) => !p.stale).length === 2 && deciding(d),
    );
    expect(spend(d, 100)).toBe(30);
  }

  it('a graceful stop: the peers count the pod departed at once by its farewell, and its successor counts what it admitted', async () => {
    const [a, b, c] = await threeWithSpent();
    await c.stop();
    // no stale period (a share of L kept for it): its farewell is merged and it is no member
    await waitFor('a and b merged the farewell', () =>
      [a, b].every((n) => n.stats().engine.peersLeft === 1 && !n.peers().some((p) => p.id === c.peerId)),
    ).catch((err: unknown) => {
      // what each side saw (a farewell not handed over in time is counted as dropped)
      const seen = [a, b].map((n) => ({ left: n.stats().engine.peersLeft, peers: n.peers() }));
      throw new Error(
        `${String(err)}; c dropped ${JSON.stringify(c.stats().dropped)}; ${JSON.stringify(seen)}`,
      );
    });
    for (const n of [a, b]) {
      expect(n.stats().engine.members).toBe(2);
      expect(left(n)).toBe(30);
    }
    // a stopped limiter decides no global policy: its peers keep no share for it
    const after = c.check('api', 'k');
    expect(after.allowed).toBe(false);
    expect(after.retryAfterMs).toBe(-1);
    await successorGets30(a, b, c.peerId);
  });

  it('a farewell reaches a member the pod had no link to: it is relayed (a partial mesh)', async () => {
    // s, a, x linked to each other; r to s only: r hears x through s
    const s = await cluster.add({ policies: NAIVE });
    const a = await cluster.add({ policies: NAIVE, bootstrap: [dialable(s)] });
    const x = await cluster.add({ policies: NAIVE, bootstrap: [dialable(s), dialable(a)] });
    const r = await cluster.add({ policies: NAIVE, bootstrap: [dialable(s)] });
    await waitFor('every node sees three live peers', () =>
      [s, a, x, r].every((n) => n.peers().filter((p) => !p.stale).length === 3),
    );
    expect(r.peers().find((p) => p.id === x.peerId)?.addrs ?? []).toEqual([]);
    await x.stop();
    // the first version: s and a departed x, r kept it (stale, then departed): relayed by nobody
    await waitFor('every node merged the farewell', () =>
      [s, a, r].every((n) => n.stats().engine.peersLeft === 1 && n.stats().engine.members === 3),
    );
  });

  it('killed (no farewell): the peers see the pod stale, and its successor counts what it admitted', async () => {
    const [a, b, c] = await threeWithSpent();
    // silent from now on, as a process killed: its stop sends nothing
    isolateForTests(c, true);
    await c.stop();
    await waitFor('a and b see the pod stale', () =>
      [a, b].every((n) => n.peers().some((p) => p.id === c.peerId && p.stale)),
    );
    for (const n of [a, b]) expect(n.stats().engine.peersLeft).toBe(0);
    await successorGets30(a, b, c.peerId);
  });

  it('a farewell the links do not take within 1 s, or whose publish fails, is counted, and the stop still ends', async () => {
    const [, , c] = await threeWithSpent();
    // the node's publish, replaced (the libp2p node is private to the limiter)
    type WithNode = { node: { services: { pubsub: { publish: () => Promise<unknown> } } } };
    const pubsubOf = (m: MeshLimiter) => (m as unknown as WithNode).node.services.pubsub;
    // a publish that never settles: the stop waits 1 s for it, no longer
    pubsubOf(c).publish = () => new Promise(() => undefined);
    const t0 = Date.now();
    await c.stop();
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(c.stats().dropped['farewell-timeout']).toBe(1);
    expect(c.stats().dropped['farewell-failed']).toBeUndefined();
    // started again (the farewell taken back), then a publish that fails at once
    await c.start();
    pubsubOf(c).publish = () => Promise.reject(new Error('no links'));
    await c.stop();
    expect(c.stats().dropped['farewell-failed']).toBe(1);
  });
});
