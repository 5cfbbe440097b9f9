/**
 * Operator clarity (issue 28): a psk mismatch, a failed dial, a port in use, a peer on another
 * ratemesh version and a forwarded header with trustProxy off each give one warn line (not
 * one per attempt) and, where the node runs, a counter in stats() and /metrics.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKey } from '@libp2p/pnet';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { isRateMeshError } from '../../src/errors.js';
import { rateMeshGuard } from '../../src/http/index.js';
import { TOPIC } from '../../src/mesh/constants.js';
import { dialFailureReason } from '../../src/mesh/discovery.js';
import { createMeshLimiter, type EmbeddedMeshLimiter, type MeshStats } from '../../src/mesh/index.js';
import { PeerLinks } from '../../src/mesh/links.js';
import { FakeLimiter, memoryLogger } from '../daemon/fake-limiter.js';

type Line = { level: string; obj: Record<string, unknown>; msg: string };
function recorder() {
  const lines: Line[] = [];
  const at = (level: string) => (obj: object, msg?: string) => {
    lines.push({ level, obj: obj as Record<string, unknown>, msg: msg ?? '' });
  };
  return { lines, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}
const psk = () => {
  const k = new Uint8Array(95);
  generateKey(k);
  return k;
};

const nodes: EmbeddedMeshLimiter[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  for (const c of cleanups.splice(0)) await c();
});

function mesh(opts: { psk?: Uint8Array; bootstrap?: string[]; listen?: string[] }, logger: object) {
  const node = createMeshLimiter({
    policies: [{ name: 'api', limit: 5, windowMs: 1000 }],
    listen: opts.listen ?? ['/ip4/127.0.0.1/tcp/0'],
    bootstrap: opts.bootstrap ?? [],
    discoveryIntervalMs: 100,
    dialTimeoutMs: 2_000,
    logger: logger as never,
    ...(opts.psk === undefined ? {} : { psk: opts.psk }),
  });
  nodes.push(node);
  return node;
}

async function until(cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const tcp = (addr: string) => addr.replace(/\/p2p\/.*/, '');

describe('mesh operator lines', () => {
  it('a psk mismatch: one warn line naming the psk, counted as an encryption failure, however many dials', async () => {
    const a = mesh({ psk: psk() }, recorder().logger);
    await a.start();
    const rec = recorder();
    const b = mesh({ psk: psk(), bootstrap: [tcp(a.multiaddrs()[0]!)] }, rec.logger);
    await b.start();
    await until(() => (b.stats().discovery.dialFailures.encryption ?? 0) >= 3);
    // a mismatched handshake may also hang until dialTimeoutMs (warned apart, once, after 3)
    const warns = rec.lines.filter(
      (l) => l.level === 'warn' && l.msg.includes('ratemesh cannot connect') && l.obj.reason === 'encryption',
    );
    expect(warns).toHaveLength(1);
    expect(warns[0]!.msg).toMatch(/most likely a psk mismatch/);
    const others = rec.lines.filter(
      (l) => l.level === 'warn' && l.msg.includes('ratemesh cannot connect') && l.obj.reason !== 'encryption',
    );
    expect(others.every((l) => l.obj.reason === 'timeout')).toBe(true);
    expect(others.length).toBeLessThanOrEqual(1);
    expect(b.peers()).toHaveLength(0);
  });

  it('a refused dial: one warn line after a few failures in a row (a pod may still be starting), counted', async () => {
    // a port that was just free: nothing listens there
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const rec = recorder();
    const b = mesh({ bootstrap: [`/ip4/127.0.0.1/tcp/${port}`] }, rec.logger);
    await b.start();
    await until(() => (b.stats().discovery.dialFailures.refused ?? 0) >= 5);
    const warns = rec.lines.filter((l) => l.level === 'warn' && l.msg.includes('ratemesh cannot connect'));
    expect(warns).toHaveLength(1);
    expect(warns[0]!.msg).toMatch(/connection refused/);
    expect(warns[0]!.obj).toMatchObject({ reason: 'refused', failures: 3 });
  });

  it('a port in use: the start fails with CONFIG_INVALID naming listen and the address, and one warn line', async () => {
    const a = mesh({}, recorder().logger);
    await a.start();
    const taken = tcp(a.multiaddrs()[0]!);
    const rec = recorder();
    const c = mesh({ listen: [taken] }, rec.logger);
    const err = await c.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isRateMeshError(err)).toBe(true);
    expect((err as Error).message).toBe(
      `listen: ${taken} is already in use (EADDRINUSE): another process, or another ratemesh node, listens there; choose another address or port (tcp/0 picks a free one)`,
    );
    expect((err as Error).message).not.toMatch(/faultTolerance/);
    expect(
      rec.lines.filter((l) => l.level === 'warn' && l.msg.startsWith('ratemesh cannot listen')),
    ).toHaveLength(1);
    expect(c.lifecycle).toBe('stopped');
  });

  it('classifies dial errors', () => {
    expect(
      dialFailureReason(Object.assign(new Error('read ECONNRESET'), { name: 'EncryptionFailedError' })),
    ).toBe('encryption');
    expect(dialFailureReason(new Error('connect ECONNREFUSED 127.0.0.1:9'))).toBe('refused');
    expect(
      dialFailureReason(Object.assign(new Error('The operation was aborted'), { name: 'AbortError' })),
    ).toBe('timeout');
    expect(dialFailureReason(new AggregateError([new Error('connect EHOSTUNREACH')], 'all failed'))).toBe(
      'unreachable',
    );
    expect(dialFailureReason(new Error('timed out after 2000 ms'))).toBe('timeout');
    expect(dialFailureReason('??')).toBe('other');
  });

  it('a peer on another ratemesh version (another topic): one warn line per peer and topic, counted', () => {
    const { lines, logger } = recorder();
    const otherTopics: MeshStats['otherTopics'] = { events: 0, peers: {} };
    const links = new PeerLinks({
      engine: {} as never,
      clock: systemClock,
      logger,
      topic: TOPIC,
      timers: new Set(),
      otherTopics,
      running: () => undefined,
    });
    const subscribed = (id: string, topic: string) =>
      links.onSubscriptionChange(
        new CustomEvent('subscription-change', {
          detail: { peerId: { toString: () => id } as never, subscriptions: [{ topic, subscribe: true }] },
        }),
      );
    subscribed('p9', 'ratemesh/3');
    subscribed('p9', 'ratemesh/3'); // again (a reconnect): counted, not warned again
    subscribed('p9', 'some-other-app'); // not a ratemesh topic: nothing
    subscribed('p8', TOPIC); // ours: nothing to warn of
    const warns = lines.filter((l) => l.level === 'warn');
    expect(warns).toHaveLength(1);
    expect(warns[0]!.msg).toMatch(/another ratemesh topic \(another wire format\)/);
    expect(warns[0]!.obj).toMatchObject({ peer: 'p9', theirTopic: 'ratemesh/3', ourTopic: TOPIC });
    expect(otherTopics).toEqual({ events: 2, peers: { p9: 'ratemesh/3' } });
    subscribed('p7', 'ratemesh/6');
    expect(lines.filter((l) => l.level === 'warn')).toHaveLength(2);
  });
});

describe('daemon metrics for the operator lines', () => {
  it('exposes dial failures by reason, DNS errors and peers on another ratemesh topic', async () => {
    const fake = new FakeLimiter();
    fake.statsValue.discovery = {
      dials: 9,
      dialErrors: 4,
      dialFailures: { encryption: 3, refused: 1 },
      dnsErrors: 2,
      lastResolved: 3,
      rounds: 2,
      lastOthers: 2,
    };
    fake.statsValue.otherTopics = { events: 1, peers: { p9: 'ratemesh/3' } };
    const daemon: Daemon = await startDaemon({
      config: {
        configFile: undefined,
        http: { host: '127.0.0.1', port: 0, maxBodyBytes: 16384, drainTimeoutMs: 1000 },
        mesh: {
          listen: undefined,
          bootstrap: [],
          gossipIntervalMs: undefined,
          expectedDelayMs: undefined,
          keyFile: undefined,
          pskFile: undefined,
          injectDelayMs: undefined,
          injectLoss: undefined,
          privateKey: undefined,
          psk: undefined,
        },
        log: { level: 'silent' },
        stats: { hotKeys: 16 },
        policies: [{ name: 'api', limit: 3, windowMs: 10_000 }],
      },
      logger: memoryLogger(),
      createLimiter: () => fake,
    });
    cleanups.push(() => daemon.stop());
    const text = await (await fetch(`${daemon.http.url}/metrics`)).text();
    for (const line of [
      'ratemesh_dial_failures_total{reason="encryption"} 3',
      'ratemesh_dial_failures_total{reason="refused"} 1',
      'ratemesh_dial_failures_total{reason="timeout"} 0',
      'ratemesh_dns_errors_total 2',
      'ratemesh_peers_other_topic 1',
    ])
      expect(text).toContain(line);
  });
});

describe('trustProxy off behind a proxy', () => {
  async function serve(trustProxy: string[] | undefined) {
    const warns: string[] = [];
    const limiter = mesh({}, recorder().logger);
    await limiter.start();
    const guard = rateMeshGuard({
      limiter,
      policies: [{ policy: 'api', by: 'ip' }],
      logger: { warn: (_o: object, m?: string) => warns.push(m ?? '') },
      ...(trustProxy === undefined ? {} : { trustProxy }),
    });
    const server = http.createServer(async (req, res) => {
      if (await guard(req, res)) res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    });
    return { warns, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` };
  }

  it('warns once when requests carry X-Forwarded-For and no proxy is trusted', async () => {
    const { warns, url } = await serve(undefined);
    await fetch(url);
    expect(warns).toHaveLength(0);
    for (let i = 0; i < 3; i++) await fetch(url, { headers: { 'x-forwarded-for': `203.0.113.${i}` } });
    const proxy = warns.filter((w) => w.includes('trustProxy is off'));
    expect(proxy).toHaveLength(1);
    expect(proxy[0]).toMatch(/x-forwarded-for/);
  });

  it('says nothing when the proxy is trusted', async () => {
    const { warns, url } = await serve(['127.0.0.1/32']);
    await fetch(url, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(warns.filter((w) => w.includes('trustProxy'))).toHaveLength(0);
  });
});
