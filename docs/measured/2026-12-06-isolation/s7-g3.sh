#!/usr/bin/env bash
# Session 7 call 3: the CUDA adversarial suite through warm evaluators (each candidate in its own
# sandbox), then the 4 corpus kernels with 8 GiB inputs, few at once.
set -uo pipefail
source docs/measured/2026-12-06-isolation/s7-common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
P=" ${PARTS:-adversarial corpus4} "
if [[ $P == *" adversarial "* ]]; then
  t1=$(date +%s)
  CUDA_AGENT_SERVICE=off timeout "${ADV_LIMIT:-280}" python3 benchmarks/adversarial.py --device cuda --jobs 16 --evaluator --cache-dir "$PWD/.cache/adv" > "$OUT/adversarial.log" 2>&1
  echo "adversarial: rc $? in $(( $(date +%s) - t1 )) s: $(tail -1 "$OUT/adversarial.log")"
  grep -v "^ok " "$OUT/adversarial.log" | grep -v "^$" | tail -15
  grep -c "^ok " "$OUT/adversarial.log"
fi
if [[ $P == *" corpus4 "* ]]; then
  t0=$(date +%s)
  CUDA_AGENT_CACHE="$PWD/.cache/corpus" timeout ${CORPUS_LIMIT:-200} python3 benchmarks/corpus.py run --staged .corpus-iso4 --cli "python3 -m cuda_agent" --device cuda --jobs ${CJOBS:-2} \
      --deadline $(( ${CORPUS_LIMIT:-200} - 10 )) --grace 40 -- --no-compile-baseline > "$OUT/corpus4_run.log" 2>&1
  echo "corpus4: rc $? in $(( $(date +%s) - t0 )) s"; tail -5 "$OUT/corpus4_run.log"
  cp -r .corpus-iso4/runs "$OUT/iso4-runs" 2>/dev/null
  python3 - "$OUT/iso4-runs" <<'Q'
import json, sqlite3, sys, glob
for db in glob.glob(sys.argv[1] + "/**/*.sqlite", recursive=True):
    for task, sample, res in sqlite3.connect(db).execute("select task, sample, result from results"):
        r = json.loads(res)
        print(db.split("/")[-1], task, sample, r["correct"], r["reward"], r.get("speedup_eager"), [x["code"] for x in r["reasons"]][:4])
Q
fi
