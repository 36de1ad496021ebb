#!/usr/bin/env bash
# One call on the GPU machine (nvidia-h200-x2 for the scaling figure) for the [speed] targets: the
# whole evaluator benchmark, shortest table last. The defences and GPU tests: checks.sh.
#   device run: bash benchmarks/gpu/speed.sh   (carry .kb = a copy of KernelBench's task folders)
set -uo pipefail
source "$(dirname "$0")/env.sh"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
t0=$(date +%s)
extra=()
[ -d .kb ] && extra=(--solutions benchmarks/solutions --kernelbench .kb)
timeout 560 python3 benchmarks/evaluator.py --device cuda --json "$OUT/speed.json" "${extra[@]}" "$@" \
    > "$OUT/speed.log" 2>&1
echo "evaluator benchmark: rc $? in $(( $(date +%s) - t0 )) s"
grep -v "^\s*$" "$OUT/speed.log" | tail -40
