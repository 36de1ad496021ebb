#!/usr/bin/env bash
# One call on the GPU machine for the [speed] figures and the re-check of the defences on the final
# code: the CUDA half of the adversarial suite, then the speed targets, shortest table last.
#   device run: bash benchmarks/device_speed.sh   (carry .kb = a copy of KernelBench's task folders)
# Each step has its own time limit so that one slow step cannot starve the others of the 600 s.
set -uo pipefail
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE="$PWD/.cache/dev"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
t0=$(date +%s)
timeout 260 python3 benchmarks/adversarial.py --device cuda --jobs 16 --cache-dir "$CUDA_AGENT_CACHE" \
    > "$OUT/adversarial.log" 2>&1
echo "adversarial: rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/adversarial.log")"
grep -v "^ok " "$OUT/adversarial.log" | grep -v "^$" | tail -5
t0=$(date +%s)
extra=()
[ -d .kb ] && extra=(--solutions benchmarks/solutions --kernelbench .kb)
timeout 320 python3 benchmarks/evaluator.py --device cuda --json "$OUT/speed.json" "${extra[@]}" \
    > "$OUT/speed.log" 2>&1
tail -30 "$OUT/speed.log"
echo "evaluator benchmark: $(( $(date +%s) - t0 )) s"
