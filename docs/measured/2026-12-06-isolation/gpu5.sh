#!/usr/bin/env bash
# [isolation] session 3: PARTS of: alone+service (fresh.py), corpus12 (the 12 memory-bound corpus kernels, few jobs),
# parallel (fresh.py 16 at once, N candidates), adversarial (CUDA suite).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
git log --oneline -1 2>/dev/null
sed -i 's|^export PYTHONPATH="$PWD/src"|export PYTHONPATH="/tmp/site:$PWD/src"|' benchmarks/gpu/fresh.sh
P=" ${PARTS:-alone corpus12} "
if [[ $P == *" alone "* ]]; then
  OUT=$OUT/alone STEPS="alone service" ALONE=3 JOBS=16 FRESH_LIMIT=${ALONE_LIMIT:-200} bash benchmarks/gpu/fresh.sh
fi
if [[ $P == *" service "* ]]; then
  OUT=$OUT/service STEPS="service" JOBS=16 FRESH_LIMIT=${SERVICE_LIMIT:-170} bash benchmarks/gpu/fresh.sh
fi
if [[ $P == *" corpus12 "* ]]; then
  t0=$(date +%s)
  CUDA_AGENT_CACHE="$PWD/.cache/corpus" timeout ${CORPUS_LIMIT:-200} python3 benchmarks/corpus.py run --staged .corpus-iso12 --cli "python3 -m cuda_agent" --device cuda --jobs ${CJOBS:-3} \
      --deadline $(( ${CORPUS_LIMIT:-200} - 10 )) --grace 40 -- --no-compile-baseline > "$OUT/corpus12_run.log" 2>&1
  echo "corpus12: rc $? in $(( $(date +%s) - t0 )) s"; tail -5 "$OUT/corpus12_run.log"
  cp -r .corpus-iso12/runs "$OUT/iso12-runs" 2>/dev/null
fi
if [[ $P == *" parallel "* ]]; then
  OUT=$OUT/parallel STEPS="parallel" N=${N:-128} JOBS=16 FRESH_LIMIT=${PAR_LIMIT:-540} bash benchmarks/gpu/fresh.sh
fi
if [[ $P == *" adversarial "* ]]; then
  t1=$(date +%s)
  CUDA_AGENT_SERVICE=off timeout "${ADV_LIMIT:-280}" python3 benchmarks/adversarial.py --device cuda --jobs 16 --evaluator --cache-dir "$PWD/.cache/adv" > "$OUT/adversarial.log" 2>&1
  echo "adversarial: rc $? in $(( $(date +%s) - t1 )) s: $(tail -1 "$OUT/adversarial.log")"
  grep -v "^ok " "$OUT/adversarial.log" | grep -v "^$" | tail -15
  grep -c "^ok " "$OUT/adversarial.log"
fi
