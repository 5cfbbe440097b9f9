#!/usr/bin/env bash
# CI: the RLS gRPC server against HTTP/2 and gRPC stacks we did not write.
# Installs Debian's nghttp2-client (nghttp, h2load) and python3-grpcio, then runs
# test/envoy/interop-debian.test.ts with RATEMESH_INTEROP=1: a missing binary
# fails the run (it is never skipped here). About half a minute.
# h2spec runs too when its source is given (H2SPEC_SRC=dir): it is neither in
# this repo nor in Debian, so CI does not have it; its results on this code are
# in docs/envoy-transport.md (scripts/h2spec.sh reproduces them).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
[ -x /usr/bin/nghttp ] && [ -x /usr/bin/h2load ] || need+=(nghttp2-client)
/usr/bin/python3 -c 'import grpc' 2>/dev/null || need+=(python3-grpcio)
if [ ${#need[@]} -gt 0 ]; then
  echo "== apt-get install ${need[*]}"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq || echo "apt-get update failed: the interop tests will say what is missing"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
      echo "apt-get install failed: the interop tests will say what is missing"
  else
    echo "not root: cannot install ${need[*]}; the interop tests will fail on them"
  fi
fi
echo "== interop: nghttp $(/usr/bin/nghttp --version 2>/dev/null | head -1 || echo missing)," \
  "python3-grpcio $(/usr/bin/python3 -c 'import grpc; print(grpc.__version__)' 2>/dev/null || echo missing)"
RATEMESH_INTEROP=1 npx vitest run test/envoy/interop-debian.test.ts
if [ -n "${H2SPEC_SRC:-}" ]; then
  echo "== h2spec from $H2SPEC_SRC"
  bash scripts/h2spec.sh "$H2SPEC_SRC"
else
  echo "== h2spec: NOT RUN here (its source is not available to CI: set H2SPEC_SRC to run it);" \
    "its results on this code are in docs/envoy-transport.md"
fi
