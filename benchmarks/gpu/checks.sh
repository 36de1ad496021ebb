#!/usr/bin/env bash
# One call on the GPU machine (nvidia-h200) that re-checks the code on a GPU: the CUDA half of the
# adversarial suite (through an Evaluator: warm workers forked from its zygote), `cuda-agent bench`
# over KernelBench level 1 (bench.sh), and the GPU tests of the evaluator. Each step has its
# own limit so that one slow step cannot starve the others.
#   device run: bash benchmarks/gpu/checks.sh   (carry .kb = a copy of KernelBench's task folders)
# The CUDA half of the adversarial suite (144 verdicts) needs about 450 s on a cold machine, more
# than the other steps leave of one call: STEPS (default "adversarial bench gpu") picks the steps,
# e.g. STEPS=adversarial in one call and STEPS="bench gpu" in the next; ADV_LIMIT (default 480)
# bounds the suite. GPU_TESTS (default: the evaluator's three test files) picks the tests of the gpu
# step, e.g. GPU_TESTS=tests/ for every GPU test, with GPU_TESTS_LIMIT (default 300) to match;
# BENCH_LIMIT (default 150) bounds the bench step (a cold machine builds its four solutions first).
# ADV_HOW=--service runs the suite through a warm evaluation service instead of an Evaluator.
set -uo pipefail
source "$(dirname "$0")/env.sh"
export CUDA_AGENT_CACHE="$PWD/.cache/dev"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
steps=" ${STEPS:-adversarial bench gpu} "
if [[ $steps == *" adversarial "* ]]; then
    t0=$(date +%s)
    timeout "${ADV_LIMIT:-480}" python3 benchmarks/adversarial.py --device cuda --jobs 16 "${ADV_HOW:---evaluator}" \
        --cache-dir "$CUDA_AGENT_CACHE" > "$OUT/adversarial.log" 2>&1
    echo "adversarial: rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/adversarial.log")"
    grep -v "^ok " "$OUT/adversarial.log" | grep -v "^$" | tail -5
fi
if [[ $steps == *" bench "* ]]; then
    t0=$(date +%s)
    OUT="$OUT" timeout "${BENCH_LIMIT:-150}" bash benchmarks/gpu/bench.sh > "$OUT/bench.log" 2>&1
    echo "bench: rc $? in $(( $(date +%s) - t0 )) s"
    tail -12 "$OUT/bench.log"
fi
if [[ $steps == *" gpu "* ]]; then
    t0=$(date +%s)
    CUDA_AGENT_TEST_CACHE=$CUDA_AGENT_CACHE timeout "${GPU_TESTS_LIMIT:-300}" python3 -m pytest -q -m gpu \
        -p no:cacheprovider ${GPU_TESTS:-tests/test_transport.py tests/test_evaluator.py tests/test_evaluate.py} \
        > "$OUT/pytest_gpu.log" 2>&1
    echo "gpu tests: rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest_gpu.log")"
fi
