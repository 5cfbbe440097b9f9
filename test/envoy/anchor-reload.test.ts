/**
 * envoyproxy/ratelimit's testConfigReload, ported: a config file copied into
 * the config folder is loaded without a signal, and its removal is too, on
 * one node and on every node of a 2-node mesh (both watch the folder). Their
 * file: test/envoy/anchor/reload.yaml (Apache-2.0, see README.md there).
 */
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANCHOR_DIR, Target } from './anchor-harness.js';

describe.each(['single node', '2-node mesh'] as const)(
  'config folder reload on a %s (testConfigReload)',
  (kind) => {
    let t: Target;
    beforeAll(async () => {
      t = await Target.start(kind, ['basic.yaml']);
    });
    afterAll(() => t.stop());

    it('a file added to the folder is loaded, and its removal unloads it, without a signal', async () => {
      const block = { entries: [['block', 'foo']] as [string, string][] };
      for (let i = 0; i < t.daemons.length; i++) {
        // the domain is not known yet: OK with no limit
        expect((await t.call('reload', [block], 1, i)).statuses[0]).toMatchObject({
          code: 'OK',
          current_limit: null,
        });
      }
      copyFileSync(join(ANCHOR_DIR, 'reload.yaml'), join(t.dir, 'config', 'reload.yaml'));
      const limitOn = async (node: number) =>
        (await t.call('reload', [{ entries: [['key1', 'foo']], hits: 0 }], 0, node)).statuses[0]!
          .current_limit;
      for (let i = 0; i < t.daemons.length; i++) {
        await until(`node ${i} loads the new file`, async () => (await limitOn(i)) !== null);
        const r = await t.call('reload', [{ entries: [['key1', 'foo']] }], 1, i);
        expect(r.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 50, unit: 'SECOND' });
        // (a mesh node may still refuse a call on a policy its peer has just added: the decision
        // rule's reserve for a policy a member runs at another version, not this layer)
        if (!t.mesh || process.env.ANCHOR_MESH_EXACT === '1') expect(r.statuses[0]!.code).toBe('OK');
        // their block descriptor: requests_per_unit 0
        expect((await t.call('reload', [block], 1, i)).overall_code).toBe('OVER_LIMIT');
      }

      rmSync(join(t.dir, 'config', 'reload.yaml'));
      for (let i = 0; i < t.daemons.length; i++) {
        await until(`node ${i} drops the removed file`, async () => (await limitOn(i)) === null);
      }
    });
  },
);

/** Polls `cond` every 50 ms until it holds; fails after 10 s (the watcher polls every 250 ms). */
async function until(what: string, cond: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out after 10 s waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
