import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/** docs/architecture.md's layers, lowest first: a file may import its own layer and the ones before it. */
const LAYERS = [
  'basics',
  'policy',
  'keys',
  'algorithms',
  'crdt',
  'decision',
  'mesh',
  'sim',
  'http',
  'envoy',
  'daemon',
];
const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** The layer of a file under src/ (src/index.ts, the package's entry, is none: it exports every layer). */
function layerOf(file: string): string | undefined {
  const rel = relative(SRC, file);
  if (rel === 'index.ts') return undefined;
  return rel.includes('/') ? rel.split('/')[0] : 'basics';
}

describe('layers (docs/architecture.md)', () => {
  it('no file imports a layer above its own, statically or dynamically', () => {
    const bad: string[] = [];
    let seen = 0;
    for (const file of files(SRC)) {
      const from = layerOf(file);
      if (from === undefined) continue;
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
        const to = layerOf(resolve(dirname(file), m[1]!));
        if (to === undefined) continue;
        seen++;
        expect(LAYERS, `${relative(SRC, file)}: unknown layer ${to}`).toContain(to);
        if (LAYERS.indexOf(to) > LAYERS.indexOf(from))
          bad.push(`${relative(SRC, file)} (${from}) imports ${m[1]} (${to})`);
      }
    }
    expect(seen).toBeGreaterThan(200);
    expect(bad).toEqual([]);
  });
});
