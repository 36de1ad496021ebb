#!/usr/bin/env bash
# One call on the GPU machine for the [speed] stability target (nvidia-h200 will do), shortest
# summary last:
#   1. timing_noise.py on bare loops: with --epochs, whether a process's level follows its buffers'
#      placement or the GPU's state at the time, with the clocks and NVML's slowdown reasons (EPOCHS,
#      default 5, 0 skips it; GAP_MS, default 2: idle after each call); then which busy work before a
#      call makes a 0.4 ms TF32 matmul steady between processes (dtype, size, fixed or fresh output),
#      and the clocks and buffers' placement as controls; on a host of several NUMA nodes, again with
#      the processes pinned to the GPU's;
#   2. stability_probe.py: the evaluator's own calls of the matmul and ReLU solutions, by estimator;
#   3. the evaluator benchmark's stability step on the three slowest level-1 solutions.
# Extra arguments go to the last two (e.g. --set FIELD=VALUE to try an EvalConfig change); NOISE=0
# skips the bare loops; PROBE_LIMIT and LIMIT (seconds, 150 and 200) bound the probe and the
# stability step (with --set baseline_cache=false the probe needs more: eager is timed in every
# evaluation). AB="FIELD=VALUE ..." makes the probe an A/B in the same time windows (arm B: those
# fields; the arms' evaluations alternate); PROBE_ONLY picks its tasks (1_Square,19_ReLU); STEP=0
# skips the stability step. E.g.
#   device run: NOISE=0 AB=touch=tf32 PROBE_ONLY=1_Square bash benchmarks/device_stability.sh
# (carry .kb). Calls minutes apart differ more than the A/Bs tried so far (the same code: 0.9% and
# 6.7%), so compare arms of one call.
set -uo pipefail
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
[ -d .kb ] || { echo "device_stability.sh: needs a copy of KernelBench's task folders in .kb/ (carry .kb)"; exit 2; }
nodes=$(lscpu | awk -F: '/^NUMA node\(s\)/ {gsub(/ /, "", $2); print $2}')
echo "NUMA nodes: ${nodes:-unknown}"
t0=$(date +%s)
tag=$(printf %s "$*${AB:+ ab $AB}" | tr -c 'A-Za-z0-9_.-' '_')  # the output files of a run with arguments say which
probe_args=(--only "${PROBE_ONLY:-1_Square,19_ReLU}")
for kv in ${AB:-}; do probe_args+=(--ab "$kv"); done
modes=("")
[ "${nodes:-1}" -gt 1 ] && modes+=(--pin)
[ "${NOISE:-1}" = 0 ] && modes=()
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/stability-cache}"  # the probe's builds and baselines
if [ "${NOISE:-1}" != 0 ] && [ "${EPOCHS:-5}" != 0 ]; then  # what a process's level follows (GPU state)
    timeout 200 python3 benchmarks/timing_noise.py --procs 5 --epochs "${EPOCHS:-5}" --batches 20 --gap-ms "${GAP_MS:-2}" \
        --workloads matmul,relu > "$OUT/epochs.log" 2>&1
    echo "timing_noise --epochs: rc $? at $(( $(date +%s) - t0 )) s"
fi
for mode in "${modes[@]+"${modes[@]}"}"; do
    log="$OUT/noise${mode:+_pinned}.log"
    timeout 200 python3 benchmarks/timing_noise.py --procs 5 --batches "${BATCHES:-30}" --workloads matmul,relu \
        $mode > "$log" 2>&1
    echo "timing_noise ${mode:-(placed by the OS)}: rc $? at $(( $(date +%s) - t0 )) s"
done
timeout "${PROBE_LIMIT:-150}" python3 benchmarks/stability_probe.py --kernelbench .kb "${probe_args[@]}" "$@" \
    > "$OUT/probe${tag:+_$tag}.log" 2>&1
echo "stability_probe: rc $? at $(( $(date +%s) - t0 )) s"
if [ "${STEP:-1}" != 0 ]; then  # arm A's configuration only (the --set fields)
    timeout "${LIMIT:-200}" python3 benchmarks/evaluator.py --device cuda --steps stability --solutions benchmarks/solutions \
        --kernelbench .kb --only 1_Square,19_ReLU,23_Softmax --json "$OUT/stability${tag:+_$tag}.json" "$@" \
        > "$OUT/stability${tag:+_$tag}.log" 2>&1
    echo "stability step: rc $? at $(( $(date +%s) - t0 )) s"
fi
echo; echo "== bare loops: between processes, max/min - 1 of the medians (and other estimators)"
grep -h "^matmul\|^relu" "$OUT"/noise*.log 2>/dev/null
grep -h "epochs, max/min" "$OUT/epochs.log" 2>/dev/null
echo; echo "== the evaluator's calls (stability_probe), by estimator"
grep "^== \|spread between its" "$OUT/probe${tag:+_$tag}.log" | cut -c1-400  # per task: kept if cut short
[ "${STEP:-1}" = 0 ] && exit 0
echo; echo "== stability step"
grep -h "^stability" "$OUT/stability${tag:+_$tag}.log"
python3 -c "
import json, sys
f = json.load(open(sys.argv[1]))
print('max/min - 1 of the speedups:', {k: round(v - 1, 4) for k, v in f.get('stability', {}).items()})
" "$OUT/stability${tag:+_$tag}.json" 2>/dev/null
