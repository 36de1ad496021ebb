#!/usr/bin/env bash
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE="$PWD/.cache/dev" CUDA_AGENT_SERVICE=off
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
E=src/cuda_agent/examples
for c in elementwise/cuda_workspace elementwise/cuda_single.py; do
  timeout 200 python3 -m cuda_agent eval $E/${c%%/*}/task.py $E/$c --device cuda --json > "$OUT/ex.json" 2> "$OUT/ex.err"
  echo "$c rc $? $(python3 -c "import sys,json; r=json.load(open(sys.argv[1])); print(r['correct'], r['reward'], [(x['code'], x['message'][:200]) for x in r['reasons']], r['isolation'].get('user'), {k: r['phases_s'].get(k) for k in ('load','build','total')})" "$OUT/ex.json" 2>&1 | tail -2)"
done
export PYTHONPATH="/tmp/site:$PWD/src"
sed -i 's|^export PYTHONPATH="$PWD/src"|export PYTHONPATH="/tmp/site:$PWD/src"|' benchmarks/gpu/fresh.sh
STEPS="alone" ALONE=3 FRESH_LIMIT=${FRESH_LIMIT:-360} bash benchmarks/gpu/fresh.sh
cp "$OUT/fresh.log" "$OUT/fresh-log.txt" 2>/dev/null
ls -la .cache/fresh/pch-nvcc .cache/fresh/pch .cache/dev/pch-nvcc 2>&1 | head -20
