#!/bin/sh
# Entrypoint of the Redis stand-in (see redis.Containerfile), written for this project.
# A bare option list means "redis-server <options>".
set -e
case "${1:-}" in -*) set -- redis-server "$@" ;; esac
if [ "${1:-}" = redis-server ]; then
  shift
  # Like the official image: with no config file (or one that does not say), listen
  # without protected mode, since clients come from other containers.
  if [ -f "${1:-}" ]; then
    conf=$1; shift
    if grep -q '^protected-mode' "$conf"; then set -- "$conf" "$@"; else set -- "$conf" --protected-mode no "$@"; fi
  else
    set -- --protected-mode no "$@"
  fi
  set -- redis-server "$@"
  if [ "$(id -u)" = 0 ]; then
    find . \! -user redis -exec chown redis:redis '{}' +
    exec setpriv --reuid=redis --regid=redis --init-groups "$@"
  fi
fi
exec "$@"
