#!/usr/bin/env bash
# h2spec (summerwind/h2spec, RFC 7540/9113 conformance) against the RLS gRPC server.
#
#   bash scripts/h2spec.sh H2SPEC_SOURCE_DIR [TRANSPORT]
#
# H2SPEC_SOURCE_DIR: h2spec's source tree (not in this repo, nor in Debian:
# get it yourself, e.g. a git archive of github.com/summerwind/h2spec). It is
# copied, its requests made gRPC calls (POST, content-type application/grpc,
# te: trailers, to /grpc.health.v1.Health/Check: a GET would be answered 405
# at once and its DATA tests would test nothing), and built in GOPATH mode
# against Debian's Go packages (installed here if missing). TRANSPORT:
# ratemesh (default) or node:http2. Prints h2spec's report; exits with its
# status. docs/envoy-transport.md has the results and why each failure left
# does not matter to gRPC.
set -euo pipefail
src=${1:?usage: scripts/h2spec.sh H2SPEC_SOURCE_DIR [ratemesh|node:http2]}
transport=${2:-ratemesh}
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -f "$src/cmd/h2spec/h2spec.go" ] || { echo "h2spec: no source at $src (cmd/h2spec/h2spec.go missing)" >&2; exit 2; }

need=()
command -v go >/dev/null || need+=(golang-go)
for p in golang-golang-x-net-dev golang-github-spf13-cobra-dev golang-github-fatih-color-dev \
  golang-github-mattn-go-colorable-dev golang-github-mattn-go-isatty-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== apt-get install ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/gopath/src/github.com/summerwind"
cp -r "$src" "$work/gopath/src/github.com/summerwind/h2spec"
util="$work/gopath/src/github.com/summerwind/h2spec/spec/util.go"
grep -q 'HeaderField(":method", "GET"),' "$util" || { echo "h2spec: spec/util.go is not as expected" >&2; exit 2; }
sed -i 's|HeaderField(":method", "GET"),|HeaderField(":method", "POST"),|' "$util"
sed -i 's|HeaderField(":authority", authority),|HeaderField(":authority", authority),\n\t\tHeaderField("content-type", "application/grpc"),\n\t\tHeaderField("te", "trailers"),|' "$util"
echo "== building h2spec (GOPATH mode, Debian's Go packages)"
(cd "$work/gopath/src/github.com/summerwind/h2spec" &&
  GO111MODULE=off GOPATH="$work/gopath:/usr/share/gocode" GOFLAGS= go build -o "$work/h2spec" ./cmd/h2spec)

echo "== the RLS server ($transport)"
H2_CHILD_OPTS="{\"transport\":\"$transport\"}" node --import tsx "$root/test/envoy/h2-server-child.ts" >"$work/port" &
server=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$work/port")
[ -n "$port" ] || { echo "h2spec: the server did not start" >&2; exit 2; }
set +e
"$work/h2spec" -h 127.0.0.1 -p "$port" -P /grpc.health.v1.Health/Check -o 3 "${@:3}" | tee "$work/report"
set -e
# the failures left on our transport, each explained in docs/envoy-transport.md; any other fails this script
known='Sends a WINDOW_UPDATE frame on half-closed (remote) stream
Sends a PRIORITY frame on half-closed (remote) stream
Sends HEADERS frames that causes their advertised concurrent stream limit to be exceeded'
failed=$(sed -n '/^Failures:/,$p' "$work/report" | sed -n 's/^ *× [0-9]*: //p' | sort -u)
grep -q 'tests, .* passed' "$work/report" || { echo "h2spec: no summary line" >&2; exit 1; }
if [ "$transport" = ratemesh ]; then
  unexpected=$(comm -23 <(echo "$failed") <(echo "$known" | sort -u) | sed '/^$/d')
  if [ -n "$unexpected" ]; then
    echo "h2spec: failures not in docs/envoy-transport.md:"
    echo "$unexpected"
    exit 1
  fi
  echo "h2spec: every failure is one docs/envoy-transport.md explains"
fi
