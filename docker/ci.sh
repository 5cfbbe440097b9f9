#!/usr/bin/env bash
# CI entry for the Docker mesh: a short, bounded run of docker/mesh.ts (both drills).
#
#   docker/ci.sh
#
# Skips (exit 0, with a plain SKIPPED line saying why) only when no container engine
# can be had: prepare.sh cannot install or start one (no root, no apt-get, no
# privileges for dockerd...). Set RATEMESH_CI_REQUIRE_DOCKER=1 to make a skip fail.
# Any failure after the engine is up (build, mesh formation, a bound) exits non-zero.
#
# Env: RATEMESH_CI_NODES (4), RATEMESH_CI_SECONDS (5), RATEMESH_CI_GOSSIP_MS (25: four
#      replicas at 10 ms need more CPU than a 2-core runner has, see README.md),
#      RATEMESH_CI_TIMEOUT_S (270; the whole script stays under ~5 minutes).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
NODES="${RATEMESH_CI_NODES:-4}"
SECONDS_TRACE="${RATEMESH_CI_SECONDS:-5}"
GOSSIP_MS="${RATEMESH_CI_GOSSIP_MS:-25}"
TIMEOUT_S="${RATEMESH_CI_TIMEOUT_S:-270}"
mkdir -p "$HERE/tmp"
LOG="$HERE/tmp/ci-prepare.log"

skip() {
  echo "== docker drill: SKIPPED: $*"
  if [ "${RATEMESH_CI_REQUIRE_DOCKER:-0}" = 1 ]; then
    echo "== docker drill: RATEMESH_CI_REQUIRE_DOCKER=1, so a skip is a failure"
    exit 1
  fi
  exit 0
}

echo "== docker drill: preparing an engine (docker/prepare.sh)"
if ! timeout 600 "$HERE/prepare.sh" >"$LOG" 2>&1; then
  sed 's/^/   /' "$LOG" | tail -15
  skip "no container engine could be installed or started (prepare.sh failed; log $LOG)"
fi
sed 's/^/   /' "$LOG"
if ! timeout 10 docker info >/dev/null 2>&1; then
  skip "prepare.sh finished but no engine answers 'docker info'"
fi

echo "== docker drill: $NODES replicas, seed trace ${SECONDS_TRACE} s, gossip ${GOSSIP_MS} ms, drills kill,partition (limit ${TIMEOUT_S} s)"
cd "$ROOT" || exit 1
# SIGINT first so mesh.ts tears the project down; SIGKILL 30 s later if it does not.
timeout --signal=INT --kill-after=30 "$TIMEOUT_S" \
  npx tsx docker/mesh.ts --skip-prepare --nodes "$NODES" --seconds "$SECONDS_TRACE" \
  --gossip-ms "$GOSSIP_MS" --drills kill,partition --out "$HERE/tmp/ci-accuracy.json"
rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 124 ] || [ "$rc" -eq 130 ] && echo "== docker drill: timed out after ${TIMEOUT_S} s"
  # Belt and braces: nothing of this project left running.
  "$HERE/prepare.sh" --down >/dev/null 2>&1 || true
  echo "== docker drill: FAILED (exit $rc)"
  exit "$rc"
fi
echo "== docker drill: passed"
