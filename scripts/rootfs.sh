#!/usr/bin/env bash
# A minimal Debian bookworm root filesystem (debootstrap --variant=minbase), made once per
# package list and kept as a tarball under $PIPETRACE_IMAGE_CACHE (default
# ~/.cache/pipetrace-images). scripts/image.sh sources this file for its images; run, it
# prints the tarball of one root:
#
#   scripts/rootfs.sh agent      the agent's root (libc, ca-certificates): the clean Debian
#                                root the package test (tests/tests/e2e/dist.rs) installs into
#   scripts/rootfs.sh pipeline   the pipeline image's root (Debian's Snakemake)
#
# Needs root and debootstrap; only a root not cached yet fetches Debian's packages.
set -euo pipefail

SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${PIPETRACE_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pipetrace-images}
# The agent needs nothing from Debian but libc (and ca-certificates for OTLP over TLS); the
# pipeline image runs Snakemake 7 (Debian's) and its shell rules. debootstrap resolves no
# virtual packages: python3-cffi-backend provides python3-bcrypt's
# python3-cffi-backend-api-{min,max}.
AGENT_PACKAGES=ca-certificates
PIPELINE_PACKAGES=ca-certificates,snakemake,python3-cffi-backend

rootfs_say() { printf '%s: %s\n' "${ROOTFS_WHO:-rootfs}" "$*" >&2; }
rootfs_die() {
  rootfs_say "$*"
  exit 1
}

# Takes the cache's lock (one build at a time: tests build the same roots and images side by
# side) for as long as the calling shell lives, and clears what an interrupted build left.
rootfs_lock() {
  command -v debootstrap >/dev/null || rootfs_die "debootstrap is not installed: run scripts/setup.sh"
  [[ $(id -u) == 0 ]] || rootfs_die "debootstrap needs root"
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  flock 9
  local stale
  for stale in "$CACHE"/rootfs.* "$CACHE"/*.part; do
    [[ -e $stale ]] && discard "$stale"
  done
  return 0
}

# Removes a debootstrap target, unmounting first what debootstrap mounted in it (/proc, /sys).
discard() {
  findmnt -rn -o TARGET | grep -F "$1/" | sort -r | xargs -r umount -l || true
  rm -rf --one-file-system "$1"
}

# The cached rootfs tarball for a package list: made once, by debootstrap. Call with the lock.
rootfs() {
  local packages=$1
  local key
  key=$(printf '%s %s minbase %s %s v1' "$SUITE" "$MIRROR" "$packages" "$(uname -m)" | sha256sum | cut -c1-16)
  local tar="$CACHE/$SUITE-minbase-$key.tar"
  if [[ ! -s $tar ]]; then
    local dir
    dir=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    rootfs_say "debootstrap $SUITE (minbase, $packages) from $MIRROR into $tar"
    local start=$SECONDS
    debootstrap --variant=minbase --include="$packages" "$SUITE" "$dir" "$MIRROR" >&2 ||
      {
        discard "$dir"
        rootfs_die "debootstrap failed (is $MIRROR reachable? see the log above)"
      }
    # What no container needs: downloaded packages, package lists, documentation.
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* \
      "$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/info/*
    tar -C "$dir" --numeric-owner -cf "$tar.part" .
    mv "$tar.part" "$tar"
    discard "$dir"
    rootfs_say "rootfs ready in $((SECONDS - start)) s ($(du -h "$tar" | cut -f1))"
  fi
  printf '%s\n' "$tar"
}

# Run, not sourced: the tarball of the root named on the command line.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  case ${1:-} in
  agent) packages=$AGENT_PACKAGES ;;
  pipeline) packages=$PIPELINE_PACKAGES ;;
  *) rootfs_die "usage: $0 agent|pipeline" ;;
  esac
  rootfs_lock
  rootfs "$packages"
fi
