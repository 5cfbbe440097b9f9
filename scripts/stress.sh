#!/usr/bin/env bash
# The suite on a busy machine: two CPU burners at normal priority keep both cores busy while
# the README's test command (npm test, with its live mesh of real processes) and the Docker
# drill CI runs (docker/ci.sh) run. Every timing-sensitive check must still pass.
#
#   npm run test:stress            # suite + Docker drill under 2 burners
#   npm run test:stress -- --no-docker
#
# Env: STRESS_BURNERS (default: one per core). The burners stop when this script exits, and
# by themselves after STRESS_MAX_S (default 3600) whatever happens.
set -uo pipefail
cd "$(dirname "$0")/.."
BURNERS="${STRESS_BURNERS:-$(nproc)}"
MAX_S="${STRESS_MAX_S:-3600}"
DOCKER=1
[ "${1:-}" = "--no-docker" ] && DOCKER=0

pids=()
stop_burners() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap stop_burners EXIT INT TERM
for _ in $(seq 1 "$BURNERS"); do
  timeout "$MAX_S" sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "== stress: $BURNERS CPU burners running (pids ${pids[*]}) on $(nproc) cores; load $(cut -d' ' -f1 /proc/loadavg)"
start=$(date +%s)
rc=0
echo "== stress: npm test"
npm test || rc=$?
if [ "$DOCKER" = 1 ]; then
  echo "== stress: docker/ci.sh"
  RATEMESH_CI_REQUIRE_DOCKER="${RATEMESH_CI_REQUIRE_DOCKER:-0}" bash docker/ci.sh || rc=$?
fi
echo "== stress: done in $(($(date +%s) - start)) s with $BURNERS burners; exit $rc; load $(cut -d' ' -f1 /proc/loadavg)"
exit "$rc"
