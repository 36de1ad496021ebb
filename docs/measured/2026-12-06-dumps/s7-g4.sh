#!/usr/bin/env bash
# Session 7 call 4 (H100): [sol] gemini level 1 problem 75 again with --shapes 2 (out of memory at a
# larger size now skipped), then [dumps] CUDA-L1's h100.json, level 1, judged against its own
# references, 16 at once, cut by BENCH_LIMIT (the store comes back; the run resumes from it).
set -uo pipefail
source docs/measured/2026-12-06-isolation/s7-common.sh
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
t0=$(date +%s)
CUDA_AGENT_CACHE="$PWD/.cache/corpus" timeout 110 python3 benchmarks/corpus.py run --staged .corpus-s75 --runs-dir "$OUT/s75" \
    --cli "python3 -m cuda_agent" --device cuda --jobs 1 --deadline 105 --grace 25 --min-left 20 \
    -- --no-compile-baseline --no-timing --shapes 2 > "$OUT/s75.log" 2>&1
echo "s75: rc $? in $(( $(date +%s) - t0 )) s"
python3 - "$OUT/s75" <<'P'
import json, sqlite3, sys, glob
for db in glob.glob(sys.argv[1] + "/*.sqlite"):
    for task, sample, res in sqlite3.connect(db).execute("select task, sample, result from results"):
        r = json.loads(res); g = r.get("generalization") or {}
        print(task, r["correct"], g.get("generalizes"), [(t["scale"], t["ok"], t["reason"]) for t in g.get("tried", [])],
              [(s["scale"], s["why"][:160]) for s in g.get("skipped", [])])
P
t0=$(date +%s)
CUDA_AGENT_CACHE="$PWD/.cache/l1" timeout ${BENCH_LIMIT:-200} python3 -m cuda_agent bench .kb --solutions .l1/h100.json --tasks-from-dump \
    --level 1 --device cuda --jobs 16 --run cuda-l1-h100 --out "$OUT/l1" > "$OUT/l1.log" 2>&1
echo "bench CUDA-L1 level 1: rc $? in $(( $(date +%s) - t0 )) s"; tail -25 "$OUT/l1.log"
python3 -c "
import sqlite3, sys
c = sqlite3.connect('$OUT/l1/bench.sqlite'); print([r for r in c.execute(\"select name from sqlite_master where type='table'\")])
" 2>&1 | tail -3
