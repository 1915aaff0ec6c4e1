#!/usr/bin/env bash
# Boots one of Debian's own kernels under qemu's software emulation (TCG) with a minimal
# root (an initramfs of pipetrace, busybox, the accounting workloads and their libraries),
# runs `pipetrace doctor` and a traced command there, and leaves what the guest wrote in
# OUTDIR: doctor.txt/.rc, run.log/.rc, t.otlp.jsonl, ru-*.json (wait4's truth), kernel
# (uname -r), the guest's uptime-{init,doctor,run}, boot-seconds (qemu's) and console.log.
#
#   scripts/test-kernels.sh 6.1|6.12 OUTDIR
#
# 6.1 is bookworm's kernel, 6.12 bookworm-backports'. Each is fetched once with apt (a
# private configuration: the host's sources stay as they are) and cached under
# ~/.cache/pipetrace/kernels/<series>/; PIPETRACE_KERNELS_REFRESH=1 fetches the newest again.
# Binaries: PIPETRACE_BIN, WORKLOAD, RUSAGE_OF (default: target/debug's). QEMU_ACCEL=kvm
# where /dev/kvm works and speed matters more than emulating what CI has.
set -euo pipefail
die() { printf 'test-kernels: %s\n' "$*" >&2; exit 1; }
say() { printf 'test-kernels: %s\n' "$*" >&2; }

[ $# = 2 ] || die "usage: $0 6.1|6.12 OUTDIR"
series=$1
out=$2
case $series in
  6.1) suite=bookworm ;;
  6.12) suite=bookworm-backports ;;
  *) die "unknown kernel series '$series' (6.1: bookworm, 6.12: bookworm-backports)" ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
pipetrace=${PIPETRACE_BIN:-$target/debug/pipetrace}
workload=${WORKLOAD:-$target/debug/workload}
rusage_of=${RUSAGE_OF:-$target/debug/rusage-of}
for b in "$pipetrace" "$workload" "$rusage_of"; do
  [ -x "$b" ] || die "$b is missing: cargo build -p pipetrace -p pipetrace-e2e"
done
command -v apt-get >/dev/null || die "apt-get is needed to fetch Debian's kernels"
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
  die "Debian's archive keyring is missing: apt-get install debian-archive-keyring"
if ! command -v qemu-system-x86_64 >/dev/null; then
  # Both kernels' tests start at once: the second waits for the first one's dpkg lock.
  say "installing qemu-system-x86"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    qemu-system-x86 >/dev/null || die "could not install qemu-system-x86"
fi
busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || ! file -L "$busybox" | grep -q 'statically linked'; then
  say "installing busybox-static"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq busybox-static >/dev/null ||
    die "could not install busybox-static"
  busybox=$(command -v busybox)
fi

# --- the kernel, from the cache or the mirror ---
cache=$HOME/.cache/pipetrace/kernels
kdir=$cache/$series
if [ ! -f "$kdir/vmlinuz" ] || [ -n "${PIPETRACE_KERNELS_REFRESH:-}" ]; then
  apt=$cache/apt
  mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/parts" "$apt/prefs"
  key=/usr/share/keyrings/debian-archive-keyring.gpg
  mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
  printf 'deb [signed-by=%s] %s %s main\n' "$key" "$mirror" bookworm "$key" "$mirror" \
    bookworm-backports >"$apt/sources.list"
  opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
    -o "Dir::Etc::Preferences=$apt/prefs/none" -o "Dir::Etc::PreferencesParts=$apt/prefs"
    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt" -o "Dir::State::status=/dev/null"
    -o Acquire::Languages=none -o APT::Sandbox::User=root -q)
  # Both series share the package index: one reads it at a time (apt-get update does not
  # wait for another's lists lock, it fails at once).
  exec 9>"$apt/pipetrace.lock"
  flock 9
  say "reading $suite's package index from $mirror"
  apt-get "${opts[@]}" update >/dev/null || die "apt-get update from $mirror failed"
  # The metapackage of the suite names the current image package of the series.
  image=$(apt-cache "${opts[@]}" show "linux-image-amd64/$suite" |
    sed -n 's/^Depends: \(linux-image-[^ ,]*\).*/\1/p' | head -1)
  case $image in
    linux-image-"$series".*) ;;
    *) die "$suite's linux-image-amd64 depends on '$image', not a $series kernel" ;;
  esac
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  say "downloading $image"
  (cd "$tmp" && apt-get "${opts[@]}" download "$image" >/dev/null) ||
    die "apt-get download $image failed"
  dpkg-deb -x "$tmp"/*.deb "$tmp/x"
  mkdir -p "$kdir"
  cp "$tmp"/x/boot/vmlinuz-* "$kdir/vmlinuz.part" && mv "$kdir/vmlinuz.part" "$kdir/vmlinuz"
  dpkg-deb -f "$tmp"/*.deb Package Version >"$kdir/package"
  rm -rf "$tmp"
  trap - EXIT
  flock -u 9
fi

# --- the root: busybox, the binaries (debug info stripped) and their libraries ---
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/root" "$out/guest"
rootfs=$out/root
mkdir -p "$rootfs"/{bin,proc,sys,dev,tmp,run,out,root}
cp "$busybox" "$rootfs/bin/busybox"
for b in "$pipetrace" "$workload" "$rusage_of"; do
  objcopy --strip-debug "$b" "$rootfs/bin/$(basename "$b")"
  # Each library where the dynamic loader looks for it, the loader included.
  ldd "$b" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
done
cp "$root/scripts/kernels-init.sh" "$rootfs/init"
chmod +x "$rootfs/init"
(cd "$rootfs" && find . | "$busybox" cpio -o -H newc 2>/dev/null) >"$out/initrd.cpio"
rm -rf "$rootfs"

# --- the boot: the console to console.log, the guest's files as base64 on the second port ---
accel=${QEMU_ACCEL:-tcg}
say "booting $(tr '\n' ' ' <"$kdir/package")under qemu ($accel)"
start=$(date +%s.%N)
timeout "${KERNEL_BOOT_TIMEOUT:-900}" qemu-system-x86_64 -accel "$accel" -m 1024 -smp 1 \
  -display none -monitor none -no-reboot \
  -serial "file:$out/console.log" -serial "file:$out/guest.b64" \
  -kernel "$kdir/vmlinuz" -initrd "$out/initrd.cpio" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init" ||
  die "qemu failed or timed out (console: $out/console.log)"
end=$(date +%s.%N)
rm -f "$out/initrd.cpio"
grep -q '^PIPETRACE-GUEST-END$' "$out/guest.b64" ||
  die "the guest wrote no results (console: $out/console.log)"
sed '/^PIPETRACE-GUEST-END$/,$d' "$out/guest.b64" | base64 -d | tar xzf - -C "$out" ||
  die "the guest's results are damaged ($out/guest.b64)"
rm -f "$out/guest.b64"
awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f\n", e - s }' >"$out/boot-seconds"
say "$(cat "$out/kernel"): qemu ran $(cat "$out/boot-seconds") s; doctor exit $(cat "$out/doctor.rc"), run exit $(cat "$out/run.rc")"
