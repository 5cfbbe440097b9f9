#!/usr/bin/env bash
# CI: the RLS gRPC server against HTTP/2 and gRPC stacks we did not write.
# Installs Debian's nghttp2-client (nghttp, h2load) and python3-grpcio, then runs
# test/envoy/interop-debian.test.ts with RATEMESH_INTEROP=1: a missing binary
# fails the run (it is never skipped here). About half a minute.
# Then h2spec (RFC 9113 conformance) from its source in third_party/h2spec
# (H2SPEC_SRC=dir for another copy), built against Debian's Go packages
# (installed by scripts/h2spec.sh), against both transports: on ours any
# failure not explained in docs/envoy-transport.md fails the run. About a
# minute, most of it the Go packages' install on a fresh machine.
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
src=${H2SPEC_SRC:-third_party/h2spec}
echo "== h2spec from $src: ratemesh's transport"
bash scripts/h2spec.sh "$src" ratemesh
echo "== h2spec from $src: the node:http2 fallback (its failures are nghttp2's, listed in docs/envoy-transport.md; not fatal)"
bash scripts/h2spec.sh "$src" node:http2 | grep -a -E '^ +× |tests, ' || true
