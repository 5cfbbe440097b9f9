/**
 * Discovery's count of other members (issue 28): a round records how many of the addresses it
 * produced are not this node's own, so a new pod knows whether there is a mesh to join (the
 * daemon's /readyz waits for the first sync answer only then). No network: a fake node.
 */
import { type Multiaddr, multiaddr } from '@multiformats/multiaddr';
import { describe, expect, it, vi } from 'vitest';
import { Discovery, parseBootstrap, type Resolver } from '../../src/mesh/discovery.js';
import type { MeshNode } from '../../src/mesh/node.js';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

function fakeNode(ownIp: string, dialed: string[]): MeshNode {
  return {
    peerId: { toString: () => 'self' },
    getMultiaddrs: () => [multiaddr(`/ip4/${ownIp}/tcp/4001`)],
    getConnections: () => [],
    dial: async (addr: Multiaddr) => {
      dialed.push(addr.toString());
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    },
  } as unknown as MeshNode;
}

async function oneRound(resolve: Resolver): Promise<{ d: Discovery; dialed: string[]; told: number[] }> {
  const dialed: string[] = [];
  const told: number[] = [];
  const d = new Discovery(fakeNode('10.0.0.1', dialed), {
    entries: parseBootstrap(['dns:ratemesh-mesh:4001']),
    intervalMs: 60_000,
    dialTimeoutMs: 1000,
    resolve,
    logger: quiet,
    onRound: (others) => told.push(others),
  });
  d.start();
  await vi.waitFor(() => expect(d.stats.rounds).toBeGreaterThanOrEqual(1), { timeout: 5000, interval: 5 });
  await d.stop();
  return { d, dialed, told };
}

describe('Discovery counts the other members each round', () => {
  it('a name resolving to this pod alone: no other member, nothing dialled', async () => {
    const { d, dialed } = await oneRound(async () => ['10.0.0.1']);
    expect(d.stats).toMatchObject({ rounds: 1, lastResolved: 1, lastOthers: 0 });
    expect(dialed).toEqual([]);
  });

  it('a name resolving to every pod of a rolling update: the others counted and dialled', async () => {
    const { d, dialed, told } = await oneRound(async () => ['10.0.0.2', '10.0.0.1', '10.0.0.3', '10.0.0.4']);
    expect(d.stats).toMatchObject({ rounds: 1, lastResolved: 4, lastOthers: 3 });
    // the mesh is told: 1 + 3 members expected (the engine's start-up share, not 1 + the one name)
    expect(told).toEqual([3]);
    expect(dialed.sort()).toEqual([
      '/ip4/10.0.0.2/tcp/4001',
      '/ip4/10.0.0.3/tcp/4001',
      '/ip4/10.0.0.4/tcp/4001',
    ]);
  });

  it('a name that does not resolve yet (a Service with no pod): a round with no other member', async () => {
    const { d } = await oneRound(async () => {
      throw Object.assign(new Error('queryA ENOTFOUND ratemesh-mesh'), { code: 'ENOTFOUND' });
    });
    expect(d.stats).toMatchObject({ rounds: 1, lastResolved: 0, lastOthers: 0, dnsErrors: 1 });
  });
});
