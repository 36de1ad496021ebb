#!/usr/bin/env bash
# Session 4 (2026-12-06 09:00): [sol] the examples' SOL on the GPU, --shapes on CUDA (the hard-coded-size case
# and its honest twin), level-1 SOL with the retry-alone memory fix, the GPU tests of the examples.
# carry .whl .kb .probe. PARTS picks: shapes examples level1 tests.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE="$PWD/.cache/dev"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
git log --oneline -1 2>/dev/null
P=" ${PARTS:-shapes examples level1 tests} "
if [[ $P == *" shapes "* ]]; then
  t0=$(date +%s)
  for only in hardcoded_numel any_size_ext; do
    CUDA_AGENT_SERVICE=off timeout 150 python3 benchmarks/adversarial.py --device cuda --only $only --jobs 2 --evaluator --cache-dir "$PWD/.cache/adv" >> "$OUT/shapes.log" 2>&1
    echo "adversarial $only: rc $?"
  done
  echo "shapes: $(( $(date +%s) - t0 )) s"; cat "$OUT/shapes.log" | tail -8
fi
if [[ $P == *" examples "* ]]; then
  t0=$(date +%s)
  timeout ${EX_LIMIT:-170} python3 -m cuda_agent bench examples --device cuda --jobs 4 --out "$OUT/runs" --run examples-cuda > "$OUT/examples.out" 2> "$OUT/examples.err"
  echo "bench examples: rc $? in $(( $(date +%s) - t0 )) s"; tail -25 "$OUT/examples.out"
fi
if [[ $P == *" level1 "* ]]; then
  t0=$(date +%s)
  timeout ${BENCH_LIMIT:-190} python3 -m cuda_agent bench .kb --level 1 --solutions benchmarks/solutions --policy kernelbench \
      --device cuda --jobs 4 --run level1-sol --out "$OUT/runs" > "$OUT/level1.out" 2> "$OUT/level1.err"
  echo "bench level 1: rc $? in $(( $(date +%s) - t0 )) s"
  python3 - <<'P'
import sqlite3, json, os
db = sqlite3.connect(os.environ.get("OUT", "/tmp/out") + "/runs/bench.sqlite")
for run, task, sample, res in db.execute("select run, task, sample, result from results"):
    r = json.loads(res); s = r.get("sol") or {}
    if run != "level1-sol": continue
    print(task, sample, r["correct"], r.get("speedup_eager"), s.get("bound"), s.get("time_ms"), s.get("fraction"), s.get("why"))
    for x in r.get("reasons", []):
        if x.get("code") in ("reference_error", "out_of_memory", "retried_alone"):
            print("   ", x.get("code"), (x.get("message") or "")[-700:].replace("\n", " | "))
P
fi
if [[ $P == *" default "* ]]; then  # the default cache (root's ~/.cache, under a 0700 home): sandboxes as uid 65534
  t0=$(date +%s); ls -ld ~ | cut -c1-10
  env -u CUDA_AGENT_CACHE timeout 150 python3 -m cuda_agent eval src/cuda_agent/examples/elementwise/task.py \
      src/cuda_agent/examples/elementwise/cuda_single.py --device cuda --json > "$OUT/default.json" 2> "$OUT/default.err"
  echo "eval with the default cache: rc $? in $(( $(date +%s) - t0 )) s"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['correct'], r['reward'], r.get('speedup_eager'), r['isolation'].get('user'), [x['code'] for x in r['reasons']])" "$OUT/default.json"
  ls -la ~/.cache/cuda-agent | head; tail -3 "$OUT/default.err"
fi
if [[ $P == *" tests "* ]]; then
  t0=$(date +%s)
  timeout ${TESTS_LIMIT:-200} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_examples.py > "$OUT/pytest_examples.log" 2>&1
  echo "gpu tests (examples, with SOL): rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest_examples.log")"
  grep -E "^(FAILED|ERROR)|assert" "$OUT/pytest_examples.log" | head -20
fi
