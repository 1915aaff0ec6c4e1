# The two commands the README opens with, and a few more. Each installs what is missing first.
.PHONY: setup jaeger nextflow stack demo test test-kernels unit-unprivileged lint fuzz fuzz-smoke bench bench-tools bench-perf bench-accounting docs image dist probes-object

CARGO ?= cargo
SHELL := /bin/bash
# Each step of `make test` says its name first (`== lint`): .ci/run times the steps by them.
STEP = @echo "== $@"

setup:
	$(STEP)
	@scripts/setup.sh

# Jaeger v2 for the tests that read traces back from a real backend (not the demo's).
jaeger:
	$(STEP)
	@scripts/jaeger.sh >/dev/null

# The real Nextflow (Maven Central's artifacts) for the tests that trace a Nextflow run.
nextflow:
	$(STEP)
	@scripts/nextflow.sh >/dev/null

# Jaeger v2 and a node agent here, the demo traced into them (scripts/stack.sh; root). Installs
# the demo's world, Go for Jaeger and curl for the script (`scripts/setup.sh stack`).
stack:
	@scripts/setup.sh stack
	$(CARGO) build --release -p pipetrace
	@scripts/stack.sh

# The main job on an embedded default: trace the bundled Snakemake pipeline. Installs only
# what the demo needs (`scripts/setup.sh demo`), and says how long setup and the build took.
# The dev profile: optimizing some 300 crates for a three-second pipeline is not worth its
# minutes (the eBPF programs are optimized either way); `make test` reuses this build, and
# `make dist` / `make image` build release.
demo:
	@start=$$(date +%s) && scripts/setup.sh demo && set_up=$$(date +%s) && \
	 $(CARGO) build -p pipetrace && built=$$(date +%s) && \
	 ./target/debug/pipetrace demo; rc=$$?; \
	 [ -n "$${built:-}" ] && echo "make demo: setup $$((set_up - start)) s, build $$((built - set_up)) s"; \
	 exit $$rc

# Every test: unit, then end-to-end with the real probes, engines and receivers.
# nextest ends with one summary line over every test (cargo test would end on doc-tests).
# Two slots per CPU and one more: see the ci profile in .config/nextest.toml.
test: setup jaeger nextflow lint fuzz-smoke unit-unprivileged
	@echo "== build"
	$(CARGO) build -p pipetrace -p pipetrace-fake-nvml -p pipetrace-dist
	@echo "== e2e"
	$(CARGO) nextest run --profile ci --test-threads $$((2 * $$(nproc) + 1))

# Debian's own kernels (bookworm's 6.1, bookworm-backports' 6.12) booted under qemu's software
# emulation: doctor and a traced command in each, checked as on the host (tests/e2e/kernels.rs,
# scripts/test-kernels.sh; docs/kernels.md). A few minutes on two CPUs, so not in `make test`.
test-kernels: setup
	$(CARGO) build -p pipetrace -p pipetrace-fake-nvml
	$(CARGO) nextest run -p pipetrace-e2e -E 'test(/^kernels::/)' --run-ignored all

# The core's unit tests (the core crate's and the collector's) need no root, no kernel and
# no /proc of their own: run them as nobody (uid 65534) to keep it so.
unit-unprivileged: setup
	$(STEP)
	@# Built as `make test`'s own nextest run builds them (the default members' lib tests at
	@# once, features unified alike), so that run reuses them instead of compiling again.
	@mkdir -p target; set -o pipefail; $(CARGO) test --lib --no-run --message-format=json 2>target/unprivileged-build.log \
	 | python3 -c 'import json, sys; wanted = sys.argv[1:]; [print(m["executable"]) for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in wanted]' \
	   pipetrace_core pipetrace_host pipetrace_export pipetrace > target/unprivileged-units \
	 || { tail -40 target/unprivileged-build.log; exit 1; }
	@[ "$$(wc -l < target/unprivileged-units)" = 4 ] || { echo "unit-unprivileged: expected 4 test binaries, found: $$(cat target/unprivileged-units)"; exit 1; }
	@for bin in $$(cat target/unprivileged-units); do \
	 dir=$$(mktemp -d) && cp "$$bin" "$$dir/unit" && chmod -R a+rx "$$dir" && \
	 (cd "$$dir" && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$$dir" ./unit -q) ; \
	 rc=$$?; rm -rf "$$dir"; [ $$rc = 0 ] || exit $$rc; \
	done

# cargo-fuzz targets (tests/fuzz): config parsing, argv splitting and redaction, kernel event
# decoding. `make test` runs each for FUZZ_SECONDS, built unoptimized (`--dev`: an optimized
# sanitizer build of the collector and its dependencies took about 19 of CI's 46 minutes, the
# unoptimized one 5; the targets now build the core and the config crate alone, 66
# crates, not the collector's 300); `make fuzz` builds optimized and runs each for FUZZ_LONG
# seconds.
FUZZ_SECONDS ?= 20
FUZZ_BUILD ?= --dev
FUZZ_TARGETS = config argv events
fuzz-smoke: setup
	$(STEP)
	@# Built once, then the targets fuzzed side by side (each logs to target/fuzz-<target>.log).
	@mkdir -p target; cd tests/fuzz && $(CARGO) +nightly fuzz build $(FUZZ_BUILD) >../../target/fuzz-build.log 2>&1 \
	 || { tail -30 ../../target/fuzz-build.log; exit 1; }
	@pids=""; for t in $(FUZZ_TARGETS); do \
	  mkdir -p target/fuzz-corpus/$$t && \
	  (cd tests/fuzz && exec $(CARGO) +nightly fuzz run $(FUZZ_BUILD) $$t ../../target/fuzz-corpus/$$t seeds/$$t \
	     -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -print_final_stats=1 >../../target/fuzz-$$t.log 2>&1) & \
	  pids="$$pids $$!"; \
	done; rc=0; for p in $$pids; do wait $$p || rc=1; done; \
	for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $$t:"; grep -E '^(stat::number_of_executed_units|==.*ERROR|SUMMARY)|panicked' target/fuzz-$$t.log; \
	done; \
	[ $$rc = 0 ] || { echo "a fuzz target failed: see target/fuzz-<target>.log"; exit 1; }

FUZZ_LONG ?= 600
fuzz:
	$(MAKE) fuzz-smoke FUZZ_SECONDS=$(FUZZ_LONG) FUZZ_BUILD=

lint:
	$(STEP)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

# Figures, not assertions: the fork/exec storm alone, under the agent, under `pipetrace run`
# and under bpftrace (when installed); the probes' run counts and times; memory of both modes
# at 1k, 10k, 100k and 1M processes (a few minutes per mode at the top; BENCH_MEMORY_MAX
# stops earlier); spans and bytes per trace under the trace budget at 1k, 20k, 100k and 1M
# processes and for the Snakemake and Nextflow test pipelines; then pipetrace's figures
# beside Snakemake's benchmark: and wait4.
BENCH_MEMORY_MAX ?= 1000000
# bpftrace (the comparison) and bpftool (the probes' own run counts), from Debian.
bench-tools:
	@command -v bpftrace >/dev/null && command -v bpftool >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bpftrace bpftool >/dev/null)

bench: setup bench-tools
	$(CARGO) build --release -p pipetrace -p pipetrace-e2e
	./target/release/bench-storm 20000 3 --memory $(BENCH_MEMORY_MAX)
	./target/release/bench-accounting

# The performance bench (issue 5's figures, memory up to 1M processes in both modes, 20
# alternated repeats of each storm: about two hours and a half on two CPUs), written to
# docs/performance.md.
bench-perf: setup bench-tools
	$(CARGO) build --release -p pipetrace -p pipetrace-e2e
	./target/release/bench-perf --out docs/performance.md

bench-accounting: setup
	$(CARGO) build --release -p pipetrace -p pipetrace-e2e
	./target/release/bench-accounting

# The generated pages: the semconv registry and docs/configuration.md (tests fail when stale).
docs:
	$(CARGO) run -q -p pipetrace-semconv --bin semconv-docs
	$(CARGO) run -q -p pipetrace-config --bin config-docs
	PIPETRACE_WRITE_DOCS=1 $(CARGO) test -q -p pipetrace --test architecture_docs

# The agent's container image, localhost/pipetrace:<version> and :latest, with podman from a
# debootstrap'd minimal Debian bookworm (no registry is pulled; the rootfs is cached under
# ~/.cache/pipetrace-images) and the release binary. docs/deploy.md says how to run it.
image: setup
	$(CARGO) build --release -p pipetrace
	scripts/image.sh agent $${CARGO_TARGET_DIR:-target}/release/pipetrace

# The Debian package and the release tarball, in target/dist (scripts/dist.sh; docs/install.md):
# the release binary, the systemd unit (installed, not enabled), a commented
# /etc/pipetrace/config.yaml, bash/zsh/fish completions and man pages generated from the CLI.
# Says how long the build and the packaging took.
dist:
	@scripts/setup.sh dist
	@start=$$(date +%s) && \
	 $(CARGO) build --release -p pipetrace -p pipetrace-dist && built=$$(date +%s) && \
	 scripts/dist.sh $${CARGO_TARGET_DIR:-target}/release $${CARGO_TARGET_DIR:-target}/dist && \
	 echo "make dist: release build $$((built - start)) s, packaging $$(($$(date +%s) - built)) s"

# The probes' object committed in probes/prebuilt, for machines without the eBPF toolchain
# (`make demo` then skips installing it): rebuilt from the sources here, with their digest.
probes-object: setup
	$(CARGO) build -p pipetrace-host
	@out=$$(ls -td $${CARGO_TARGET_DIR:-target}/debug/build/pipetrace-host-*/out | while read d; do \
	   [ -f "$$d/pipetrace-probes.sources.sha256" ] && echo "$$d" && break; done) && \
	 cp "$$out/pipetrace-probes" probes/prebuilt/pipetrace-probes && \
	 cp "$$out/pipetrace-probes.sources.sha256" probes/prebuilt/sources.sha256 && \
	 echo "probes/prebuilt: $$(cat probes/prebuilt/sources.sha256)"
