#!/usr/bin/env bash
# Device check of the sandboxed evaluator: the CUDA examples, then the CUDA adversarial suite through an Evaluator.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE="$PWD/.cache/dev" CUDA_AGENT_SERVICE=off
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
pwd; ls -ld "$PWD" /root 2>&1
python3 -c "from cuda_agent import sandbox; print(sandbox.support())"
E=src/cuda_agent/examples
for c in elementwise/cuda_single.py elementwise/cuda_workspace row_softmax/cuda_single.py; do
  t0=$(date +%s.%N)
  timeout 300 python3 -m cuda_agent eval $E/${c%%/*}/task.py $E/$c --device cuda --json > "$OUT/$(echo $c | tr / _).json" 2> "$OUT/$(echo $c | tr / _).err"
  echo "$c rc $? $(python3 -c "import sys,json; r=json.load(open(sys.argv[1])); print(r['correct'], r['reward'], [x['code'] for x in r['reasons']], r['isolation'].get('level'), r['isolation'].get('user'), {k: r['phases_s'].get(k) for k in ('load','build','total')})" "$OUT/$(echo $c | tr / _).json" 2>&1 | tail -2)"
  tail -3 "$OUT/$(echo $c | tr / _).err"
done
# the same again: cached builds
c=elementwise/cuda_single.py; timeout 300 python3 -m cuda_agent eval $E/elementwise/task.py $E/$c --device cuda --json > "$OUT/again.json" 2>/dev/null
python3 -c "import sys,json; r=json.load(open(sys.argv[1])); print('again', r['correct'], r['reward'], r['phases_s'])" "$OUT/again.json"
ls .cache/dev/pch .cache/dev/pch-nvcc .cache/dev/builds/inline 2>&1 | head -20
t0=$(date +%s)
timeout "${ADV_LIMIT:-200}" python3 benchmarks/adversarial.py --device cuda --jobs 16 --evaluator --cache-dir "$CUDA_AGENT_CACHE" > "$OUT/adversarial.log" 2>&1
echo "adversarial: rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/adversarial.log")"
grep -v "^ok " "$OUT/adversarial.log" | grep -v "^$" | tail -15
grep -c "^ok " "$OUT/adversarial.log"
