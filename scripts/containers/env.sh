# Sourced by the container scripts: a private Podman setup for the container test tier.
#
# Everything lives under one cache directory OUTSIDE the repository, so CI (a clean clone
# on this same machine) reuses images built by an earlier run:
#   ${KEYGATE_CONTAINERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keygate-containers}
# Podman reads its configuration from the files written here (CONTAINERS_CONF and
# friends), never from /etc/containers, so the host's own Podman setup is left alone.
#
# Why these settings (measured in this sandbox, Podman 4.3 on Debian 12):
#  - runtime runc: the default crun fails here; cgroup manager cgroupfs: there is no systemd;
#  - no default ulimits: raising nofile above the sandbox's hard limit fails every container;
#  - events to a file: the journald default needs systemd.
KEYGATE_CONTAINERS_CACHE="${KEYGATE_CONTAINERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/keygate-containers}"
mkdir -p "$KEYGATE_CONTAINERS_CACHE/conf" "$KEYGATE_CONTAINERS_CACHE/storage" "$KEYGATE_CONTAINERS_CACHE/run"

cat >"$KEYGATE_CONTAINERS_CACHE/conf/containers.conf" <<CONF
[containers]
default_ulimits = []
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$KEYGATE_CONTAINERS_CACHE/run/events.log"
tmp_dir = "$KEYGATE_CONTAINERS_CACHE/run/libpod"
CONF

cat >"$KEYGATE_CONTAINERS_CACHE/conf/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$KEYGATE_CONTAINERS_CACHE/storage"
runroot = "$KEYGATE_CONTAINERS_CACHE/run/storage"
CONF

# Short names ("redis:7.4-alpine") resolve to docker.io, as with Docker; nothing is pulled
# (every build and run says --pull=never, and public registries are unreachable here).
cat >"$KEYGATE_CONTAINERS_CACHE/conf/registries.conf" <<CONF
unqualified-search-registries = ["docker.io"]
short-name-mode = "permissive"
CONF

export KEYGATE_CONTAINERS_CACHE
export CONTAINERS_CONF="$KEYGATE_CONTAINERS_CACHE/conf/containers.conf"
export CONTAINERS_STORAGE_CONF="$KEYGATE_CONTAINERS_CACHE/conf/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$KEYGATE_CONTAINERS_CACHE/conf/registries.conf"

# Full image names, as Docker resolves short ones (node:… is docker.io/library/node:…).
qualify() { case "$1" in *.*/* | *:*/* | localhost/*) echo "$1" ;; */*) echo "docker.io/$1" ;; *) echo "docker.io/library/$1" ;; esac; }
