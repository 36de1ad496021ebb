#!/usr/bin/env bash
# One call on the GPU machine for the [bench] issue: `cuda-agent bench` over KernelBench level 1 with
# the solutions in benchmarks/solutions (four honest ones in our layout, wrong and cheating samples in
# KernelBench's run layout; the other 96 tasks have none and count as failures), then the report.
#   device run: bash benchmarks/gpu/bench.sh   (carry .kb = a copy of KernelBench's task folders)
set -uo pipefail
source "$(dirname "$0")/env.sh"
export CUDA_AGENT_CACHE="$PWD/.cache/dev"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
t0=$(date +%s)
timeout -k 20 520 python3 -m cuda_agent bench .kb --level 1 --solutions benchmarks/solutions --policy kernelbench \
    --device cuda --jobs 4 --run h200-level1 --out "$OUT/runs" 2> "$OUT/bench.err"
echo "bench: rc $? in $(( $(date +%s) - t0 )) s"
tail -5 "$OUT/bench.err"
sed -n '/^## Tasks/,$p' "$OUT/runs/h200-level1/report.md" | grep -v "no_solution"
