#!/usr/bin/env bash
# Prepare this machine to build and run the ratemesh Docker mesh.
#
#   docker/prepare.sh            install engine + compose if missing, start dockerd
#                                if no engine answers, build the local base image
#                                if it is missing. Idempotent: a fast no-op when
#                                everything is present.
#   docker/prepare.sh --down     remove the project's containers/networks (all
#                                compose projects named ratemesh*); leaves the
#                                engine and images.
#   docker/prepare.sh --stop-engine   additionally stop a dockerd that THIS script
#                                started (pid in docker/tmp/dockerd.pid).
#   docker/prepare.sh --rebuild-base  rebuild the local base image even if present.
#
# Env: RATEMESH_BASE_IMAGE (default node:20-bookworm-slim, must match the
#      Dockerfile's ARG NODE_IMAGE), RATEMESH_ENGINE_WAIT_S (default 30).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TMP="$HERE/tmp"
BASE_IMAGE="${RATEMESH_BASE_IMAGE:-node:20-bookworm-slim}"
WAIT_S="${RATEMESH_ENGINE_WAIT_S:-30}"
mkdir -p "$TMP"

say() { printf '[prepare] %s\n' "$*"; }
die() { printf '[prepare] ERROR: %s\n' "$*" >&2; exit 1; }

compose_cmd() {
  # Prefer the v2 plugin, fall back to docker-compose 1.29.
  if docker compose version >/dev/null 2>&1; then echo "docker compose";
  elif command -v docker-compose >/dev/null 2>&1; then echo "docker-compose";
  else return 1; fi
}

engine_up() { timeout 10 docker info >/dev/null 2>&1; }

install_packages() {
  local need=()
  command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  command -v docker >/dev/null 2>&1 || need+=(docker.io)
  compose_cmd >/dev/null 2>&1 || need+=(docker-compose)
  if [ "${#need[@]}" -eq 0 ]; then
    say "skip install: docker ($(command -v docker)), dockerd ($(command -v dockerd)) and compose ($(compose_cmd)) are present"
    return
  fi
  [ "$(id -u)" -eq 0 ] || die "need root to apt-get install ${need[*]}"
  command -v apt-get >/dev/null 2>&1 || die "no apt-get: install ${need[*]} by hand"
  say "installing ${need[*]} (missing); running apt-get update first"
  DEBIAN_FRONTEND=noninteractive apt-get update -q >"$TMP/apt.log" 2>&1 || { tail -20 "$TMP/apt.log"; die "apt-get update failed"; }
  # shellcheck disable=SC2068
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(printf '%s\n' "${need[@]}" | sort -u) >>"$TMP/apt.log" 2>&1 \
    || { tail -20 "$TMP/apt.log"; die "apt-get install failed (log: $TMP/apt.log)"; }
  say "installed; log in $TMP/apt.log"
}

start_engine() {
  if engine_up; then
    say "skip dockerd start: an engine already answers ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
    return
  fi
  [ "$(id -u)" -eq 0 ] || die "no engine answers and not root: start dockerd yourself"
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    say "no engine answers; starting docker via systemctl"
    systemctl start docker || true
  fi
  if ! engine_up; then
    say "no engine answers; starting dockerd in the background (log: $TMP/dockerd.log)"
    nohup dockerd >"$TMP/dockerd.log" 2>&1 &
    echo $! >"$TMP/dockerd.pid"
  fi
  local i
  for ((i = 0; i < WAIT_S * 2; i++)); do
    if engine_up; then say "engine up after ~$((i / 2)) s"; return; fi
    sleep 0.5
  done
  tail -20 "$TMP/dockerd.log" 2>/dev/null || true
  die "engine did not answer within ${WAIT_S} s"
}

build_base() {
  if [ "${REBUILD_BASE:-0}" != 1 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "skip base image: $BASE_IMAGE already present ($(docker image inspect -f '{{if index .Config.Labels "org.ratemesh.local-base"}}local, made by prepare.sh{{else}}pulled{{end}}' "$BASE_IMAGE" 2>/dev/null))"
    return
  fi
  # No pull attempt on purpose: with a registry, `docker compose build` pulls the
  # official image itself and this script is not needed.
  say "building local base $BASE_IMAGE from the host's node ($(command -v node), $(node -v)): $([ "${REBUILD_BASE:-0}" = 1 ] && echo "rebuild asked (--rebuild-base)" || echo "image not present locally")"
  local node_bin busybox root old_id
  old_id="$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || true)"
  node_bin="$(readlink -f "$(command -v node)")" || die "no node on the host"
  busybox="$(command -v busybox || true)"
  if [ -z "$busybox" ] || ! file_is_static "$busybox"; then
    if [ -x /bin/busybox ] && file_is_static /bin/busybox; then busybox=/bin/busybox
    else
      [ "$(id -u)" -eq 0 ] || die "need busybox-static (apt-get install busybox-static)"
      say "installing busybox-static (a static /bin/sh for the base image)"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q busybox-static >>"$TMP/apt.log" 2>&1 \
        || { DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$TMP/apt.log" 2>&1 \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -q busybox-static >>"$TMP/apt.log" 2>&1; } \
        || die "could not install busybox-static"
      busybox=/bin/busybox
    fi
  fi
  rm -rf "$TMP"/baseroot.*   # left by an interrupted run
  root="$(mktemp -d "$TMP/baseroot.XXXXXX")"
  trap 'rm -rf "$root"' RETURN
  mkdir -p "$root"/{bin,usr/local/bin,usr/bin,etc,tmp,home/node,root,proc,sys,dev,var/tmp}
  chmod 1777 "$root/tmp" "$root/var/tmp"
  cp "$node_bin" "$root/usr/local/bin/node"
  ln -s /usr/local/bin/node "$root/usr/bin/node"
  cp "$busybox" "$root/bin/busybox"
  local app
  for app in sh ash cat ls mkdir rm cp mv ln chmod chown echo env id ps sleep test wget nslookup grep sed head tail wc date hostname kill true false printf; do
    ln -s busybox "$root/bin/$app"
  done
  # Shared libraries of node, at the same paths (dynamic loader + libs).
  local lib
  while read -r lib; do
    [ -n "$lib" ] || continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done < <(ldd "$node_bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
  # Name resolution (glibc getaddrinfo used by node's dns.lookup).
  for lib in /lib/x86_64-linux-gnu/libnss_dns.so.2 /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libresolv.so.2; do
    [ -e "$lib" ] && { mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"; }
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnode:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  chown 1000:1000 "$root/home/node"
  tar -C "$root" -cf "$TMP/base-rootfs.tar" .
  docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin NODE_VERSION='"$(node -v | tr -d v)" \
    -c 'CMD ["node"]' \
    -c 'LABEL org.ratemesh.local-base=true' \
    -m "ratemesh local base: host node $(node -v) + busybox (no registry)" \
    "$TMP/base-rootfs.tar" "$BASE_IMAGE" >/dev/null
  rm -f "$TMP/base-rootfs.tar"
  # Check it runs (loader, libs, DNS via glibc); untag it if not, so a rerun retries.
  if ! docker run --rm "$BASE_IMAGE" node -e 'require("dns").lookup("localhost",(e)=>{if(e)throw e;console.log("base ok: node",process.version)})' \
      | sed 's/^/[prepare] /' || ! docker run --rm "$BASE_IMAGE" sh -c 'true'; then
    docker image rm "$BASE_IMAGE" >/dev/null 2>&1 || true
    die "the imported base image does not run; removed it"
  fi
  if [ -n "$old_id" ] && [ "$old_id" != "$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")" ]; then
    docker image rm "$old_id" >/dev/null 2>&1 || true  # the replaced base, if nothing uses it
  fi
  say "base image $BASE_IMAGE: $(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
}

file_is_static() { ! ldd "$1" >/dev/null 2>&1; }

down() {
  local cc p
  engine_up || { say "skip down: no engine answers"; return; }
  cc="$(compose_cmd)" || die "no compose"
  # Containers of every compose project whose name starts with ratemesh.
  for p in $(docker ps -a --format '{{.Label "com.docker.compose.project"}}' | grep '^ratemesh' | sort -u); do
    say "removing compose project $p"
    docker ps -aq --filter "label=com.docker.compose.project=$p" | xargs -r docker rm -f >/dev/null
    docker network ls -q --filter "label=com.docker.compose.project=$p" | xargs -r docker network rm >/dev/null || true
  done
  say "down done (engine and images kept)"
}

case "${1:-}" in
  --down) down; exit 0 ;;
  --stop-engine)
    down
    if [ -f "$TMP/dockerd.pid" ] && kill -0 "$(cat "$TMP/dockerd.pid")" 2>/dev/null; then
      say "stopping dockerd pid $(cat "$TMP/dockerd.pid") (started by prepare.sh)"
      kill "$(cat "$TMP/dockerd.pid")"; rm -f "$TMP/dockerd.pid"
    else say "skip engine stop: not started by prepare.sh"; fi
    exit 0 ;;
  --rebuild-base) REBUILD_BASE=1 ;;
  "" ) ;;
  *) die "unknown option $1 (use --down, --stop-engine, --rebuild-base)" ;;
esac

t0=$(date +%s.%N)
install_packages
start_engine
build_base
say "ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s: docker $(docker info --format '{{.ServerVersion}}'), compose: $(compose_cmd)"
