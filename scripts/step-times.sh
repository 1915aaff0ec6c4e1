#!/usr/bin/env bash
# Passes its input through, then says how long each step took: a step begins at a line
# `== NAME` (what `make test` prints as each step starts) and ends at the next one, or at the
# end of the input.
set -uo pipefail
start=$(printf '%(%s)T' -1)
step="" since=$start
steps=()
while IFS= read -r line; do
  printf '%s\n' "$line"
  if [[ $line == "== "* ]]; then
    now=$(printf '%(%s)T' -1)
    [ -n "$step" ] && steps+=("$step $((now - since))")
    step=${line#== } since=$now
  fi
done
now=$(printf '%(%s)T' -1)
[ -n "$step" ] && steps+=("$step $((now - since))")
echo "steps (seconds): ${steps[*]/%/ s,} all $((now - start)) s"
