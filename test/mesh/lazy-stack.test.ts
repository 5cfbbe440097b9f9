/**
 * The libp2p stack is loaded on start(), not on import (issue 28: `import('ratemesh')` took
 * 560-580 ms, most of it libp2p, gossipsub, noise, yamux, tcp and pnet). What replaced the
 * stack's values on the import path must be theirs: gossipsub's validator results, pnet's
 * swarm-key check.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TopicValidatorResult } from '@libp2p/gossipsub';
import { generateKey, preSharedKey } from '@libp2p/pnet';
import { describe, expect, it } from 'vitest';
import { Validation } from '../../src/mesh/constants.js';
import { swarmKeyProblem } from '../../src/mesh/swarm-key.js';

describe('the libp2p stack is loaded on start()', () => {
  it('importing the package (src/index.ts) loads no module of it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ratemesh-lazy-'));
    try {
      const hooks = join(dir, 'hooks.mjs');
      writeFileSync(
        hooks,
        `const STACK = /\\/node_modules\\/(libp2p|@libp2p\\/(gossipsub|identify|tcp|pnet|utils)|@chainsafe\\/libp2p-(noise|yamux))\\//;
export async function load(url, context, next) {
  if (STACK.test(url)) process.stderr.write('LOADED ' + url + '\\n');
  return next(url, context);
}
`,
      );
      const register = `data:text/javascript,import{register}from'node:module';register(${JSON.stringify(pathToFileURL(hooks).href)})`;
      // the modules of the stack a child process loads running `code` (the hooks write to stderr)
      const loaded = (code: string): string[] => {
        const r = spawnSync(
          process.execPath,
          ['--import', 'tsx', '--import', register, '-e', `${code}.then(() => console.error('DONE'))`],
          { cwd: process.cwd(), encoding: 'utf8', timeout: 60_000 },
        );
        expect(r.stderr).toContain('DONE');
        return r.stderr.split('\n').filter((l) => l.startsWith('LOADED'));
      };
      expect(loaded("import('./src/index.ts')")).toEqual([]);
      // the hooks see the stack when it is loaded (the check can fail)
      expect(loaded("import('./src/index.ts').then(()=>import('libp2p'))").length).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it("the validator results are gossipsub's", () => {
    expect(Validation).toEqual({
      Accept: TopicValidatorResult.Accept,
      Ignore: TopicValidatorResult.Ignore,
      Reject: TopicValidatorResult.Reject,
    });
  });

  it('the swarm-key check accepts and refuses what pnet does', () => {
    const good = new Uint8Array(95);
    generateKey(good);
    const text = new TextDecoder().decode(good);
    const hex = text.split('\n')[2]!;
    const enc = (s: string) => new TextEncoder().encode(s);
    const cases: Uint8Array[] = [
      good,
      enc(text.replaceAll('\n', '\r\n')),
      enc(text.replaceAll('\n', '\r')),
      enc(`${text}\n`),
      enc(`${text}\nmore lines\n`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex}==`),
      enc(`/other/tag/\n/base64/\n${hex}`), // pnet reads neither the tag nor the codec line
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex.toUpperCase()}`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex.slice(0, 32).toUpperCase()}${hex.slice(32)}`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex.slice(0, 32)}=${hex.slice(33)}`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex.slice(0, 63)}g`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex.slice(2)}`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex}00`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n${hex.slice(1)}`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/\n ${hex}`),
      enc(`/key/swarm/psk/1.0.0/\n\n/base16/\n${hex}`),
      enc(`/key/swarm/psk/1.0.0/\n/base16/`),
      enc(''),
      enc('hello'),
      new Uint8Array([0xff, 0xfe, 0x0a, 0x0a]),
    ];
    let accepted = 0;
    for (const psk of cases) {
      let pnet: boolean;
      try {
        preSharedKey({ psk })();
        pnet = true;
      } catch {
        pnet = false;
      }
      expect({ psk: new TextDecoder().decode(psk), ok: swarmKeyProblem(psk) === undefined }).toEqual({
        psk: new TextDecoder().decode(psk),
        ok: pnet,
      });
      if (pnet) accepted++;
    }
    expect(accepted).toBeGreaterThanOrEqual(5);
  });
});
