#!/usr/bin/env bash
# CI entry for the Docker mesh: a short, bounded run of docker/mesh.ts (kill, partition, rolling drills).
#
#   docker/ci.sh
#
# Skips (exit 0, with a plain SKIPPED line saying why) only when no container engine
# can be had: prepare.sh cannot install or start one (no root, no apt-get, no
# privileges for dockerd...). Set RATEMESH_CI_REQUIRE_DOCKER=1 to make a skip fail.
# Any failure after the engine is up (build, mesh formation, a bound) exits non-zero.
#
# The shape is one this 2-core machine sustains with CPU to spare: 4 replicas, the seed trace
# scaled to their share (1,000 req/s against L = 500, --scale 0.5), the default gossip
# interval, the drills (kill + restart + sync, disconnect + L/N fallback + return, a rolling
# replacement of every replica through one DNS name with the SIGTERM drain), and the
# behaviour profile (--ci): every request decided, the mesh formed, worst 1 s within L + 20 %
# (the shape meets L + 1 %). Timing figures are printed, not gated; the run says plainly
# whether it was overloaded. No retry: a check that fails, fails CI.
# The 8-replica seed-trace run is a benchmark (npm run docker:mesh -- --nodes 8), not CI.
#
# Env: RATEMESH_CI_NODES (4), RATEMESH_CI_SCALE (0.5), RATEMESH_CI_SECONDS (10),
#      RATEMESH_CI_GOSSIP_MS (100, the default), RATEMESH_CI_TIMEOUT_S (720),
#      RATEMESH_CI_DRILLS (kill,partition,rolling).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
NODES="${RATEMESH_CI_NODES:-4}"
SCALE="${RATEMESH_CI_SCALE:-0.5}"
SECONDS_TRACE="${RATEMESH_CI_SECONDS:-10}"
GOSSIP_MS="${RATEMESH_CI_GOSSIP_MS:-100}"
# The rolling drill (a rolling replacement of every replica: new ones ready within 30 s, each
# routed to once its /readyz passes, the old one drained by SIGTERM) runs by default.
DRILLS="${RATEMESH_CI_DRILLS:-kill,partition,rolling}"
TIMEOUT_S="${RATEMESH_CI_TIMEOUT_S:-720}"
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

echo "== docker drill: $NODES replicas, seed trace x $SCALE for ${SECONDS_TRACE} s, gossip ${GOSSIP_MS} ms, drills $DRILLS, behaviour profile (limit ${TIMEOUT_S} s)"
cd "$ROOT" || exit 1
# SIGINT first so mesh.ts tears the project down; SIGKILL 30 s later if it does not.
timeout --signal=INT --kill-after=30 "$TIMEOUT_S" \
  npx tsx docker/mesh.ts --skip-prepare --ci --nodes "$NODES" --scale "$SCALE" --seconds "$SECONDS_TRACE" \
  --gossip-ms "$GOSSIP_MS" --drills "$DRILLS" --out "$HERE/tmp/ci-accuracy.json" 2>&1 |
  tee "$HERE/tmp/ci-run.log"
rc="${PIPESTATUS[0]}"
if grep -q '^OVERLOADED' "$HERE/tmp/ci-run.log"; then
  echo "== docker drill: this run WAS overloaded at some point (lines starting OVERLOADED above); its checks are behaviour and held or failed on their own"
else
  echo "== docker drill: not overloaded (host CPU, reply latency, send lag and gossip ticks within their limits)"
fi
if [ "$rc" -ne 0 ]; then
  { [ "$rc" -eq 124 ] || [ "$rc" -eq 130 ]; } && echo "== docker drill: timed out after ${TIMEOUT_S} s"
  # Belt and braces: nothing of this project left running.
  "$HERE/prepare.sh" --down >/dev/null 2>&1 || true
  grep -E '^(FAIL|   BAD)' "$HERE/tmp/ci-run.log" | sed 's/^/   /'
  echo "== docker drill: FAILED (exit $rc)"
  exit "$rc"
fi
echo "== docker drill: passed"
