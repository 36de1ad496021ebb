#!/usr/bin/env bash
# One call on the GPU machine: environment, GPU tests, then the cold/warm evaluation table.
#   device run: bash benchmarks/device_run.sh   (carry .kb = a copy of KernelBench's task folders)
set -uo pipefail
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/tmp/ca-cache
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
t0=$(date +%s)
python3 benchmarks/eval_pairs.py --examples --solutions benchmarks/solutions --kernelbench .kb \
    --device cuda --cold-parallel 4 --out "$OUT/pairs.json" 2>&1 | tee "$OUT/pairs.log" | grep -v "^cold\|^warm"
echo "eval_pairs: $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
# The GPU tests reuse the build cache the evaluations above filled.
CUDA_AGENT_TEST_CACHE=$CUDA_AGENT_CACHE python3 -m pytest -q -m gpu -p no:cacheprovider tests/ "$@" \
    2>&1 | tee "$OUT/pytest_gpu.log" | tail -25
echo "gpu tests: $(( $(date +%s) - t0 )) s"
