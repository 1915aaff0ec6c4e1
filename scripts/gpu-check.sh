#!/usr/bin/env bash
# The GPU check for a machine with an NVIDIA GPU and driver (the `device` machine): two CUDA
# processes of known shape under `pipetrace run`, one busy (8 GiB, a spinning kernel), one
# idle (2 GiB, no kernel), and nvidia-smi's own view of them mid-run. Writes the spans and
# a table comparing pipetrace's figures with nvidia-smi's to $OUT (default ./gpu-check).
# Usage: scripts/gpu-check.sh [pipetrace binary]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release/pipetrace}
out=${OUT:-./gpu-check}
mkdir -p "$out"
load="$here/tests/data/gpu/cuda_load.py"
command -v nvidia-smi >/dev/null || { echo "gpu-check: no nvidia-smi: not a GPU machine" >&2; exit 2; }
nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version --format=csv > "$out/gpus.csv"
PIPETRACE_METRICS__INTERVAL=500ms "$bin" run --output "$out/gpu.otlp.jsonl" -- sh -c "
  python3 $load busy 20 8 & python3 $load idle 20 2 &
  (sleep 10; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > $out/smi.csv) &
  wait" 2> "$out/pipetrace.log"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
smi = {int(p): int(m) * 1048576 for p, m in (l.split(", ") for l in open(f"{out}/smi.csv") if l.strip())}
def attrs(kv):
    v = lambda a: a.get("stringValue", a.get("intValue", a.get("doubleValue", a.get("arrayValue"))))
    return {a["key"]: v(a["value"]) for a in kv}
spans = []
for line in open(f"{out}/gpu.otlp.jsonl"):
    for rs in json.loads(line).get("resourceSpans", []):
        for ss in rs["scopeSpans"]:
            spans += [attrs(s.get("attributes", [])) for s in ss["spans"]]
rows = ["| pid | nvidia-smi memory | pipetrace peak | within 5% | SM utilisation | bottleneck |", "|---|---|---|---|---|---|"]
ok = True
for pid, used in sorted(smi.items()):
    s = next((s for s in spans if int(s.get("process.pid", 0)) == pid), None)
    if s is None:
        ok = False; rows.append(f"| {pid} | {used} | no span | no | | |"); continue
    peak = int(s.get("pipetrace.gpu.memory.peak", 0))
    within = abs(peak - used) <= 0.05 * used
    ok &= within
    rows.append(f"| {pid} | {used} | {peak} | {'yes' if within else 'NO'} | {s.get('pipetrace.gpu.utilization')} | {s.get('pipetrace.bottleneck')} |")
open(f"{out}/gpu-figures.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
sys.exit(0 if ok else 1)
PY
