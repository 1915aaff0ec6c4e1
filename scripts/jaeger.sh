#!/usr/bin/env bash
# Builds Jaeger v2, the real backend the tests read traces back from, for `make test` and
# `make stack` (the demo needs none): the Go module pinned by tests/jaeger/go.mod and go.sum, built once
# from the Go module proxy into the cache. Idempotent; prints the binary's path.
set -euo pipefail
say() { printf 'jaeger: %s\n' "$*" >&2; }
jaeger="$HOME/.cache/pipetrace/jaeger-v1.76.0"
if [ ! -x "$jaeger" ]; then
  # scripts/setup.sh stack (and the full setup) installs Go in /usr/local/go where it is missing.
  go="$(command -v go || echo /usr/local/go/bin/go)"
  [ -x "$go" ] || { say "Go is missing: run scripts/setup.sh stack (as root), which installs it"; exit 2; }
  say "building Jaeger v1.76.0 (Jaeger v2) from the Go module proxy (about 4 minutes on 2 CPUs)"
  mkdir -p "$(dirname "$jaeger")"
  (cd "$(dirname "$0")/../tests/jaeger" && "$go" build -trimpath -o "$jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$jaeger.tmp" "$jaeger"
fi
echo "$jaeger"
