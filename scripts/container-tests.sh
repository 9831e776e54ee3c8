#!/usr/bin/env bash
# The container test tier (npm run test:containers; .ci/run runs it after npm test):
# builds the shipped Dockerfile unchanged with Podman, on local stand-ins for its base
# images (scripts/containers/standins.sh), then runs test/container/ with vitest: the
# image on its own (image.test.ts) and the shipped docker-compose.yml driven by
# docker-compose over Podman's Docker-compatible socket (compose.test.ts).
#
# Needs root and: podman, runc, mmdebstrap, docker-compose (Debian packages). A missing
# tool is an error, never a skip. Images are cached outside the repository (env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for tool in podman runc mmdebstrap docker-compose; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "container tests: missing ${missing[*]} (Debian packages podman runc mmdebstrap docker-compose; .ci/run installs them)" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then echo "container tests: run as root (Podman and mmdebstrap are used in root mode)" >&2; exit 1; fi

# shellcheck source=containers/env.sh
source scripts/containers/env.sh
# One run at a time on this machine: the compose stack publishes fixed host ports.
exec 9>"$KEYGATE_CONTAINERS_CACHE/lock"
if ! flock --nonblock 9; then echo "container tests: another run holds $KEYGATE_CONTAINERS_CACHE/lock, waiting"; flock 9; fi

started=$(date +%s)
scripts/containers/standins.sh
eval "$(node scripts/containers/names.mjs)"
build_image=$(qualify "$BUILD_IMAGE")
runtime_image=$(qualify "$RUNTIME_IMAGE")
keygate_image=$(qualify "$KEYGATE_IMAGE")
case "$KEYGATE_IMAGE" in */*) ;; *) keygate_image="localhost/$KEYGATE_IMAGE" ;; esac

# The shipped Dockerfile, unchanged. Its ARG defaults pin the real base images by digest,
# which a local stand-in cannot have: the build names the same images by tag instead.
# Egress here passes a TLS-intercepting proxy: npm in the build stages trusts its CA
# through a file mounted for the build only (never copied into a layer; image.test.ts
# checks that the image holds no such certificate).
ca_mounts=()
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
  printf 'cafile=/run/keygate-build-ca.crt\n' >"$KEYGATE_CONTAINERS_CACHE/conf/build-npmrc"
  ca_mounts=(-v "$NODE_EXTRA_CA_CERTS:/run/keygate-build-ca.crt:ro" -v "$KEYGATE_CONTAINERS_CACHE/conf/build-npmrc:/usr/local/etc/npmrc:ro")
fi
echo "[container-tests $(date +%T)] podman build -> $keygate_image"
build_started=$(date +%s)
podman build --quiet --pull=never --format docker \
  --build-arg BUILD_IMAGE="$build_image" --build-arg RUNTIME_IMAGE="$runtime_image" \
  "${ca_mounts[@]}" -t "$keygate_image" . >/dev/null
echo "[container-tests $(date +%T)] built in $(($(date +%s) - build_started)) s"
podman image prune --force >/dev/null

# docker-compose talks to Podman's Docker-compatible API on a private socket.
sock="$KEYGATE_CONTAINERS_CACHE/run/podman.sock"
rm -f "$sock"
podman system service --time=0 "unix://$sock" >"$KEYGATE_CONTAINERS_CACHE/run/service.log" 2>&1 &
service_pid=$!
trap 'kill "$service_pid" 2>/dev/null || true; wait "$service_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "container tests: podman system service did not start" >&2; cat "$KEYGATE_CONTAINERS_CACHE/run/service.log" >&2; exit 1; }

export DOCKER_HOST="unix://$sock"
export KEYGATE_CT_IMAGE="$keygate_image" KEYGATE_CT_RUNTIME_BASE="$runtime_image" KEYGATE_CT_COMPOSE_PROJECT=keygate-ct
status=0
npx vitest run --config vitest.containers.config.ts "$@" || status=$?
echo "[container-tests $(date +%T)] finished in $(($(date +%s) - started)) s, exit $status"
exit "$status"
