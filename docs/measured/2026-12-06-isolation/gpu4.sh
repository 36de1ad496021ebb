#!/usr/bin/env bash
# [isolation] verdicts with the sandbox: 66 KernelBench-correct corpus kernels (level 1), then the CUDA adversarial suite.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
if [[ " ${PARTS:-corpus adversarial} " == *" corpus "* ]]; then
  CUDA_AGENT_CACHE="$PWD/.cache/corpus" timeout ${CORPUS_LIMIT:-330} python3 benchmarks/corpus.py run --staged .corpus-iso --cli "python3 -m cuda_agent" --device cuda --jobs 16 \
      --deadline $(( ${CORPUS_LIMIT:-330} - 10 )) --grace 40 -- --no-compile-baseline > "$OUT/corpus_run.log" 2>&1
  echo "corpus: rc $? in $(( $(date +%s) - t0 )) s"; tail -5 "$OUT/corpus_run.log"
  python3 benchmarks/corpus.py pack --to "$OUT/corpus-runs.tar.gz" --runs-dir .corpus-iso/runs 2>&1 | tail -2 || true
  cp -r .corpus-iso/runs "$OUT/iso-runs" 2>/dev/null
fi
if [[ " ${PARTS:-corpus adversarial} " == *" adversarial "* ]]; then
  t1=$(date +%s)
  CUDA_AGENT_SERVICE=off timeout "${ADV_LIMIT:-240}" python3 benchmarks/adversarial.py --device cuda --jobs 16 --evaluator --cache-dir "$PWD/.cache/adv" > "$OUT/adversarial.log" 2>&1
  echo "adversarial: rc $? in $(( $(date +%s) - t1 )) s: $(tail -1 "$OUT/adversarial.log")"
  grep -v "^ok " "$OUT/adversarial.log" | grep -v "^$" | tail -15
  grep -c "^ok " "$OUT/adversarial.log"
fi
