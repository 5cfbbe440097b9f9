import { afterAll, describe, expect, it } from 'vitest';
import { Engine } from '../../src/decision/engine.js';
import {
  AUTO_RELAY_FANOUT,
  autoRelayFanout,
  autoRelayStopMembers,
  defaultAutoRelayMembers,
} from '../../src/mesh/auto-relay.js';
import type { EngineInit } from '../../src/mesh/engine-port.js';
import { parseOptions } from '../../src/mesh/options.js';
import type { MeshLimiter } from '../../src/mesh/types.js';
import { Cluster, deciding, dialable, waitFor } from './helpers.js';

const POLICY = { name: 'api', limit: 10_000, windowMs: 60_000 };

describe("relayFanout 'auto': the rule and the option", () => {
  it('broadcasts up to 1 + g members, relays above, broadcasts again at 3/4', () => {
    const t = defaultAutoRelayMembers(100);
    expect(t).toBe(101);
    expect(defaultAutoRelayMembers(50)).toBe(51);
    for (const n of [2, 8, 32, 64, 101]) expect(autoRelayFanout(n, t, false)).toBe(0);
    for (const n of [102, 256, 1024]) expect(autoRelayFanout(n, t, false)).toBe(AUTO_RELAY_FANOUT);
    // relaying: kept down to 3/4 of the threshold, then broadcast
    expect(autoRelayStopMembers(t)).toBe(75);
    expect(autoRelayFanout(76, t, true)).toBe(AUTO_RELAY_FANOUT);
    expect(autoRelayFanout(75, t, true)).toBe(0);
    // fanout 4 at g = 100 ms: 40 messages in per node a second, under the 50 of issue 26
    expect((AUTO_RELAY_FANOUT * 1000) / 100).toBeLessThanOrEqual(50);
  });

  it('defaults to auto, starts from the bootstrap entries, and refuses bad values', () => {
    const base = { policies: [POLICY], listen: ['/ip4/127.0.0.1/tcp/0'] };
    const d = parseOptions(base);
    expect([d.relayAuto, d.relayFanout, d.relayHops, d.dialPeers, d.autoRelayMembers]).toEqual([
      true,
      0,
      0,
      0,
      101,
    ]);
    expect(parseOptions({ ...base, relayFanout: 'auto', gossipIntervalMs: 50 }).autoRelayMembers).toBe(51);
    // forced: 0 broadcasts, a number relays, as before
    const off = parseOptions({ ...base, relayFanout: 0 });
    expect([off.relayAuto, off.relayFanout, off.relayHops]).toEqual([false, 0, 0]);
    const on = parseOptions({ ...base, relayFanout: 3 });
    expect([on.relayAuto, on.relayFanout, on.dialPeers]).toEqual([false, 3, 6]);
    expect(on.relayHops).toBeGreaterThanOrEqual(1);
    // a bootstrap list longer than the threshold starts relaying (the hops from its size), dialling every entry
    const bootstrap = Array.from({ length: 5 }, (_, i) => `/ip4/127.0.0.1/tcp/${4000 + i}`);
    const big = parseOptions({ ...base, bootstrap, autoRelayMembers: 4 });
    expect([big.relayAuto, big.relayFanout, big.dialPeers]).toEqual([true, AUTO_RELAY_FANOUT, 0]);
    expect(big.relayHops).toBe(2); // expectedRelayHops(6, 4)
    expect(parseOptions({ ...base, bootstrap, autoRelayMembers: 4, relayHops: 3 }).relayHops).toBe(3);
    expect(parseOptions({ ...base, bootstrap, autoRelayMembers: 6 }).relayFanout).toBe(0);
    for (const bad of ['always', -1, 1.5, 17, null, true])
      expect(() => parseOptions({ ...base, relayFanout: bad as never })).toThrow(
        /relayFanout: must be 'auto' or an integer in 0\.\.16/,
      );
    expect(() => parseOptions({ ...base, relayFanout: 'always' as never })).toThrow(
      /must be 'auto' or an integer in 0\.\.16/,
    );
    for (const bad of [1, 2.5, '10', 0])
      expect(() => parseOptions({ ...base, autoRelayMembers: bad as never })).toThrow(/autoRelayMembers/);
    expect(() => parseOptions({ ...base, relayFanout: 3, autoRelayMembers: 10 })).toThrow(
      /autoRelayMembers.*'auto' only/,
    );
    expect(() => parseOptions({ ...base, relayFanout: 3, relayHops: 0 })).toThrow(/relayHops/);
    expect(parseOptions({ ...base, relayHops: 0 }).relayHops).toBe(0);
  });
});

describe("relayFanout 'auto' (live, loopback): a mesh that grows past the threshold relays, one that shrinks broadcasts again", () => {
  const cluster = new Cluster();
  afterAll(() => cluster.stopAll());

  it('5 nodes, autoRelayMembers 4: every origin counted before, across and after each switch', async () => {
    // the engine each node runs now (a switch builds a new one)
    const latest = new Map<string, Engine>();
    const builds = new Map<string, number[]>();
    const nodes: MeshLimiter[] = [];
    const add = async (i: number) => {
      const node = await cluster.add({
        policies: [POLICY],
        autoRelayMembers: 4,
        // a full mesh: each node lists every node before it
        bootstrap: nodes.map((n) => dialable(n)),
        engineFactory: (init) => {
          const e = new Engine(init);
          if (!init.nodeId.startsWith('warm-')) {
            latest.set(init.nodeId, e);
            builds.set(init.nodeId, [...(builds.get(init.nodeId) ?? []), init.relayHops ?? 0]);
          }
          return e;
        },
      });
      nodes[i] = node;
      return node;
    };
    const estimate = (n: MeshLimiter) => Math.round(latest.get(n.peerId)!.estimate('api', 'k'));
    const waitCounts = (what: string, ns: MeshLimiter[], total: number) =>
      waitFor(what, () => ns.every((n) => estimate(n) === total), 20_000).catch((err) => {
        throw new Error(`${(err as Error).message}: estimates ${ns.map(estimate).join(', ')}`);
      });
    const fanouts = () => nodes.map((n) => n.stats().relay.fanout);

    // 4 nodes: broadcast (4 members is not past 4)
    for (let i = 0; i < 4; i++) await add(i);
    // every member known and every link's state pull answered before anyone admits (an answer
    // that comes after a node's first admissions echoes them: it would count them twice)
    await waitFor('4 nodes see 3 live members', () =>
      nodes.every(
        (n) => n.peers().filter((p) => !p.stale).length === 3 && n.stats().sync.pullsOk >= 3 && deciding(n),
      ),
    );
    nodes.forEach((n, i) => {
      for (let j = 0; j < 10 * (i + 1); j++) expect(n.check('api', 'k')).toMatchObject({ allowed: true });
    });
    await waitCounts('every node counts 100', nodes, 100);
    expect(fanouts()).toEqual([0, 0, 0, 0]);

    // the 5th: 5 members, past 4. It starts relaying (its 4 bootstrap entries say 5 members); the others switch as they hear it
    await add(4);
    await waitFor('all 5 relay', () => fanouts().every((f) => f === AUTO_RELAY_FANOUT), 20_000);
    for (const n of nodes) {
      const s = n.stats();
      expect(s.relay).toMatchObject({ auto: true, fanout: AUTO_RELAY_FANOUT });
      expect(s.relay.relayHops).toBeGreaterThanOrEqual(1);
    }
    // the first four rebuilt their engine once, for relay (hops >= 1); the 5th was built for it
    for (const n of nodes.slice(0, 4)) {
      const b = builds.get(n.peerId)!;
      expect(b[0]).toBe(0);
      expect(b.at(-1)).toBeGreaterThanOrEqual(1);
    }
    expect(builds.get(nodes[4]!.peerId)![0]).toBeGreaterThanOrEqual(1);
    // what was counted before the switch is still counted by every new engine, the 5th's too (sync)
    await waitCounts('every node still counts 100', nodes, 100);
    // the 5th decides once every member has heard it (its start gate)
    await waitFor('all 5 past their start gate', () => nodes.every(deciding), 20_000);
    // and what each admits now reaches all, in relay batches
    nodes.forEach((n, i) => {
      for (let j = 0; j < 5 * (i + 1); j++) expect(n.check('api', 'k')).toMatchObject({ allowed: true });
    });
    await waitCounts('every node counts 175', nodes, 175);
    for (const n of nodes) {
      const t = n.stats().transport!;
      expect(t.batchesOut).toBeGreaterThan(0);
      expect(t.dropped['bad-signature'] ?? 0).toBe(0);
    }

    // shrink: two stop (a farewell each), 3 members left, at most 3/4 of 4: broadcast again
    await Promise.all([nodes[3]!.stop(), nodes[4]!.stop()]);
    const left = nodes.slice(0, 3);
    await waitFor(
      'the 3 left broadcast again',
      () => left.every((n) => n.stats().relay.fanout === 0 && n.stats().relay.relayHops === 0),
      20_000,
    );
    // built for broadcast, relay, broadcast: one switch each way, no flapping
    for (const n of left) expect(builds.get(n.peerId)).toEqual([0, 1, 0]);
    // the stopped nodes' counts are still in the window, and new counts reach everyone
    await waitCounts('the 3 still count 175', left, 175);
    left.forEach((n) => {
      for (let j = 0; j < 10; j++) expect(n.check('api', 'k')).toMatchObject({ allowed: true });
    });
    await waitCounts('the 3 count 205', left, 205);
    for (const n of left) expect(n.stats().relay.switches).toBe(2);
  }, 90_000);
});

describe("mixed modes (live, loopback): broadcasting and relaying members deliver each other's counts", () => {
  const cluster = new Cluster();
  afterAll(() => cluster.stopAll());

  it('a line A - R - B, R relaying, A and B broadcasting: A and B hear each other only through R', async () => {
    const engines = new Map<string, Engine>();
    const factory = (init: EngineInit) => {
      const e = new Engine(init);
      if (!init.nodeId.startsWith('warm-')) engines.set(init.nodeId, e);
      return e;
    };
    const a = await cluster.add({ policies: [POLICY], relayFanout: 0, engineFactory: factory });
    const r = await cluster.add({
      policies: [POLICY],
      relayFanout: 2,
      bootstrap: [dialable(a)],
      engineFactory: factory,
    });
    const b = await cluster.add({
      policies: [POLICY],
      relayFanout: 0,
      bootstrap: [dialable(r)],
      engineFactory: factory,
    });
    const nodes = [a, r, b];
    await waitFor('every node sees 2 live members', () =>
      nodes.every(
        (n) => n.peers().filter((p) => !p.stale).length === 2 && n.stats().sync.pullsOk >= 1 && deciding(n),
      ),
    );
    for (let j = 0; j < 7; j++) expect(a.check('api', 'k').allowed).toBe(true);
    for (let j = 0; j < 11; j++) expect(b.check('api', 'k').allowed).toBe(true);
    for (let j = 0; j < 13; j++) expect(r.check('api', 'k').allowed).toBe(true);
    await waitFor(
      'every node counts 31',
      () => nodes.every((n) => Math.round(engines.get(n.peerId)!.estimate('api', 'k')) === 31),
      20_000,
    );
    // A and B are not connected: their messages went signed (R said it relays) and R forwarded them
    expect(a.stats().peers.connected).toBe(1);
    expect(b.stats().peers.connected).toBe(1);
    expect(a.stats().transport!.signedOut).toBeGreaterThan(0);
    expect(r.stats().transport!.itemsOut).toBeGreaterThan(r.stats().transport!.batchesOut);
  }, 60_000);

  it("a line R1 - A - R2, A broadcasting: A forwards the relays' items in batches of its own", async () => {
    const engines = new Map<string, Engine>();
    const factory = (init: EngineInit) => {
      const e = new Engine(init);
      if (!init.nodeId.startsWith('warm-')) engines.set(init.nodeId, e);
      return e;
    };
    const r1 = await cluster.add({ policies: [POLICY], relayFanout: 2, engineFactory: factory });
    const a = await cluster.add({
      policies: [POLICY],
      relayFanout: 0,
      bootstrap: [dialable(r1)],
      engineFactory: factory,
    });
    const r2 = await cluster.add({
      policies: [POLICY],
      relayFanout: 2,
      bootstrap: [dialable(a)],
      dialPeers: 1,
      engineFactory: factory,
    });
    const nodes = [r1, a, r2];
    await waitFor('every node sees 2 live members', () =>
      nodes.every(
        (n) => n.peers().filter((p) => !p.stale).length === 2 && n.stats().sync.pullsOk >= 1 && deciding(n),
      ),
    );
    for (let j = 0; j < 7; j++) expect(r1.check('api', 'k').allowed).toBe(true);
    for (let j = 0; j < 11; j++) expect(r2.check('api', 'k').allowed).toBe(true);
    for (let j = 0; j < 13; j++) expect(a.check('api', 'k').allowed).toBe(true);
    await waitFor(
      'every node counts 31',
      () => nodes.every((n) => Math.round(engines.get(n.peerId)!.estimate('api', 'k')) === 31),
      20_000,
    );
    const t = a.stats().transport!;
    expect(a.stats().relay.fanout).toBe(0);
    // no relayed frames one per peer: batches (the relays' items), its own messages signed
    expect(t.batchesOut).toBeGreaterThan(0);
    expect(t.relayedOut).toBe(0);
    expect(t.signedOut).toBeGreaterThan(0);
  }, 60_000);
});
