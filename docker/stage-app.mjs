#!/usr/bin/env node
// Stage the prebuilt app for the image, on the host (no npm, no network):
//   docker/tmp/app/{package.json, package-lock.json, dist/, bin/, proto/, node_modules/}
// node_modules holds production dependencies only: the host's node_modules
// minus every package-lock entry marked "dev" (tsx, typescript, vitest... are
// devDependencies and are NOT in the image; the image runs compiled dist/).
//
//   node docker/stage-app.mjs [--build]   --build runs `npm run build` first
//   node docker/stage-app.mjs --clean     removes docker/tmp/app (then a
//                                         Docker build compiles from source)
//
// The Dockerfile uses docker/tmp/app when it holds a package.json; otherwise it
// runs npm ci + build inside the builder stage (needs a registry).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'docker', 'tmp', 'app');
const args = new Set(process.argv.slice(2));
const log = (m) => console.log(`[stage] ${m}`);

if (args.has('--clean')) {
  rmSync(out, { recursive: true, force: true });
  log(`removed ${out}`);
  process.exit(0);
}
if (args.has('--build')) {
  log('npm run build');
  execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
}
const t0 = Date.now();
for (const need of ['package.json', 'package-lock.json', 'dist', 'node_modules']) {
  if (!existsSync(join(root, need))) {
    console.error(
      `[stage] missing ${need}: run npm ci and npm run build on the host first (or pass --build)`,
    );
    process.exit(1);
  }
}
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const f of ['package.json', 'package-lock.json']) cpSync(join(root, f), join(out, f));
cpSync(join(root, 'dist'), join(out, 'dist'), {
  recursive: true,
  filter: (src) => !src.endsWith('.map') && !/\.test\.(js|d\.ts)$/.test(src),
});
if (existsSync(join(root, 'bin'))) cpSync(join(root, 'bin'), join(out, 'bin'), { recursive: true });
// The Envoy RLS server loads its .proto files at run time (dist/envoy/grpc-server.js reads ../../proto).
if (existsSync(join(root, 'proto'))) cpSync(join(root, 'proto'), join(out, 'proto'), { recursive: true });

const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8'));
let kept = 0;
let dropped = 0;
// Copy each non-dev top-level package dir, then remove nested dev entries.
const entries = Object.entries(lock.packages ?? {}).filter(([k]) => k.startsWith('node_modules/'));
for (const [path, meta] of entries) {
  const top = path.split('/node_modules/').length === 1;
  if (!top) continue;
  if (meta.dev) {
    dropped++;
    continue;
  }
  const src = join(root, path);
  if (!existsSync(src)) continue; // optional dep for another platform
  cpSync(src, join(out, path), { recursive: true, verbatimSymlinks: true });
  kept++;
}
for (const [path, meta] of entries) {
  const nested = path.split('/node_modules/').length > 1;
  if (nested && meta.dev) rmSync(join(out, path), { recursive: true, force: true });
}
const du = (p) => {
  let n = 0;
  const st = statSync(p, { throwIfNoEntry: false });
  if (!st) return 0;
  if (!st.isDirectory()) return st.size;
  for (const e of execFileSync('find', [p, '-type', 'f', '-printf', '%s\n']).toString().split('\n'))
    n += Number(e) || 0;
  return n;
};
log(
  `${out}: ${kept} production packages kept, ${dropped} dev packages left out; ` +
    `${(du(out) / 1e6).toFixed(1)} MB (node_modules ${(du(join(out, 'node_modules')) / 1e6).toFixed(1)} MB) in ${Date.now() - t0} ms`,
);
