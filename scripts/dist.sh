#!/usr/bin/env bash
# Packages a built pipetrace as a Debian package (cargo-deb) and a release tarball:
#
#   scripts/dist.sh [--fast] [BIN_DIR [OUT]]
#
# BIN_DIR (default target/release) holds the `pipetrace` and `pipetrace-dist-assets`
# binaries of one build: `make dist` builds them in release; the package test
# (tests/tests/e2e/dist.rs) passes the debug build `make test` has already made, so that the
# test goes through this very script without a second build. Writes, in OUT (default
# target/dist), and prints, one path a line:
#
#   pipetrace_<version>-1_<arch>.deb    /usr/bin/pipetrace, the systemd unit (not enabled),
#                                       /etc/pipetrace/config.yaml (a conffile, every key
#                                       commented out), man pages, bash/zsh/fish completions
#   pipetrace-<version>-<arch>.tar.gz   the same files under pipetrace-<version>-<arch>/
#                                       (docs/install.md says how to install it)
#
# --fast compresses less (cargo deb --fast, gzip -1): the test's choice, a minute less of
# xz on two CPUs for a package some 20% larger; the files are the same.
set -euo pipefail
say() { printf 'dist: %s\n' "$*" >&2; }
die() {
  say "$*"
  exit 1
}

root=$(cd "$(dirname "$0")/.." && pwd)
fast=()
gzip_level=-6
if [[ ${1:-} == --fast ]]; then
  fast=(--fast)
  gzip_level=-1
  shift
fi
bin_dir=${1:-$root/target/release}
out=${2:-$root/target/dist}

cargo deb --version >/dev/null 2>&1 ||
  die "cargo-deb is not installed: run scripts/setup.sh (or cargo install --locked cargo-deb)"
command -v dpkg-deb >/dev/null || die "dpkg-deb is not installed: this packaging runs on Debian"
for b in pipetrace pipetrace-dist-assets; do
  [[ -x $bin_dir/$b ]] ||
    die "no $b in $bin_dir: build both first (cargo build --release -p pipetrace -p pipetrace-dist)"
done

version=$("$bin_dir/pipetrace" --version | awk '{print $2}')
[[ -n $version ]] || die "$bin_dir/pipetrace --version said no version"
arch=$(dpkg --print-architecture)
mkdir -p "$out"
out=$(cd "$out" && pwd)
deb="$out/pipetrace_${version}-1_${arch}.deb"
tarball="$out/pipetrace-${version}-${arch}.tar.gz"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# cargo-deb reads its assets from target/release/ of the target directory it is given: the
# stage's, holding this build's binary and generated files, whichever profile built them.
assets="$stage/target/release"
mkdir -p "$assets/dist"
cp "$bin_dir/pipetrace" "$assets/pipetrace"
"$bin_dir/pipetrace-dist-assets" "$assets/dist" >/dev/null
gzip -9n "$assets"/dist/man/*.1

say "cargo deb (pipetrace $version, $arch, binary from $bin_dir)"
(cd "$root" && CARGO_TARGET_DIR="$stage/target" cargo deb -p pipetrace-dist --no-build \
  "${fast[@]}" --output "$deb" >/dev/null) || die "cargo deb failed (see above)"

# The tarball holds what the package installs. Nothing in /lib (cargo-deb puts the unit in
# /usr/lib): extracted over /, a tarball's lib/ would replace a merged-/usr system's symlink.
top="pipetrace-${version}-${arch}"
tree="$stage/tree/$top"
mkdir -p "$tree"
dpkg-deb -x "$deb" "$tree"
[[ ! -e $tree/lib ]] || die "the package installs into /lib: move those files to usr/lib"
tar -C "$stage/tree" --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@${SOURCE_DATE_EPOCH:-$(date +%s)}" -cf - "$top" | gzip "$gzip_level" -n >"$tarball.part"
mv "$tarball.part" "$tarball"

say "$(du -h "$deb" | cut -f1) $deb"
say "$(du -h "$tarball" | cut -f1) $tarball"
printf '%s\n' "$deb" "$tarball"
