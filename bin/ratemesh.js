#!/usr/bin/env node
// The `ratemesh` command. Runs the compiled CLI (dist/daemon/cli.js, made by
// `npm run build`) when it exists; otherwise, in a source checkout, registers
// tsx (a devDependency) and runs src/daemon/cli.ts. RATEMESH_FROM_SOURCE=1
// forces the source, so tests never run a stale build.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const built = new URL('dist/daemon/cli.js', root);
const source = new URL('src/daemon/cli.ts', root);

let cli;
if (process.env.RATEMESH_FROM_SOURCE !== '1' && existsSync(fileURLToPath(built))) {
  cli = await import(built.href);
} else if (existsSync(fileURLToPath(source))) {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    process.stderr.write(
      'ratemesh: dist/ is not built and tsx is not installed; run `npm run build` first\n',
    );
    process.exit(1);
  }
  register({ tsconfig: fileURLToPath(new URL('tsconfig.json', root)) });
  cli = await import(source.href);
} else {
  process.stderr.write('ratemesh: cannot find dist/daemon/cli.js; run `npm run build` first\n');
  process.exit(1);
}
cli.runAsScript(process.argv.slice(2));
