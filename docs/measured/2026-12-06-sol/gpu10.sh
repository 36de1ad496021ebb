#!/usr/bin/env bash
# Session 4: [sol] --shapes 2 on the KernelBench-correct corpus kernels (.corpus-iso, 66), untimed: which
# real model-written kernels fail at other sizes. carry .whl .corpus-iso .probe
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
t0=$(date +%s)
CUDA_AGENT_CACHE="$PWD/.cache/corpus" timeout ${LIMIT:-200} python3 benchmarks/corpus.py run --staged .corpus-iso --runs-dir "$OUT/runs" \
    --cli "python3 -m cuda_agent" --device cuda --jobs ${JOBS:-8} --deadline $(( ${LIMIT:-200} - 5 )) --grace 25 --min-left 20 \
    -- --no-compile-baseline --no-timing --shapes 2 > "$OUT/corpus.log" 2>&1
echo "corpus --shapes 2: rc $? in $(( $(date +%s) - t0 )) s"; tail -3 "$OUT/corpus.log"
python3 - "$OUT/runs" <<'P'
import json, sqlite3, sys, glob, collections
n = collections.Counter()
for db in glob.glob(sys.argv[1] + "/*.sqlite"):
    for task, sample, res in sqlite3.connect(db).execute("select task, sample, result from results"):
        r = json.loads(res); g = r.get("generalization") or {}
        n[(r["correct"], g.get("generalizes"))] += 1
        if g.get("generalizes") is False or not r["correct"]:
            print(db.split("/")[-1], task, sample, r["correct"], g.get("generalizes"), [x["code"] for x in r["reasons"]][:4],
                  json.dumps(g)[:400])
print(dict(n))
P
