#!/usr/bin/env bash
# Builds pipetrace's container images with podman from Debian's own packages: no registry is
# pulled. A minimal bookworm root filesystem (scripts/rootfs.sh: debootstrap
# --variant=minbase, made once per package list and kept as a tarball under
# $PIPETRACE_IMAGE_CACHE, default ~/.cache/pipetrace-images) is `podman import`ed with the
# image's entrypoint.
#
#   scripts/image.sh agent [BINARY [TAG...]]
#       the agent: BINARY (default target/release/pipetrace) as /usr/local/bin/pipetrace,
#       ENTRYPOINT ["/usr/local/bin/pipetrace"], CMD ["agent"], run as root as
#       deploy/docker/Dockerfile builds it. TAGs default to localhost/pipetrace:<version> and
#       localhost/pipetrace:latest (what `make image` builds, with the release binary).
#   scripts/image.sh pipeline [TAG...]
#       a pipeline's image: Snakemake and coreutils from Debian (the sidecar test's pipeline
#       container). TAG defaults to localhost/pipetrace-pipeline:latest.
#
# An image whose content is already what it would be (the same rootfs and binary, by their
# sha256) is left as it is. Prints the first tag. Needs root, debootstrap and podman.
set -euo pipefail
say() { printf 'image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# The cached debootstrap'd roots (SUITE, the package lists, rootfs_lock, rootfs).
ROOTFS_WHO=image
# shellcheck source=scripts/rootfs.sh
source "$(dirname "$0")/rootfs.sh"
# podman as the tests run it: runc and the cgroupfs manager (crun fails on hybrid cgroups).
PODMAN=(podman --cgroup-manager=cgroupfs --runtime runc)

command -v debootstrap >/dev/null || die "debootstrap is not installed: run scripts/setup.sh"
command -v podman >/dev/null || die "podman is not installed: run scripts/setup.sh"
[[ $(id -u) == 0 ]] || die "debootstrap and podman import need root"

kind=${1:-}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)

# One build at a time, roots and images alike (tests build the same images side by side).
rootfs_lock

# The label an image carries: what it was made of. Unchanged, the import is skipped.
up_to_date() {
  local tag=$1 source=$2
  local have
  have=$("${PODMAN[@]}" image inspect --format '{{index .Config.Labels "org.pipetrace.source"}}' "$tag" 2>/dev/null) || return 1
  [[ $have == "$source" ]]
}

import() {
  local tar=$1 source=$2 first=$3
  shift 3
  local changes=("$@")
  local old
  old=$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$first" 2>/dev/null) || old=
  say "podman import $first"
  local start=$SECONDS
  "${PODMAN[@]}" import --change "LABEL org.pipetrace.source=$source" "${changes[@]}" "$tar" "$first" >/dev/null
  say "imported in $((SECONDS - start)) s"
  # The image the tag named before, unless another tag still names it.
  [[ -z $old ]] || "${PODMAN[@]}" rmi "$old" >/dev/null 2>&1 || true
}

tag_all() {
  local first=$1
  shift
  for t in "$@"; do "${PODMAN[@]}" tag "$first" "$t"; done
}

case $kind in
agent)
  bin=${1:-$root/target/release/pipetrace}
  shift || true
  [[ -x $bin ]] || die "no pipetrace binary at $bin: build it first (cargo build --release -p pipetrace)"
  tags=("$@")
  if ((${#tags[@]} == 0)); then
    version=$("$bin" --version | awk '{print $2}')
    [[ -n $version ]] || die "$bin --version said no version"
    tags=("localhost/pipetrace:$version" "localhost/pipetrace:latest")
  fi
  base=$(rootfs "$AGENT_PACKAGES")
  source="$(basename "$base")+$(sha256sum "$bin" | cut -c1-16)"
  if up_to_date "${tags[0]}" "$source"; then
    say "${tags[0]} is up to date"
  else
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # The binary, and the directories the agent writes to (its default trace file, the
    # one-agent lock) and reads its config from, as the Dockerfile's image has them.
    mkdir -p "$work/layer/usr/local/bin" "$work/layer/var/lib/pipetrace" \
      "$work/layer/run/pipetrace" "$work/layer/etc/pipetrace"
    install -m 0755 "$bin" "$work/layer/usr/local/bin/pipetrace"
    cp "$base" "$work/rootfs.tar"
    tar -C "$work/layer" --owner=0 --group=0 --numeric-owner -rf "$work/rootfs.tar" \
      ./usr/local/bin/pipetrace ./var/lib/pipetrace ./run/pipetrace ./etc/pipetrace
    import "$work/rootfs.tar" "$source" "${tags[0]}" \
      --change 'ENTRYPOINT ["/usr/local/bin/pipetrace"]' --change 'CMD ["agent"]' \
      --change 'USER root' --change 'WORKDIR /'
  fi
  tag_all "${tags[@]}"
  ;;
pipeline)
  tags=("$@")
  ((${#tags[@]})) || tags=("localhost/pipetrace-pipeline:latest")
  base=$(rootfs "$PIPELINE_PACKAGES")
  source=$(basename "$base")
  if up_to_date "${tags[0]}" "$source"; then
    say "${tags[0]} is up to date"
  else
    import "$base" "$source" "${tags[0]}" --change 'CMD ["snakemake", "--version"]' --change 'WORKDIR /work'
  fi
  tag_all "${tags[@]}"
  ;;
*)
  die "usage: $0 agent [BINARY [TAG...]] | pipeline [TAG...]"
  ;;
esac
printf '%s\n' "${tags[0]}"
