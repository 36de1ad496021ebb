#!/usr/bin/env bash
# One call on the GPU machine: the evaluator's throughput (one GPU, then all) as the code stands
# (A), then with EvalConfig fields changed (B), in the same caches, and the two side by side.
#   device run: bash benchmarks/gpu/ab.sh reuse_judges=false   (carry .kb)
# ROUNDS (default 3): passes over the candidates per GPU; LIMIT_A, LIMIT_B: seconds per run.
set -uo pipefail
source "$(dirname "$0")/env.sh"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
[ $# -ge 1 ] || { echo "usage: ab.sh FIELD=VALUE ... (the B side's EvalConfig changes)" >&2; exit 2; }
cache=$(mktemp -d /tmp/ab-cache.XXXX)
common=(--device cuda --steps throughput --rounds "${ROUNDS:-3}" --set "cache_dir=$cache")
[ -d .kb ] && common+=(--solutions benchmarks/solutions --kernelbench .kb)
b=(); for kv in "$@"; do b+=(--set "$kv"); done
t0=$(date +%s)
timeout "${LIMIT_A:-330}" python3 benchmarks/evaluator.py "${common[@]}" --json "$OUT/a.json" > "$OUT/a.log" 2>&1
echo "A: rc $? at $(( $(date +%s) - t0 )) s"
timeout "${LIMIT_B:-220}" python3 benchmarks/evaluator.py "${common[@]}" "${b[@]}" --json "$OUT/b.json" > "$OUT/b.log" 2>&1
echo "B ($*): rc $? at $(( $(date +%s) - t0 )) s"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
for side in ("a", "b"):
    p = Path(sys.argv[1]) / f"{side}.json"
    if not p.exists():
        print(f"{side}: no figures"); continue
    f = json.loads(p.read_text())
    for n in (1, 2, 4, 8):
        if f"evals_per_minute_{n}gpu" not in f:
            continue
        ph = f.get(f"phases_under_load_{n}gpu", {})
        print(f"{side} {n} GPU: {f[f'evals_per_minute_{n}gpu']:6.1f}/min busy {f.get(f'machine_busy_{n}gpu')} "
              f"cpu/eval {f.get(f'machine_cpu_s_per_eval_{n}gpu')} judges kept {f.get(f'judges_reused_{n}gpu')} "
              f"incorrect {f.get(f'not_correct_under_load_{n}gpu')} "
              + " ".join(f"{k}={v:.2f}" for k, v in ph.items() if v >= 0.05))
    if "scaling" in f:
        print(f"{side} scaling {f['scaling']:.2f}x")
PY
