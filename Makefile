# The two commands the README opens with, and a few more. Each installs what is missing first.
.PHONY: setup demo test lint bench bench-accounting docs

CARGO ?= cargo

setup:
	@scripts/setup.sh

# The main job on an embedded default: trace the bundled Snakemake pipeline.
demo: setup
	$(CARGO) build --release -p pipetrace
	./target/release/pipetrace demo

# Every test: unit, then end-to-end with the real probes, engines and receivers.
# nextest ends with one summary line over every test (cargo test would end on doc-tests).
test: setup lint
	$(CARGO) build -p pipetrace
	$(CARGO) nextest run

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings

# Figures, not assertions: the fork/exec storm with and without pipetrace (resource
# accounting on, as always), then pipetrace's figures beside Snakemake's benchmark: and wait4.
bench: setup
	$(CARGO) build --release -p pipetrace -p pipetrace-e2e
	./target/release/bench-storm 20000 3
	./target/release/bench-accounting

bench-accounting: setup
	$(CARGO) build --release -p pipetrace -p pipetrace-e2e
	./target/release/bench-accounting

docs:
	$(CARGO) run -q -p pipetrace-semconv --bin semconv-docs
