#!/usr/bin/env bash
# One call on the GPU machine (nvidia-h200) for the [fresh] table: the build path's tests, then
# `benchmarks/fresh.py run` with the steps asked for, its figures in $OUT/fresh.json as they come.
#   device run: STEPS="tests alone parallel" bash benchmarks/gpu/fresh.sh      (carry .fresh)
#   then:       STEPS="kernelbench service" bash benchmarks/gpu/fresh.sh       (the same warm machine)
#   here:       python benchmarks/fresh.py table A/fresh.json B/fresh.json
# Stage the candidates first, on the development machine: `python benchmarks/fresh.py stage`.
# STEPS: `tests` (nvcc's stages and final-compile header against nvcc, and the GPU tests of the
# CUDA build path; TESTS picks the files), and any of fresh.py's steps (alone, parallel, kernelbench, service, memory), run in one
# fresh.py process. N, JOBS, ALONE pass to fresh.py (TENSOR_HEADER=0: --no-tensor-header; WARM_UP=0: --no-warm-up); TESTS_LIMIT (default 240) and FRESH_LIMIT
# (default 560 less what the tests took) bound them. The task baselines are measured first when
# they are not in the cache (115-180 s on a fresh machine); the cache is $PWD/.cache/fresh, kept on
# a warm machine between calls; its baselines and memory records are packed into
# $OUT/fresh-cache.tgz, and a copy of that file at .fresh/cache.tgz (carried with .fresh) is
# unpacked into a cache that lacks them, so that a fresh machine skips measuring them again.
set -uo pipefail
source "$(dirname "$0")/env.sh"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
CACHE="$PWD/.cache/fresh"
steps=" ${STEPS:-tests alone parallel} "
t_start=$(date +%s)
if [[ -f .fresh/cache.tgz && ! -d "$CACHE/baselines" ]]; then
    mkdir -p "$CACHE" && tar xzf .fresh/cache.tgz -C "$CACHE" && echo "baselines unpacked from .fresh/cache.tgz"
fi
if [[ $steps == *" tests "* ]]; then
    t0=$(date +%s)
    timeout "${TESTS_LIMIT:-240}" python3 -m pytest -q -p no:cacheprovider \
        ${TESTS:-tests/test_nvcc_stages.py tests/test_nvcc_pch.py tests/test_light_nvcc.py} > "$OUT/pytest_build.log" 2>&1
    echo "build-path tests (CPU and GPU): rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest_build.log")"
fi
fresh=()
for s in alone parallel kernelbench service memory; do
    [[ $steps == *" $s "* ]] && fresh+=("$s")
done
if (( ${#fresh[@]} )); then
    left=$(( ${FRESH_LIMIT:-560} - ($(date +%s) - t_start) ))
    t0=$(date +%s)
    timeout "$left" python3 benchmarks/fresh.py run --device cuda --steps "$(IFS=,; echo "${fresh[*]}")" \
        --alone "${ALONE:-3}" --n "${N:-32}" --jobs "${JOBS:-16}" --cache-dir "$CACHE" \
        $([[ ${TENSOR_HEADER:-} == 0 ]] && echo --no-tensor-header) $([[ ${WARM_UP:-} == 0 ]] && echo --no-warm-up) --json "$OUT/fresh.json" > "$OUT/fresh.log" 2>&1
    echo "fresh.py (${fresh[*]}): rc $? in $(( $(date +%s) - t0 )) s (limit $left s)"
    tar czf "$OUT/fresh-cache.tgz" -C "$CACHE" baselines memory 2>/dev/null
    grep -v "^\[" "$OUT/fresh.log" | tail -40
fi
