#!/usr/bin/env bash
# Proves the Docker infrastructure WITHOUT the daemon: builds docker/Dockerfile
# with a test-only stand-in server (docker/smoke/server.js as bin/ratemesh.js),
# starts compose.yml with --scale node=N, checks from the host that every
# replica is healthy, runs as a non-root user and resolves the service name to
# all N addresses, runs the load driver (compose.load.yml) against them, then
# tears everything down (also on failure / Ctrl-C).
#   docker/smoke.sh [N=3]        result: docker/tmp/smoke-result.json
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
N="${1:-3}"
PROJECT=ratemesh-smoke
IMAGE=ratemesh-smoke:local
HEALTH_WAIT_S=90
CTX="$HERE/tmp/smoke-ctx"
say() { printf '[smoke] %s\n' "$*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

"$HERE/prepare.sh"
if docker compose version >/dev/null 2>&1; then DC=(docker compose); else DC=(docker-compose); fi
export RATEMESH_IMAGE="$IMAGE"
compose() { (cd "$HERE" && "${DC[@]}" -p "$PROJECT" -f compose.yml -f compose.load.yml "$@"); }
teardown() {
  local rc=$?
  say "teardown (${DC[*]} down)"
  compose down -v --remove-orphans --timeout 5 >"$HERE/tmp/smoke-down.log" 2>&1 || say "down failed: see $HERE/tmp/smoke-down.log"
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# 1. Build context: the real Dockerfile/config/.dockerignore + a staged throwaway app.
t=$(now)
rm -rf "$CTX"
mkdir -p "$CTX/docker/tmp/app/bin" "$CTX/docker/config"
cp "$HERE/Dockerfile" "$CTX/docker/Dockerfile"
cp "$HERE/Dockerfile.dockerignore" "$CTX/.dockerignore"
cp "$HERE/config/node.yaml" "$CTX/docker/config/node.yaml"
cp "$HERE/smoke/server.js" "$CTX/docker/tmp/app/bin/ratemesh.js"
printf '{"name":"ratemesh-smoke","private":true,"type":"module"}\n' >"$CTX/docker/tmp/app/package.json"
docker build -q -f "$CTX/docker/Dockerfile" -t "$IMAGE" "$CTX" >"$HERE/tmp/smoke-build.log" 2>&1 \
  || { cat "$HERE/tmp/smoke-build.log"; exit 1; }
BUILD_S=$(since "$t")
SIZE_MB=$(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.1f", $1/1e6}')
say "built $IMAGE in ${BUILD_S} s, ${SIZE_MB} MB"

# 2. Up with N replicas; wait (bounded) until every replica is healthy.
compose down -v --remove-orphans --timeout 5 >/dev/null 2>&1 || true
t=$(now)
compose up -d --no-build --scale node="$N" node >"$HERE/tmp/smoke-up.log" 2>&1 || { cat "$HERE/tmp/smoke-up.log"; exit 1; }
UP_S=$(since "$t")
healthy=0
for ((i = 0; i < HEALTH_WAIT_S * 4; i++)); do
  mapfile -t ids < <(compose ps -q node)
  healthy=0
  for id in "${ids[@]}"; do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$id")" = healthy ] && healthy=$((healthy + 1))
  done
  [ "$healthy" -eq "$N" ] && [ "${#ids[@]}" -eq "$N" ] && break
  sleep 0.25
done
HEALTHY_S=$(since "$t")
[ "$healthy" -eq "$N" ] || { say "FAIL: $healthy/$N healthy after ${HEALTH_WAIT_S} s"; compose logs --tail 20 node; exit 1; }
say "$N/$N replicas healthy ${HEALTHY_S} s after 'up' started (up itself returned after ${UP_S} s)"

# 3. From the host: each replica resolves the service name to all N addresses, runs non-root.
ips=()
for id in "${ids[@]}"; do ips+=("$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$id")"); done
node - "$N" "${ips[@]}" <<'JS'
const [n, ...ips] = process.argv.slice(2);
const want = [...ips].sort().join(',');
let ok = true;
for (const ip of ips) {
  const r = await fetch(`http://${ip}:8080/dns`, { signal: AbortSignal.timeout(3000) });
  const j = await r.json();
  const got = j.addrs.join(',');
  const good = j.addrs.length === Number(n) && got === want && j.uid !== 0 && j.self.includes(ip);
  ok &&= good;
  console.log(`[smoke] ${ip}: ${j.name} -> ${got} (uid ${j.uid}) ${good ? 'OK' : 'MISMATCH, want ' + want}`);
}
if (!ok) process.exit(1);
JS

# 4. The load driver service against the replicas (stand-in always allows).
t=$(now)
LOAD_JSON=$(compose run --rm --no-deps load --target node:8080 --rate 500 --seconds 2 --json 2>"$HERE/tmp/smoke-load.log" | tail -1) \
  || { cat "$HERE/tmp/smoke-load.log"; exit 1; }
LOAD_S=$(since "$t")
echo "$LOAD_JSON" | node -e '
const j = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(`[smoke] load: ${j.requests} requests, ${j.admitted} admitted, ${j.errors} errors, per replica ${j.nodes.map((x) => x.sent).join("/")}`);
if (j.errors || j.admitted !== j.requests || j.nodes.length !== Number(process.argv[1])) process.exit(1);' "$N"
say "load run took ${LOAD_S} s (incl. container start)"

cat >"$HERE/tmp/smoke-result.json" <<JSON
{"replicas": $N, "compose": "${DC[*]}", "build_s": $BUILD_S, "image_mb": $SIZE_MB, "up_s": $UP_S, "all_healthy_s": $HEALTHY_S, "load_run_s": $LOAD_S}
JSON
say "PASS: $(cat "$HERE/tmp/smoke-result.json")"
