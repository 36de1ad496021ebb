#!/usr/bin/env bash
# One call on the GPU machine (nvidia-h200 will do): our verdicts on the real-world corpus
# (benchmarks/corpus.py run: `cuda-agent bench` per corpus run, resuming the stores in .corpus/runs),
# stopped in time by DEADLINE, then the stores and the comparison with KernelBench's verdicts into $OUT.
# Here first: python benchmarks/corpus.py select && python benchmarks/corpus.py stage
#   device run: bash benchmarks/gpu/corpus.sh   (carry .corpus)
# then here:   python benchmarks/corpus.py restore --from FILES_AT && python benchmarks/corpus.py report
# (the next call carries .corpus again, stores included, and goes on where this one stopped; the build
# cache, .cache/corpus, stays on the machine only while it is warm).
# DEADLINE (default 540): seconds from the start by which the run has stopped (keep it below the call's
# limit: where little device time is left, the limit is that, less the machine's start; the stores are
# packed into $OUT every PACK_EVERY (default 60) seconds anyway); GRACE (default 60): how
# long before it bench is stopped (SIGTERM: it stores the evaluations in flight, then exits; killed at
# the deadline); JOBS (default 8): bench --jobs; CONCURRENT (default 2): how many
# `corpus.py run --group I/N` go at once (each JOBS evaluations); DEVICE (default cuda; cpu: a dry run of the flow without a
# GPU, where these CUDA kernels cannot build). Extra arguments go to corpus.py run (e.g. --runs NAME);
# without any, bench gets --no-compile-baseline (the comparison is about verdicts, and torch.compile's
# warm-up per task would cost most of a call; every defence stays on, the timed calls included), as
# the stores of 2026-12-01 were made: a resume must pass bench the same arguments.
set -uo pipefail
source "$(dirname "$0")/env.sh"
export CUDA_AGENT_CACHE="$PWD/.cache/corpus"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
[ -f .corpus/selection.jsonl ] || { echo "corpus.sh: no .corpus/selection.jsonl: run corpus.py select and stage here, then carry .corpus"; exit 2; }
t0=$(date +%s)
mkdir -p "$CUDA_AGENT_CACHE" && [ -d .corpus/memory ] && cp -r .corpus/memory "$CUDA_AGENT_CACHE/"  # tasks' memory needs
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>&1
args=("$@"); [ ${#args[@]} -eq 0 ] && args=(-- --no-compile-baseline)
n=${CONCURRENT:-2}
runs=()
for i in $(seq 1 "$n"); do  # n groups of corpus runs at once (disjoint stores; one GPU lock in the cache dir)
    python3 benchmarks/corpus.py run --cli "python3 -m cuda_agent" --device "${DEVICE:-cuda}" --jobs "${JOBS:-8}" \
        --group "$i/$n" --deadline $(( ${DEADLINE:-540} - ($(date +%s) - t0) )) --grace "${GRACE:-60}" "${args[@]}" \
        > "$OUT/corpus_run_$i.log" 2>&1 &
    runs+=($!)
done
# The stores (RUN.sqlite), bench's logs (RUN.log) and the tasks' memory needs (memory/*.json: the next
# call admits by them) into $OUT every minute, so a call cut short by its limit still returns them.
pack() { python3 benchmarks/corpus.py pack --to "$OUT/corpus-runs.tar.gz" --memory "$CUDA_AGENT_CACHE/memory" "$@"; }
( while sleep "${PACK_EVERY:-60}"; do pack; done ) > /dev/null 2>&1 &
packer=$!
wait "${runs[@]}"
kill "$packer" 2>/dev/null
echo "corpus.py run x$n: done in $(( $(date +%s) - t0 )) s"
for i in $(seq 1 "$n"); do
    grep "bench exited\|error\|deadline" "$OUT/corpus_run_$i.log" | head -5
done
pack
python3 benchmarks/corpus.py report --dir "$OUT/report" 2>&1 | tail -12
