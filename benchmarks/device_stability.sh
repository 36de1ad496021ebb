#!/usr/bin/env bash
# One call on the GPU machine for the [speed] stability target: is the spread between processes a
# matter of which NUMA node times the calls? timing_noise.py on bare loops, the processes placed by
# the OS and then pinned to the GPU's node; then the evaluator's stability step with pin_cpus.
#   device run: bash benchmarks/device_stability.sh   (carry .kb; on nvidia-h200-x2 the GPUs may sit
#   on different sockets, on nvidia-h200 the host may have one node: the first line says)
set -uo pipefail
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
lscpu | grep -i "^NUMA node" ; nvidia-smi topo -m 2>/dev/null | head -4
t0=$(date +%s)
for mode in "" --pin; do
    timeout 150 python3 benchmarks/timing_noise.py --procs 5 --batches "${BATCHES:-60}" --workloads matmul,relu \
        $mode > "$OUT/noise${mode:+_pinned}.log" 2>&1
    echo "timing_noise ${mode:-(placed by the OS)}: rc $? at $(( $(date +%s) - t0 )) s"
    grep -v "^$" "$OUT/noise${mode:+_pinned}.log" | tail -12
done
extra=()
[ -d .kb ] && extra=(--solutions benchmarks/solutions --kernelbench .kb)
timeout "${LIMIT:-260}" python3 benchmarks/evaluator.py --device cuda --steps stability --set pin_cpus=true \
    --json "$OUT/stability_pinned.json" "${extra[@]}" > "$OUT/stability_pinned.log" 2>&1
echo "stability, pin_cpus: rc $? at $(( $(date +%s) - t0 )) s"
grep "^stability\|SM MHz\|^[0-9]" "$OUT/stability_pinned.log" | tail -8
python3 -c "
import json, sys
f = json.load(open(sys.argv[1]))
for name, v in f.get('stability_by_estimator', {}).items():
    print(name, 'max/min - 1 by estimator:', v)
" "$OUT/stability_pinned.json" 2>/dev/null
