#!/usr/bin/env bash
# Installs what pipetrace needs to build, run and test, on a fresh machine. Idempotent and
# quick when everything is there already. Needs root (apt-get, eBPF).
set -euo pipefail
say() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages: the demo's and tests' workflow engines and tools, setpriv and losetup
# for the privilege and fault tests, strace to prove what the agent never opens; podman with
# runc, and a static BusyBox for a rootfs (no image can be pulled here), for the container
# tests; Slurm and munge for the batch-scheduler tests (scripts/slurm-up.sh starts them); tmux
# for the live view's test in a real terminal; a JDK and Maven for the real Nextflow, whose
# artifacts scripts/nextflow.sh copies from Maven Central (`make nextflow`); debootstrap to
# build the agent's and pipelines' images from Debian's packages (`make image`) and, with
# systemd-analyze and man, to install and check the Debian package (`make dist`'s test);
# Prometheus and Alertmanager, which the deployment tests run against a real agent
# (installed without starting their services); Node.js and npm for Grafana's TraceQL
# grammar, which checks the dashboards' Tempo queries.
# `setup.sh demo` installs what `make demo` needs and no more: the build toolchain, Snakemake
# and the demo's tools. `setup.sh stack` (make stack) the demo's and, for Jaeger and the
# stack's script, Go (scripts/jaeger.sh builds Jaeger with it) and curl (scripts/stack.sh asks
# Jaeger's API with it). `setup.sh dist` (make dist) the build toolchain and cargo-deb.
# `setup.sh` (make test) installs everything.
# SETUP_DRY_RUN=1 says what the mode would install and changes nothing.
mode="${1:-all}"
case "$mode" in demo | stack | dist | all) ;; *) say "usage: $0 [demo|stack|dist|all]"; exit 2 ;; esac
dry_run="${SETUP_DRY_RUN:-}"
case "$0" in */*) here="${0%/*}" ;; *) here=. ;; esac
if [ "$mode" = demo ]; then
  declare -A pkg_for=([snakemake]=snakemake [bwa]=bwa [samtools]=samtools [sha256sum]=coreutils)
elif [ "$mode" = stack ]; then
  declare -A pkg_for=([snakemake]=snakemake [bwa]=bwa [samtools]=samtools [sha256sum]=coreutils [curl]=curl)
elif [ "$mode" = dist ]; then
  declare -A pkg_for=([dpkg-deb]=dpkg [gzip]=gzip)
else
  declare -A pkg_for=([snakemake]=snakemake [cwltool]=cwltool [bwa]=bwa [samtools]=samtools [sha256sum]=coreutils [setpriv]=util-linux [losetup]=mount [strace]=strace [openssl]=openssl [podman]=podman [runc]=runc [busybox]=busybox-static [slurmctld]=slurm-wlm [munged]=munge [tmux]=tmux [java]=default-jdk-headless [mvn]=maven [debootstrap]=debootstrap [prometheus]=prometheus [promtool]=prometheus [prometheus-alertmanager]=prometheus-alertmanager [amtool]=prometheus-alertmanager [node]=nodejs [npm]=npm [chromium]=chromium [systemd-analyze]=systemd [man]=man-db)
fi
# Go for Jaeger (make stack, make test): tests/jaeger/go.mod's `go` line is the least it
# builds with. Debian bookworm's golang-go is 1.19, too old and without toolchain switching,
# so Go's own release is installed as the go command fetches one itself: the module
# golang.org/toolchain from the Go module proxy, checked against the SHA-256 pinned here,
# into /usr/local/go (scripts/jaeger.sh finds it there when it is not on PATH). Keep
# go_version at or above go.mod's line.
go_version=1.26.8
declare -A go_sha256=([amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7)
go_root="${SETUP_GO_ROOT:-/usr/local/go}"
go_needed() {
  local want="" have go
  while read -r k v; do
    if [ "$k" = go ]; then want="$v"; fi
  done <"$here/../tests/jaeger/go.mod"
  go="$(command -v go || echo "$go_root/bin/go")"
  [ -x "$go" ] || return 0
  have="$("$go" env GOVERSION 2>/dev/null)" || return 0
  have="${have#go}"
  # 1.26.8 against 1.26: the minor versions decide.
  local hm="${have#*.}" wm="${want#*.}"
  ((${hm%%.*} < ${wm%%.*}))
}
install_go() {
  local arch module tmp proxy="${GOPROXY:-https://proxy.golang.org}"
  case "$(uname -m)" in x86_64) arch=amd64 ;; *) arch=other ;; esac
  [ -n "${go_sha256[$arch]:-}" ] || { say "no pinned Go release for $(uname -m): install Go $go_version or newer"; exit 1; }
  module="v0.0.1-go$go_version.linux-$arch"
  say "installing Go $go_version (golang.org/toolchain@$module, the Go module proxy) into $go_root"
  tmp="$(mktemp -d)"
  curl -fsSL -o "$tmp/go.zip" "${proxy%%[,|]*}/golang.org/toolchain/@v/$module.zip"
  echo "${go_sha256[$arch]}  $tmp/go.zip" | sha256sum -c --quiet -
  unzip -q "$tmp/go.zip" -d "$tmp"
  rm -rf "$go_root" && mkdir -p "${go_root%/*}" && mv "$tmp/golang.org/toolchain@$module" "$go_root"
  rm -rf "$tmp"
}
want_go=no
if [ "$mode" = stack ] || [ "$mode" = all ]; then
  go_needed && want_go=yes
fi
if [ "$want_go" = yes ]; then
  pkg_for[curl]=curl
  pkg_for[unzip]=unzip
fi

missing=()
for bin in "${!pkg_for[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${pkg_for[$bin]}")
done

if [ -n "$dry_run" ]; then
  say "would install Debian packages: ${missing[*]:-none}"
  [ "$want_go" = yes ] && say "would install Go $go_version"
  exit 0
fi
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No service starts at install (Prometheus would take port 9090): tests start their own.
  policy=/usr/sbin/policy-rc.d
  [[ -e $policy ]] || { printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && trap 'rm -f "$policy"' EXIT; }
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The demo takes the probes' object committed in probes/prebuilt (host/build.rs checks that
# it was built from the sources as they are): no eBPF toolchain, minutes saved.
ebpf_toolchain=yes
if [ "$mode" != all ] && [ -f "$here/../probes/prebuilt/pipetrace-probes" ]; then
  say "the probes' object comes from probes/prebuilt: no eBPF toolchain needed for make $mode"
  ebpf_toolchain=no
fi

if [ "$ebpf_toolchain" = yes ]; then
# The eBPF programs build with nightly's core library from source.
if ! rustup toolchain list | grep -q '^nightly'; then
  say "installing the nightly toolchain"
  rustup toolchain install nightly --profile minimal --component rust-src
elif ! rustup component list --toolchain nightly --installed | grep -q '^rust-src'; then
  say "adding rust-src to nightly"
  rustup component add rust-src --toolchain nightly
fi

# bpf-linker, built against nightly's own LLVM (no LLVM download): a folder of symlinks to
# nightly's libLLVM stands in for an LLVM install. It must outlive the build (the linker
# loads libLLVM from it), so it lives under the home directory, not /tmp.
if ! bpf-linker --version 2>/dev/null | grep -q '^bpf-linker 0\.13\.'; then
  sysroot=$(rustc +nightly --print sysroot)
  so=$(ls "$sysroot"/lib/libLLVM.so.* | head -n 1)
  major=$(rustc +nightly -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
  prefix="$HOME/.local/share/pipetrace-llvm"
  mkdir -p "$prefix/lib"
  ln -sf "$so" "$prefix/lib/libLLVM.so"
  ln -sf "$so" "$prefix/lib/$(basename "$so")"
  say "building bpf-linker 0.13 against nightly's LLVM $major (about 90 s)"
  LLVM_PREFIX="$prefix" cargo +nightly install --quiet bpf-linker@0.13.0 \
    --no-default-features --features "llvm-$major"
fi
fi

# Tracepoints are found through tracefs (pipetrace mounts it too when it can).
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || say "could not mount tracefs; run as root"
fi
[ "$want_go" = yes ] && install_go
if [ "$mode" = demo ]; then
  say "ready for the demo (make test installs the rest)"
  exit 0
fi
if [ "$mode" = stack ]; then
  say "ready for the stack: scripts/jaeger.sh builds Jaeger (make test installs the rest)"
  exit 0
fi
if [ "$mode" = dist ]; then
  if ! cargo deb --version >/dev/null 2>&1; then
    say "installing cargo-deb (about 2 min)"
    cargo install --quiet --locked cargo-deb
  fi
  say "ready to package (make test installs the rest)"
  exit 0
fi

# The test runner (on these machines already; installed from crates.io where it is not).
if ! cargo nextest --version >/dev/null 2>&1; then
  say "installing cargo-nextest"
  cargo install --quiet --locked cargo-nextest
fi

# cargo-fuzz, for the short fuzzing run of `make test` (make fuzz runs longer).
if ! cargo fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz"
  cargo install --quiet --locked cargo-fuzz
fi

# cargo-deb, which `make dist` (and its test) packages the binary with as a .deb.
if ! cargo deb --version >/dev/null 2>&1; then
  say "installing cargo-deb (about 2 min)"
  cargo install --quiet --locked cargo-deb
fi

# Current Snakemake (9, from PyPI) in its own venv, beside Debian's 7 and 8.30 below: the
# tests run every workflow of the corpus on all three.
snakemake9="$HOME/.local/share/pipetrace/snakemake9"
if ! "$snakemake9/bin/snakemake" --version 2>/dev/null | grep -q '^9\.'; then
  say "installing Snakemake 9 from PyPI into $snakemake9 (about 20 s)"
  rm -rf "$snakemake9"
  python3 -m venv "$snakemake9"
  "$snakemake9/bin/pip" install --quiet --disable-pip-version-check 'snakemake>=9,<10'
fi
# Its generic cluster executor, to submit jobs to the tests' Slurm as a cluster run does.
if ! "$snakemake9/bin/python" -c 'import snakemake_executor_plugin_cluster_generic' 2>/dev/null; then
  say "installing Snakemake 9's cluster-generic executor plugin"
  "$snakemake9/bin/pip" install --quiet --disable-pip-version-check snakemake-executor-plugin-cluster-generic
fi

# Snakemake 8.30 (PyPI) in its own venv: its records are written as 7's are
# (a new file renamed over the old) and its log as 9's. Only local runs: no executor plugin.
snakemake8="$HOME/.local/share/pipetrace/snakemake8"
if ! "$snakemake8/bin/snakemake" --version 2>/dev/null | grep -q '^8\.30\.'; then
  say "installing Snakemake 8.30 from PyPI into $snakemake8 (about 20 s)"
  rm -rf "$snakemake8"
  python3 -m venv "$snakemake8"
  "$snakemake8/bin/pip" install --quiet --disable-pip-version-check 'snakemake==8.30.*'
fi

# Prefect 3 (PyPI) in its own venv, with its OpenTelemetry extra: the tests run flows with
# its temporary local server, and one with Prefect's own tracing on.
prefect="$HOME/.local/share/pipetrace/prefect"
if ! "$prefect/bin/python" -c 'import prefect, sys, opentelemetry.sdk; sys.exit(prefect.__version__ != "3.8.8")' 2>/dev/null; then
  say "installing Prefect 3.8.8 from PyPI into $prefect (about 90 s)"
  [ -x "$prefect/bin/pip" ] || python3 -m venv "$prefect"
  "$prefect/bin/pip" install --quiet --disable-pip-version-check 'prefect[otel]==3.8.8' 'fastapi==0.139.*'
fi

# The newest Prefect 3 (PyPI) beside the pinned one, as `pip install prefect` gives it:
# installed once (remove the venv to take a newer one).
prefect_newest="$HOME/.local/share/pipetrace/prefect-newest"
if ! "$prefect_newest/bin/python" -c 'import prefect, opentelemetry.sdk' 2>/dev/null; then
  say "installing the newest Prefect 3 from PyPI into $prefect_newest (about 90 s)"
  [ -x "$prefect_newest/bin/pip" ] || python3 -m venv "$prefect_newest"
  "$prefect_newest/bin/pip" install --quiet --disable-pip-version-check 'prefect[otel]>=3,<4'
fi

# The RO-Crate community's validator (PyPI) in its own venv: the provenance tests judge
# `pipetrace provenance`'s crates with it, offline (they seed its HTTP cache themselves).
rocrate="$HOME/.local/share/pipetrace/rocrate"
if ! "$rocrate/bin/rocrate-validator" --version 2>/dev/null | grep -q '0\.13\.0'; then
  say "installing roc-validator 0.13.0 from PyPI into $rocrate (about 30 s)"
  rm -rf "$rocrate"
  python3 -m venv "$rocrate"
  "$rocrate/bin/pip" install --quiet --disable-pip-version-check 'roc-validator==0.13.0'
fi

# The independent OTLP collector the interoperability test relays through.
if ! python3 -c 'import rotel' 2>/dev/null; then
  say "installing the rotel collector (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --pre 'rotel==0.0.1a15'
fi

# Grafana's TraceQL grammar (npm), pinned by tests/traceql's lock file.
traceql="$here/../tests/traceql"
if [ ! -d "$traceql/node_modules/@grafana/lezer-traceql" ]; then
  say "installing Grafana's TraceQL grammar (npm)"
  npm ci --prefix "$traceql" --no-audit --no-fund --silent
fi

say "ready"
