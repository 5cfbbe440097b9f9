/**
 * Lone node restart (issue 11 item 7): a node's own windows written on stop and restored at
 * start keep a restart from reopening its limits. Engine level on a virtual clock, then a real
 * mesh limiter with `snapshotFile`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { createMeshLimiter } from '../../src/mesh/index.js';
import type { PolicySpec } from '../../src/types.js';
import { engine, spend, T0 } from './helpers.js';

const LOGIN: PolicySpec[] = [
  { name: 'login', limit: 5, windowMs: 60_000, buckets: 60 },
  { name: 'api', limit: 100, windowMs: 1000, buckets: 10 },
];

describe('snapshot and restore', () => {
  it('a restarted node (a new id) keeps what it admitted while it is in the window', () => {
    const clock = new ManualClock(T0);
    const a = engine(LOGIN, { nodeId: 'node-a' }, clock).e;
    expect(spend(a, 'login', 'acct:42', 5)).toBe(5);
    clock.advance(10_000);
    const bytes = a.snapshot();
    // restart 2 s later, with a fresh id (nothing depends on a persistent identity)
    clock.advance(2_000);
    const b = engine(LOGIN, { nodeId: 'node-b' }, clock).e;
    expect(b.restoreSnapshot(bytes)).toMatchObject({ ok: true, restored: 1 });
    expect(spend(b, 'login', 'acct:42', 5)).toBe(0);
    // the restored counts age out with their buckets, like any others
    clock.advance(49_000);
    expect(spend(b, 'login', 'acct:42', 5)).toBe(5);
    // and they are never gossiped as b's own
    const c = engine(LOGIN, { nodeId: 'node-c' }, clock).e;
    clock.advance(1);
    expect(c.receiveGossip('node-b', b.buildGossip()).ok).toBe(true);
    expect(c.estimate('login', 'acct:42')).toBe(5);
  });

  it('a snapshot whose windows have passed restores nothing; bad bytes are refused, not thrown', () => {
    const clock = new ManualClock(T0);
    const a = engine(LOGIN, {}, clock).e;
    spend(a, 'login', 'acct:1', 5);
    const bytes = a.snapshot();
    clock.advance(61_001);
    const b = engine(LOGIN, {}, clock).e;
    expect(b.restoreSnapshot(bytes).ok).toBe(true);
    expect(spend(b, 'login', 'acct:1', 5)).toBe(5);
    for (const bad of [new Uint8Array(0), new Uint8Array([1, 2, 3]), bytes.subarray(0, bytes.length - 1)]) {
      const r = b.restoreSnapshot(bad);
      expect(r.ok).toBe(false);
      expect(typeof r.reason).toBe('string');
    }
    expect(b.restoreSnapshot('nope' as never)).toMatchObject({ ok: false });
    // policies this node does not run (or runs at another version): nothing of them restored
    const other = engine([{ name: 'login', limit: 7, windowMs: 60_000 }], {}, clock).e;
    spend(other, 'login', 'acct:1', 7);
    expect(b.restoreSnapshot(other.snapshot())).toEqual({ ok: true, restored: 0 });
  });

  it('a restored count is capped like any origin (a forged snapshot cannot claim more than 2L)', () => {
    const clock = new ManualClock(T0);
    const a = engine([{ name: 'api', limit: 100, windowMs: 1000, buckets: 10 }], {}, clock).e;
    spend(a, 'api', 'k', 100);
    const b = engine([{ name: 'api', limit: 100, windowMs: 1000, buckets: 10 }], {}, clock).e;
    b.restoreSnapshot(a.snapshot());
    b.restoreSnapshot(a.snapshot());
    expect(b.estimate('api', 'k')).toBe(100);
  });
});

describe('mesh limiter snapshotFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ratemesh-snap-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const silent = { debug() {}, info() {}, warn() {}, error() {} };

  it('a lone node restarted with its snapshot file does not reopen a 5-per-minute limit', async () => {
    const file = join(dir, 'node.snap');
    const first = createMeshLimiter({ policies: LOGIN, snapshotFile: file, logger: silent });
    await first.start();
    let admitted = 0;
    for (let i = 0; i < 8; i++) if (first.check('login', 'acct:42').allowed) admitted++;
    await first.stop();
    expect(admitted).toBe(5);
    const second = createMeshLimiter({ policies: LOGIN, snapshotFile: file, logger: silent });
    await second.start();
    try {
      expect(second.check('login', 'acct:42').allowed).toBe(false);
      expect(second.check('login', 'acct:7').allowed).toBe(true);
    } finally {
      await second.stop();
    }
    // without the file the restart starts from nothing (what the README says of a lone node)
    const bare = createMeshLimiter({ policies: LOGIN, logger: silent });
    await bare.start();
    expect(bare.check('login', 'acct:42').allowed).toBe(true);
    await bare.stop();
  });

  it('a garbage snapshot file is logged and ignored; start still succeeds', async () => {
    const file = join(dir, 'bad.snap');
    writeFileSync(file, 'not a snapshot');
    const warned: string[] = [];
    const logger = { ...silent, warn: (_o: object, m: string) => void warned.push(m) };
    const n = createMeshLimiter({ policies: LOGIN, snapshotFile: file, logger });
    await n.start();
    expect(warned.some((m) => m.includes('snapshot'))).toBe(true);
    expect(n.check('login', 'acct:1').allowed).toBe(true);
    await n.stop();
  });
});
