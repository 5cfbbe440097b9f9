import { describe, expect, it } from 'vitest';
import { createMeshLimiter } from '../../src/mesh/index.js';
import type { PolicySpec } from '../../src/types.js';
import { deciding, dialable, LOOPBACK, MemoryLogger, sleep, waitFor } from './helpers.js';

const POLICIES: PolicySpec[] = [{ name: 'api', limit: 100, windowMs: 1_000 }];

/** Active handles and requests (sockets, servers, timers, immediates) by type. */
function resources(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) out[r] = (out[r] ?? 0) + 1;
  return out;
}

describe('stop()', () => {
  it('leaves no sockets, servers, timers or immediates behind', async () => {
    // Let anything left from module loading settle before taking the baseline.
    await sleep(50);
    const before = resources();
    const opts = {
      policies: POLICIES,
      listen: LOOPBACK,
      gossipIntervalMs: 20,
      heartbeatMs: 100,
      discoveryIntervalMs: 100,
      logger: new MemoryLogger(),
    };
    const a = createMeshLimiter({ ...opts, injectDelayMs: 30 });
    await a.start();
    const b = createMeshLimiter({ ...opts, bootstrap: [dialable(a), 'dns:localhost:1'] });
    await b.start();
    const c = createMeshLimiter({ ...opts, bootstrap: [dialable(a)] });
    await c.start();
    for (let i = 0; i < 50; i++) b.check('api', `k${i % 5}`);
    await waitFor('gossip and sync flowed', () => {
      const s = a.stats();
      return s.gossip.msgsIn > 10 && s.sync.pullsOk >= 2 && s.injected.delayed > 10;
    });
    const during = resources();
    expect(during.TCPSocketWrap ?? 0).toBeGreaterThan(before.TCPSocketWrap ?? 0);
    await Promise.all([a.stop(), b.stop(), c.stop()]);
    await a.stop(); // idempotent
    const baseline = JSON.stringify(before);
    const settled = (): boolean => {
      const now = resources();
      return Object.entries(now).every(([type, n]) => n <= (before[type] ?? 0));
    };
    await waitFor(`resources back to at most ${baseline}`, settled, 5_000, 20).catch((err: Error) => {
      throw new Error(`${err.message}; now ${JSON.stringify(resources())}`);
    });
    expect(a.ready).toBe(false);
    expect(a.multiaddrs()).toEqual([]);
    // Deciding still works on the local view after stop.
    expect(typeof b.check('api', 'k0').allowed).toBe('boolean');
  });

  it('start after stop rejoins with the same identity', async () => {
    const opts = { policies: POLICIES, listen: LOOPBACK, logger: new MemoryLogger(), gossipIntervalMs: 20 };
    const a = createMeshLimiter(opts);
    await a.start();
    const b = createMeshLimiter({ ...opts, bootstrap: [dialable(a)] });
    await b.start();
    await waitFor('b hears a', () => b.stats().gossip.msgsIn > 0);
    await b.stop();
    await b.start();
    const id = b.peerId;
    const before = a.stats().sync.served;
    await waitFor(
      'b resyncs after restart and a has heard it',
      () => a.stats().sync.served > before && b.stats().running && deciding(b),
    );
    expect(b.peerId).toBe(id);
    // its farewell taken back: b decides again, and a counts it a member again
    expect(b.check('api', 'k').allowed).toBe(true);
    await waitFor('a counts b a member again', () => a.stats().engine.members === 2);
    await Promise.all([a.stop(), b.stop()]);
  });
});
