import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const RULES = [
  'global-limit',
  'cost-exceeds-limit',
  'local-limit',
  'headroom-share',
  'fallback-share',
  'startup-hold',
  'starting',
  'left-mesh',
  'owner-unreachable',
];

describe('npm run explain:denials (bench/explain-denials.ts)', () => {
  it('shows a denial of every rule, each denied by the rule it names and explained as checked', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/explain-denials.ts', '--brief'], {
      cwd: process.cwd(),
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    for (const rule of RULES) expect(r.stdout).toContain(`== ${rule}\n`);
    expect(r.stdout).not.toContain('EXPECTED');
    // every denial explained in words, with its numbers
    expect(r.stdout.match(/explain reason: /g)?.length).toBe(11);
    // a starting node that hears no member: the rest of the mesh's join wait
    expect(r.stdout).toContain('rule starting, mode fallback, remaining 0, retryAfterMs 7500');
    expect(r.stdout).toContain('pass the limit 10');
    expect(r.stdout).toContain('owner {"id":"node-');
  });
});
