import { afterEach, describe, expect, it } from 'vitest';
import type { MeshLimiter } from '../../src/mesh/types.js';
import type { PolicySpec } from '../../src/types.js';
import { Cluster, dialable, waitFor } from './helpers.js';

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

  it('its successor counts what the pod admitted, passed on by the peers that heard it', async () => {
    const a = await cluster.add({ policies: NAIVE });
    const b = await cluster.add({ policies: NAIVE, bootstrap: [dialable(a)] });
    const c = await cluster.add({ policies: NAIVE, bootstrap: [dialable(a), dialable(b)] });
    const live = (n: MeshLimiter) => n.peers().filter((p) => !p.stale).length;
    await waitFor('every node sees two live peers', () => [a, b, c].every((n) => live(n) === 2));
    // the pod spends 70 of the key, and a and b hold it
    expect(spend(c, 70)).toBe(70);
    await waitFor('a and b hold the 70', () => left(a) === 30 && left(b) === 30);
    await c.stop();
    await waitFor('a and b see the pod stale', () =>
      [a, b].every((n) => n.peers().some((p) => p.id === c.peerId && p.stale)),
    );
    // its successor: a fresh id, the same key's traffic
    const d = await cluster.add({ policies: NAIVE, bootstrap: [dialable(a), dialable(b)] });
    await waitFor('the successor synced the pod gone', () => d.stats().engine.goneSynced > 0);
    // before: 100 left here, and the successor admitted 100 more (170 in the window)
    expect(left(d)).toBe(30);
    expect(d.peers().map((p) => p.id)).not.toContain(c.peerId);
    await waitFor('the successor sees two live peers', () => live(d) === 2);
    expect(spend(d, 100)).toBe(30);
  });
});
