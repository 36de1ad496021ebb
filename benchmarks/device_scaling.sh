#!/usr/bin/env bash
# One call on nvidia-h200-x2: is the two-GPU shortfall in our harness or in the host?
#   device run: bash benchmarks/device_scaling.sh   (carry .kb)
# 1. one harness on GPU 0 alone (it fills the shared caches first);
# 2. two harnesses at once, one per GPU, each the same work as 1 (if each keeps 1's rate, the
#    coupling is in one harness driving both GPUs; if both slow down, it is in the host or driver);
# 3. driver_coupling.py: context, cudaMalloc and IPC opens on GPU 0, then on both at once.
set -uo pipefail
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
cache=$(mktemp -d /tmp/scaling-cache.XXXX)
common=(--device cuda --steps throughput --rounds "${ROUNDS:-2}" --set "cache_dir=$cache")
[ -d .kb ] && common+=(--solutions benchmarks/solutions --kernelbench .kb)
t0=$(date +%s)
timeout 280 python3 benchmarks/evaluator.py "${common[@]}" --gpus 0 --json "$OUT/alone.json" > "$OUT/alone.log" 2>&1
echo "alone: rc $? at $(( $(date +%s) - t0 )) s"
for g in 0 1; do
    timeout 220 python3 benchmarks/evaluator.py "${common[@]}" --gpus "$g" --json "$OUT/split$g.json" \
        > "$OUT/split$g.log" 2>&1 &
done
wait
echo "split: done at $(( $(date +%s) - t0 )) s"
timeout 200 python3 benchmarks/driver_coupling.py --seconds "${SECONDS_PER_OP:-4}" 2>&1 | tee "$OUT/driver.log"
echo "driver: done at $(( $(date +%s) - t0 )) s"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
for name in ("alone", "split0", "split1"):
    p = Path(sys.argv[1]) / f"{name}.json"
    if not p.exists():
        print(f"{name}: no figures"); continue
    f = json.loads(p.read_text())
    ph = f.get("phases_under_load_1gpu", {})
    print(f"{name:7s} {f.get('evals_per_minute_1gpu', 0):6.1f}/min busy {f.get('machine_busy_1gpu')} "
          f"cpu/eval {f.get('machine_cpu_s_per_eval_1gpu')} "
          + " ".join(f"{k}={v:.2f}" for k, v in ph.items() if v >= 0.05))
PY
