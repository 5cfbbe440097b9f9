#!/usr/bin/env bash
# The packed-tarball install test (issue 28): what a new user does, in a fresh project.
#
#   bash scripts/install-test.sh            (npm run test:install)
#
# 1. `npm pack` (its prepare builds dist/); the tarball must hold no source map, LICENSE
#    and examples/daemon.yaml.
# 2. A fresh ESM project installs the tarball alone: install size, packages and the
#    import time are printed (figures, not gated), then express, @types/express, typescript.
#    import('ratemesh') must load no gRPC code and no module of the libp2p stack (start() does).
# 3. `tsc` with strict and skipLibCheck false over an Express-only app (no fastify installed).
# 4. The app: two Express instances embedding the mesh on loopback with a psk made by
#    `npx ratemesh psk` (scripts/install-test/app.ts); require() from CommonJS; `npx ratemesh --help`.
# 5. A Fastify-only project (no express): compiled likewise and run (fastify-app.ts).
# Set RATEMESH_INSTALL_TEST_GIT=1 to also install from git+file:// (a clone whose prepare
# builds; needs the commit checked out, and takes a minute more).
# Bounded: every step under `timeout`; the whole run takes about a minute on a warm npm cache.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FIX="$ROOT/scripts/install-test"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ratemesh-install-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
NPM_FLAGS=(--no-audit --no-fund --prefer-offline --loglevel=error)
dev_version() { node -p "require('$ROOT/package.json').devDependencies['$1']"; }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

echo "== install test: npm pack"
cd "$ROOT"
timeout 300 npm pack --pack-destination "$WORK" --loglevel=error >"$WORK/pack.txt"
TARBALL="$WORK/$(tail -1 "$WORK/pack.txt")"
tar -tzf "$TARBALL" >"$WORK/files.txt"
maps="$(grep -c '\.map$' "$WORK/files.txt" || true)"
echo "   $(basename "$TARBALL"): $(wc -l <"$WORK/files.txt") files, $(du -k "$TARBALL" | cut -f1) KB packed, $maps source maps"
[ "$maps" -eq 0 ] || { echo "FAIL: the tarball carries source maps"; exit 1; }
for f in package/LICENSE package/examples/daemon.yaml package/dist/index.js package/dist/http/express.d.ts package/bin/ratemesh.js; do
  grep -qx "$f" "$WORK/files.txt" || { echo "FAIL: $f missing from the tarball"; exit 1; }
done

echo "== install test: a fresh ESM project installs the tarball"
APP="$WORK/app"
mkdir -p "$APP"
cd "$APP"
printf '{ "name": "ratemesh-install-test", "private": true, "type": "module" }\n' >package.json
t=$(date +%s%N)
timeout 300 npm install "${NPM_FLAGS[@]}" "$TARBALL" 2>&1 | tee "$WORK/install.log" | sed 's/^/   /'
echo "   installed in $(ms_since "$t") ms: $(npm ls --all --parseable 2>/dev/null | sort -u | wc -l) packages (the project included), $(du -sm node_modules | cut -f1) MB in node_modules"
if grep -q EBADENGINE "$WORK/install.log"; then echo "   (EBADENGINE above: see README, Install)"; fi
times=()
for _ in 1 2 3 4 5; do
  times+=("$(node -e "const t=process.hrtime.bigint();import('ratemesh').then(()=>console.log(Number(process.hrtime.bigint()-t)/1e6|0))")")
done
sorted="$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')"
echo "   import('ratemesh'), 5 runs, ms: $sorted(median $(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p))"
node -e "import('ratemesh').then(()=>{const l=Object.keys(require.cache).join(' ');if(/grpc|protobufjs/.test(l)){console.error('FAIL: import loaded gRPC');process.exit(1)}})"
echo "   import('ratemesh') loads no gRPC code"
cp "$FIX/trace-hooks.mjs" .
hooks_url="$(node -p "require('node:url').pathToFileURL('$APP/trace-hooks.mjs').href")"
loaded="$(node --import "data:text/javascript,import{register}from'node:module';register('$hooks_url')" \
  -e "import('ratemesh')" 2>&1 | grep -c '^LOADED' || true)"
[ "$loaded" -eq 0 ] || { echo "FAIL: import('ratemesh') loaded $loaded modules of the libp2p stack (start() loads it)"; exit 1; }
echo "   import('ratemesh') loads no module of the libp2p stack (libp2p, gossipsub, noise, yamux, tcp, pnet: start() loads them)"

timeout 300 npm install "${NPM_FLAGS[@]}" "express@$(dev_version express)" 2>&1 | sed 's/^/   /'
timeout 300 npm install "${NPM_FLAGS[@]}" -D "typescript@$(dev_version typescript)" \
  "@types/express@$(dev_version @types/express)" "@types/node@$(dev_version @types/node)" 2>&1 | sed 's/^/   /'
[ ! -d node_modules/fastify ] || { echo "FAIL: fastify got installed; this project is Express only"; exit 1; }

echo "== install test: tsc (strict, skipLibCheck false, Express only)"
cp "$FIX/app.ts" "$FIX/tsconfig.json" "$FIX/require.cjs" .
# the README's example, as a newcomer would paste it: compiled too (not run: it wants 3 processes)
awk '/^## Three Express instances/{f=1} f&&/^```ts/{p=1;next} p&&/^```/{exit} p' "$ROOT/README.md" >readme.ts
[ -s readme.ts ] || { echo "FAIL: no example found in README.md"; exit 1; }
timeout 120 npx tsc -p tsconfig.json
echo "   compiled app.ts and the README's example ($(wc -l <readme.ts) lines)"

echo "== install test: npx ratemesh"
timeout 60 npx ratemesh --help | head -3 | sed 's/^/   /'
timeout 60 npx ratemesh psk --out swarm.key | sed 's/^/   /'
timeout 30 node require.cjs 2>&1 | grep -v ExperimentalWarning | grep -v 'node --trace-warnings' | sed 's/^/   /'

echo "== install test: two Express instances embedding the mesh, on loopback"
timeout 90 node out/app.js 2>&1 | sed 's/^/   /'
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "== install test: FAILED (exit $rc)"; exit "$rc"; }

echo "== install test: a Fastify-only project (no express installed)"
FST="$WORK/fastify"
mkdir -p "$FST" && cd "$FST"
printf '{ "name": "ratemesh-fastify-test", "private": true, "type": "module" }\n' >package.json
timeout 300 npm install "${NPM_FLAGS[@]}" "$TARBALL" "fastify@$(dev_version fastify)" 2>&1 | sed 's/^/   /'
timeout 300 npm install "${NPM_FLAGS[@]}" -D "typescript@$(dev_version typescript)" "@types/node@$(dev_version @types/node)" 2>&1 | sed 's/^/   /'
[ ! -d node_modules/express ] || { echo "FAIL: express got installed; this project is Fastify only"; exit 1; }
cp "$FIX/fastify-app.ts" app.ts
sed 's/"files": \[[^]]*\]/"files": ["app.ts"]/' "$FIX/tsconfig.json" >tsconfig.json
timeout 120 npx tsc -p tsconfig.json
echo "   compiled a Fastify-only app (strict, skipLibCheck false)"
timeout 60 node out/app.js 2>&1 | sed 's/^/   /'
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "== install test: FAILED (the Fastify app)"; exit 1; }

if [ "${RATEMESH_INSTALL_TEST_GIT:-0}" = 1 ]; then
  echo "== install test: npm install git+file://$ROOT (prepare builds in the clone)"
  GIT="$WORK/git"
  mkdir -p "$GIT" && cd "$GIT"
  printf '{ "name": "ratemesh-git-test", "private": true, "type": "module" }\n' >package.json
  t=$(date +%s%N)
  timeout 600 npm install "${NPM_FLAGS[@]}" "git+file://$ROOT#$(git -C "$ROOT" rev-parse HEAD)" 2>&1 | sed 's/^/   /'
  echo "   installed in $(ms_since "$t") ms"
  node -e "import('ratemesh').then(m=>console.log('   import: '+Object.keys(m).length+' exports'))"
  timeout 60 npx ratemesh --help | head -1 | sed 's/^/   /'
fi
echo "== install test: passed"
