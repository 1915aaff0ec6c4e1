#!/usr/bin/env bash
# Builds Jaeger v2, the real backend the tests read traces back from, for `make test` only
# (the demo needs none): the Go module pinned by tests/jaeger/go.mod and go.sum, built once
# from the Go module proxy into the cache. Idempotent; prints the binary's path.
set -euo pipefail
say() { printf 'jaeger: %s\n' "$*" >&2; }
jaeger="$HOME/.cache/pipetrace/jaeger-v1.76.0"
if [ ! -x "$jaeger" ]; then
  say "building Jaeger v1.76.0 (Jaeger v2) from the Go module proxy (about 4 minutes on 2 CPUs)"
  mkdir -p "$(dirname "$jaeger")"
  (cd "$(dirname "$0")/../tests/jaeger" && go build -trimpath -o "$jaeger.tmp" github.com/jaegertracing/jaeger/cmd/jaeger)
  mv "$jaeger.tmp" "$jaeger"
fi
echo "$jaeger"
