#!/usr/bin/env bash
# Deletes the container tier's cache (stand-ins, built images, Podman state), so the next
# run starts cold. `rm -rf` alone fails: Podman keeps its storage directory mounted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=env.sh
source "$here/env.sh"
podman system reset --force >/dev/null 2>&1 || true
while read -r mnt; do umount "$mnt"; done < <(awk -v c="$KEYGATE_CONTAINERS_CACHE" 'index($2, c) == 1 { print $2 }' /proc/mounts | sort -r)
rm -rf "$KEYGATE_CONTAINERS_CACHE"
echo "removed $KEYGATE_CONTAINERS_CACHE"
