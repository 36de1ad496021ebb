#!/usr/bin/env bash
# [sol] SOL fractions on the GPU: cuda-agent bench over KernelBench level 1 with benchmarks/solutions (carry .kb, .whl).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE="$PWD/.cache/dev"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
timeout ${BENCH_LIMIT:-190} python3 -m cuda_agent bench .kb --level 1 --solutions benchmarks/solutions --policy kernelbench \
    --device cuda --jobs 4 --run level1-sol --out "$OUT/runs" 2> "$OUT/bench.err"
echo "bench: rc $? in $(( $(date +%s) - t0 )) s"
tail -3 "$OUT/bench.err"
sed -n '/^## Tasks/,$p' "$OUT/runs/level1-sol/report.md" | grep -v "no_solution" | head -20
python3 - <<'P'
import sqlite3, json, os
db = sqlite3.connect(os.environ.get("OUT", "/tmp/out") + "/runs/bench.sqlite")
for task, sample, res in db.execute("select task, sample, result from results"):
    r = json.loads(res); s = r.get("sol") or {}
    print(task, sample, r["correct"], r.get("speedup_eager"), s.get("bound"), s.get("time_ms"), s.get("fraction"), s.get("flops"), s.get("bytes"), s.get("why"))
P
