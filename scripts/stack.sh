#!/usr/bin/env bash
# `make stack`: a tracing backend and a node agent on this machine, no Docker. Starts Jaeger v2
# (scripts/jaeger.sh builds it; deploy/jaeger/jaeger.yaml: in-memory store) and a pipetrace
# node agent sending to it, runs the demo Snakemake pipeline under that agent, waits for its
# trace in Jaeger and prints where to look. Both keep running: `scripts/stack.sh stop` stops them.
# Settings: STACK_DIR (where logs, pids and the demo's copy go), JAEGER_QUERY,
# JAEGER_QUERY_GRPC, JAEGER_OTLP_GRPC and JAEGER_OTLP_HTTP (host:port), PIPETRACE (the
# binary; default target/release/pipetrace).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'stack: %s\n' "$*" >&2; }
dir="${STACK_DIR:-${TMPDIR:-/tmp}/pipetrace-stack}"
export JAEGER_QUERY="${JAEGER_QUERY:-127.0.0.1:16686}"
export JAEGER_QUERY_GRPC="${JAEGER_QUERY_GRPC:-127.0.0.1:16685}"
export JAEGER_OTLP_GRPC="${JAEGER_OTLP_GRPC:-127.0.0.1:4317}"
export JAEGER_OTLP_HTTP="${JAEGER_OTLP_HTTP:-127.0.0.1:4318}"
pipetrace="${PIPETRACE:-target/release/pipetrace}"

stop() {
  for p in agent jaeger; do
    if [ -f "$dir/$p.pid" ]; then
      kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
      rm -f "$dir/$p.pid"
    fi
  done
}
if [ "${1:-}" = stop ]; then stop; say "stopped"; exit 0; fi

[ "$(id -u)" = 0 ] || { say "the agent loads eBPF probes: run it as root (sudo make stack)"; exit 2; }
[ -x "$pipetrace" ] || { say "$pipetrace is not built: run make stack (it builds it)"; exit 2; }
for program in snakemake curl; do
  command -v "$program" >/dev/null || { say "$program is missing: run scripts/setup.sh stack"; exit 2; }
done
for addr in "$JAEGER_QUERY" "$JAEGER_QUERY_GRPC" "$JAEGER_OTLP_GRPC" "$JAEGER_OTLP_HTTP"; do
  if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
    say "$addr is taken (a stack already up? scripts/stack.sh stop); set JAEGER_QUERY, \
JAEGER_QUERY_GRPC, JAEGER_OTLP_GRPC or JAEGER_OTLP_HTTP to free host:ports"
    exit 2
  fi
done
jaeger="$(scripts/jaeger.sh)"
stop
# Only what an earlier stack left: STACK_DIR may be a folder of the user's.
mkdir -p "$dir" && rm -rf "$dir"/demo-* "$dir/state" "$dir"/*.log
trap 'say "failed: logs in $dir"; stop' ERR

wait_for() { # $1: what, $2: seconds, rest: a command that succeeds once it is up
  local what="$1" n="$2"; shift 2
  for _ in $(seq "$((n * 4))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  say "$what did not come up in ${n} s"; return 1
}

# OTEL_TRACES_EXPORTER: Jaeger would send its own traces to localhost:4317.
OTEL_TRACES_EXPORTER=none "$jaeger" --config deploy/jaeger/jaeger.yaml >"$dir/jaeger.log" 2>&1 &
echo $! >"$dir/jaeger.pid"
api="http://$JAEGER_QUERY/api"
wait_for "Jaeger's query API ($api)" 60 curl -sf "$api/services"

PIPETRACE_LOG=info PIPETRACE_DIAGNOSIS__STATE_DIR="$dir/state" \
  "$pipetrace" --endpoint "http://$JAEGER_OTLP_GRPC" agent >"$dir/agent.log" 2>&1 &
echo $! >"$dir/agent.pid"
wait_for "the agent (its log: $dir/agent.log)" 60 grep -q "pipetrace agent watching" "$dir/agent.log"

# The pipeline is named after its folder: one of this stack's own, whatever else runs here.
demo="demo-$$"
say "running the demo pipeline (Snakemake) under the agent, as $demo"
cp -r collector/demo "$dir/$demo"
(cd "$dir/$demo" && snakemake --cores 2 --quiet >"$dir/demo.log" 2>&1)
query="$api/traces?service=pipetrace&lookback=1h&limit=20"
mine="$query&operation=run%20$demo"
run_in_jaeger() { curl -sf "$mine" | grep -q '"traceID"'; }
wait_for "the demo's trace in Jaeger" 60 run_in_jaeger
trace=$(curl -sf "$mine" | grep -o '"traceID":"[0-9a-f]*"' | head -1 | cut -d'"' -f4)
spans=$(curl -sf "$api/traces/$trace" | grep -o '"operationName"' | wc -l)
trap - ERR
cat <<MSG
The demo's trace is in Jaeger: $spans spans, trace $trace.
  runs (traces) of the last hour:  curl -s '$query'
  this run:                        curl -s '$api/traces/$trace'
  task names (operations):         curl -s '$api/services/pipetrace/operations'
Jaeger's web UI is not in its Go module: http://$JAEGER_QUERY/ serves a placeholder page;
the API above answers. Send your own runs: pipetrace --endpoint http://$JAEGER_OTLP_GRPC run -- CMD
(or run them anywhere on this host: the agent traces every engine run).
Logs in $dir. Stop both: scripts/stack.sh stop
MSG
