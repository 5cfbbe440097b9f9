import { afterEach, describe, expect, it } from 'vitest';
import { Engine } from '../../src/decision/engine.js';
import type { EngineFactory } from '../../src/mesh/engine-port.js';
import {
  decodeAnswers,
  decodeAsks,
  encodeAnswers,
  encodeAsks,
  MAX_BATCH,
} from '../../src/mesh/owner-service.js';
import type { MeshLimiter, OwnerMeshLimiter } from '../../src/mesh/types.js';
import type { Decision, PolicySpec } from '../../src/types.js';
import { Cluster, deciding, dialable, waitFor } from './helpers.js';

/** A deadline no loaded machine misses: these tests assert outcomes, not latencies. */
const LOGIN: PolicySpec[] = [{ name: 'login', limit: 5, windowMs: 60_000, ownerDeadlineMs: 5_000 }];

/** A key whose owner (in `asker`'s view) is `owner`. */
function keyOwnedBy(asker: OwnerMeshLimiter, owner: MeshLimiter, prefix = 'user'): string {
  // the engine behind the limiter answers remoteOwner through checkAsync's routing: probe with
  // the stats of a look (cost 0) would spend nothing, but the owner id is what we need
  for (let u = 0; u < 10_000; u++) {
    const k = `${prefix}:${u}`;
    if (ownerOf(asker, k) === owner.peerId) return k;
  }
  throw new Error('no key owned by that node');
}

/** The engine of each node, kept by the factory (tests only). */
const engines = new Map<string, Engine>();
const keep: EngineFactory = (init) => {
  const e = new Engine(init);
  engines.set(init.nodeId, e);
  return e;
};
function ownerOf(node: MeshLimiter, key: string): string {
  return engines.get(node.peerId)!.remoteOwner('login', key) ?? node.peerId;
}

describe('live mesh: thin keys decided by their owner over the owner protocol (issue 27)', () => {
  const cluster = new Cluster();
  afterEach(() => cluster.stopAll());

  async function three(
    policies: PolicySpec[] = LOGIN,
    factories: EngineFactory[] = [keep, keep, keep],
    placed = true,
  ): Promise<[OwnerMeshLimiter, OwnerMeshLimiter, OwnerMeshLimiter]> {
    const a = (await cluster.add({ policies, engineFactory: factories[0]! })) as OwnerMeshLimiter;
    const b = (await cluster.add({
      policies,
      bootstrap: [dialable(a)],
      engineFactory: factories[1]!,
    })) as OwnerMeshLimiter;
    const c = (await cluster.add({
      policies,
      bootstrap: [dialable(a), dialable(b)],
      engineFactory: factories[2]!,
    })) as OwnerMeshLimiter;
    const nodes: [OwnerMeshLimiter, OwnerMeshLimiter, OwnerMeshLimiter] = [a, b, c];
    await waitFor('every node sees two live peers', () =>
      nodes.every((n) => n.peers().filter((p) => !p.stale).length === 2 && deciding(n)),
    );
    if (!placed) return nodes;
    // the owners settle a hold period after the view formed (a few gossip intervals)
    await waitFor('the views agree on owners', () => {
      for (let u = 0; u < 20; u++) {
        const k = `probe:${u}`;
        const o = ownerOf(a, k);
        if (ownerOf(b, k) !== o || ownerOf(c, k) !== o) return false;
      }
      return true;
    });
    await new Promise((r) => setTimeout(r, 600));
    return nodes;
  }

  it('a key owned elsewhere is asked over one round trip; 30 concurrent attempts over 3 nodes admit exactly L', async () => {
    const [a, b, c] = await three();
    const key = keyOwnedBy(a, b);
    const first = await a.checkAsync('login', key);
    expect(first.allowed).toBe(true);
    expect(first.owner).toMatchObject({ id: b.peerId, decidedBy: 'asked' });
    expect(first.owner!.rttMs).toBeGreaterThanOrEqual(0);
    // the owner itself decides it alone, with no call
    const own = await b.checkAsync('login', key);
    expect(own.owner).toEqual({ id: b.peerId, decidedBy: 'owner' });
    // an attacker spraying all three nodes at once
    const attempts: Promise<Decision>[] = [];
    for (let i = 0; i < 30; i++) attempts.push([a, b, c][i % 3]!.checkAsync('login', key));
    const out = await Promise.all(attempts);
    expect(out.filter((d) => d.allowed).length).toBe(3);
    expect(out.filter((d) => !d.allowed).every((d) => d.rule === 'global-limit')).toBe(true);
    // the asks of one turn went in batches
    const s = a.stats().owner!;
    expect(s.asks).toBeGreaterThan(s.askFrames);
    expect(s.failed).toEqual({});
    expect(b.stats().owner!.served).toBe(s.answered + c.stats().owner!.answered);
  });

  it('while a policy is placed on owners, every node keeps a link open to each live member before any ask', async () => {
    const nodes = await three();
    await waitFor('links to both peers', () => nodes.every((n) => n.stats().owner!.linksOpened === 2));
    const a = nodes[0];
    const key = keyOwnedBy(a, nodes[1]);
    expect((await a.checkAsync('login', key)).owner!.decidedBy).toBe('asked');
    // the ask went out on the open link
    expect(a.stats().owner!.linksOpened).toBe(2);
    expect(a.stats().owner!.asks).toBe(1);
    // each link's two ends send window updates only once half the window is used: ours to each
    // peer and each peer's to us (no update wakes either side between an ask and its answer)
    await waitFor('both ends of every link tuned', () =>
      nodes.every((n) => n.stats().owner!.lazyWindows === 4),
    );
  });

  it('with no policy placed on owners, no link is opened', async () => {
    const nodes = await three([{ name: 'api', limit: 1_000, windowMs: 1_000 }], undefined, false);
    await new Promise((r) => setTimeout(r, 300));
    for (const n of nodes) expect(n.stats().owner!.linksOpened).toBe(0);
  });

  it('dense keys and keys this node owns make no call', async () => {
    const [a] = await three([LOGIN[0]!, { name: 'api', limit: 1_000, windowMs: 1_000 }]);
    for (let i = 0; i < 50; i++) {
      const d = await a.checkAsync('api', `k${i}`);
      expect(d.owner).toBeUndefined();
    }
    expect(a.stats().owner!.asks).toBe(0);
  });

  it('the owner stopped: its keys are decided again by a new owner, never past L', async () => {
    const [a, b, c] = await three();
    const key = keyOwnedBy(a, b);
    expect((await a.checkAsync('login', key)).owner!.decidedBy).toBe('asked');
    expect((await c.checkAsync('login', key)).allowed).toBe(true);
    await b.stop();
    const admitted: Decision[] = [];
    const deadline = Date.now() + 3_000;
    let exactAgain = false;
    while (Date.now() < deadline) {
      for (const n of [a, c]) {
        const d = await n.checkAsync('login', key);
        if (d.allowed) admitted.push(d);
        if (d.owner?.id !== b.peerId && d.owner?.reason === undefined) exactAgain = true;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    // 2 before the stop, at most 3 after: never past L
    expect(admitted.length).toBeLessThanOrEqual(3);
    expect(exactAgain).toBe(true);
    expect(ownerOf(a, key)).not.toBe(b.peerId);
  });

  it('an owner that does not answer within ownerDeadlineMs: the policy fails closed, counted', async () => {
    const slow: EngineFactory = (init) => {
      const e = keep(init) as Engine;
      const answer = e.answerAsk.bind(e);
      e.answerAsk = (from, policy, key, cost, now) => {
        const until = performance.now() + 30;
        while (performance.now() < until);
        return answer(from, policy, key, cost, now);
      };
      return e;
    };
    const policies: PolicySpec[] = [{ ...LOGIN[0]!, failureMode: 'closed', ownerDeadlineMs: 5 }];
    const [a, b] = await three(policies, [keep, slow, keep]);
    const key = keyOwnedBy(a, b);
    const d = await a.checkAsync('login', key);
    expect(d.allowed).toBe(false);
    expect(d.rule).toBe('owner-unreachable');
    expect(d.owner).toMatchObject({ id: b.peerId, decidedBy: 'local', reason: 'timeout' });
    expect(a.stats().owner!.failed.timeout).toBe(1);
    expect(a.stats().owner!.engine!.failedClosed).toBe(1);
  });
});

describe('owner protocol frames: every input from a peer is hostile', () => {
  const enc = new TextEncoder();
  const body = (frame: Uint8Array): Uint8Array =>
    frame.subarray(frame[0]! < 0x80 ? 1 : frame[1]! < 0x80 ? 2 : 3);

  it('asks and answers round-trip', () => {
    const asks = [
      { id: 1, policy: enc.encode('login'), key: enc.encode('user:ä'), cost: 1 },
      { id: 300, policy: enc.encode('login'), key: enc.encode('k'), cost: 0 },
    ];
    expect(decodeAsks(body(encodeAsks(asks)))).toEqual([
      { id: 1, policy: 'login', key: 'user:ä', cost: 1 },
      { id: 300, policy: 'login', key: 'k', cost: 0 },
    ]);
    const answers = [
      { id: 1, limited: false, rule: 'allow' as const, remaining: 4, retryAfterMs: 0, resetMs: 60_000 },
      {
        id: 2,
        limited: true,
        rule: 'global-limit' as const,
        remaining: 0,
        retryAfterMs: -1,
        resetMs: 5,
        reason: 'settling' as const,
      },
      { id: 3, refused: 'not-owner' },
    ];
    expect(decodeAnswers(body(encodeAnswers(answers)))).toEqual(answers);
  });

  it('refuses malformed frames whole', () => {
    const good = body(encodeAsks([{ id: 1, policy: enc.encode('login'), key: enc.encode('k'), cost: 1 }]));
    expect(decodeAsks(good.subarray(0, good.length - 1))).toBeUndefined(); // truncated
    expect(decodeAsks(new Uint8Array([...good, 0]))).toBeUndefined(); // trailing bytes
    expect(decodeAsks(new Uint8Array([2, ...good.subarray(1)]))).toBeUndefined(); // wrong type
    expect(decodeAsks(new Uint8Array([1, 0]))).toBeUndefined(); // empty batch
    const dup = encodeAsks([
      { id: 7, policy: enc.encode('p'), key: enc.encode('k'), cost: 1 },
      { id: 7, policy: enc.encode('p'), key: enc.encode('k'), cost: 1 },
    ]);
    expect(decodeAsks(body(dup))).toBeUndefined(); // one id twice
    const long = encodeAsks([{ id: 1, policy: enc.encode('p'), key: enc.encode('k'.repeat(513)), cost: 1 }]);
    expect(decodeAsks(body(long))).toBeUndefined(); // key over 512 bytes
    const badUtf8 = encodeAsks([
      { id: 1, policy: enc.encode('p'), key: new Uint8Array([0xff, 0xfe]), cost: 1 },
    ]);
    expect(decodeAsks(body(badUtf8))).toBeUndefined();
    const many = Array.from({ length: MAX_BATCH + 1 }, (_, i) => ({
      id: i,
      policy: enc.encode('p'),
      key: enc.encode('k'),
      cost: 1,
    }));
    expect(decodeAsks(body(encodeAsks(many)))).toBeUndefined(); // over the batch cap
    // an answer that says admitted under a limiting rule
    const lie = body(
      encodeAnswers([
        { id: 1, limited: false, rule: 'global-limit', remaining: 0, retryAfterMs: 0, resetMs: 0 },
      ]),
    );
    expect(decodeAnswers(lie)).toBeUndefined();
    expect(decodeAnswers(new Uint8Array([2, 1, 1, 9]))).toBeUndefined(); // unknown status
  });
});
