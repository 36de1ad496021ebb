#!/usr/bin/env bash
# Session 4: [isolation] on the H200: the default cache as root (sandboxes as uid 65534), then fresh.py
# alone, service, parallel (16 at once, N fresh candidates; cut by LIMIT, its rows kept as they come).
# carry .whl .fresh .probe
set -uo pipefail
t_start=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
t0=$(date +%s)
env -u CUDA_AGENT_CACHE timeout 120 python3 -m cuda_agent eval src/cuda_agent/examples/elementwise/task.py \
    src/cuda_agent/examples/elementwise/cuda_single.py --device cuda --json > "$OUT/default.json" 2> "$OUT/default.err"
echo "eval with the default cache: rc $? in $(( $(date +%s) - t0 )) s"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['correct'], r['reward'], r.get('speedup_eager'), r['isolation'].get('user'), [x['code'] for x in r['reasons']])" "$OUT/default.json"
grep -v "evaluating in-process" "$OUT/default.err" | tail -3
CACHE="$PWD/.cache/fresh"
if [[ -f .fresh/cache.tgz && ! -d "$CACHE/baselines" ]]; then mkdir -p "$CACHE" && tar xzf .fresh/cache.tgz -C "$CACHE"; fi
left=$(( ${LIMIT:-560} - ($(date +%s) - t_start) ))
t0=$(date +%s)
timeout "$left" python3 benchmarks/fresh.py run --device cuda --steps "${STEPS:-alone,service,parallel}" --alone 3 --n "${N:-128}" \
    --jobs 16 --cache-dir "$CACHE" --json "$OUT/fresh.json" > "$OUT/fresh.log" 2>&1
echo "fresh.py: rc $? in $(( $(date +%s) - t0 )) s (limit $left s)"
tar czf "$OUT/fresh-cache.tgz" -C "$CACHE" baselines memory 2>/dev/null
grep -v "^\[" "$OUT/fresh.log" | tail -30
python3 - "$OUT/fresh.json" <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d.get("parallel_rows") or []
if rows and "parallel" not in d:
    last = max(r["done_s"] for r in rows)
    print(f"parallel cut: {len(rows)} done in {last} s: {60 * len(rows) / last:.2f} a minute")
for k in ("alone", "service", "parallel"):
    if k in d:
        print(k, json.dumps(d[k])[:600])
P
