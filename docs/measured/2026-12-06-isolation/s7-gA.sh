#!/usr/bin/env bash
# Session 7 call A (H100): the sandbox's maps mode on the GPU (root caller, setpriv): the default
# cache's eval, then the CUDA adversarial suite and the 4 corpus kernels with 8 GiB inputs (g3.sh).
set -uo pipefail
source docs/measured/2026-12-06-isolation/s7-common.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
id; command -v setpriv; nproc
python3 -c "from cuda_agent import sandbox; s=sandbox.support(); print(s, 'maps', s.maps)" 2>&1 | tail -3
t0=$(date +%s)
env -u CUDA_AGENT_CACHE timeout 150 python3 -m cuda_agent eval src/cuda_agent/examples/elementwise/task.py \
    src/cuda_agent/examples/elementwise/cuda_single.py --device cuda --json > "$OUT/default.json" 2> "$OUT/default.err"
echo "eval with the default cache: rc $? in $(( $(date +%s) - t0 )) s"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['correct'], r['reward'], r.get('speedup_eager'), json.dumps(r['isolation'])[:900], [x['code'] for x in r['reasons']])" "$OUT/default.json"
grep -v "evaluating in-process" "$OUT/default.err" | tail -5
if ! python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['correct'] else 1)" "$OUT/default.json"; then
  echo "NOT CORRECT: GPU tests of the examples instead"
  timeout 300 python3 -m pytest -x -q -p no:cacheprovider -m gpu tests/test_examples.py > "$OUT/pytest-examples.log" 2>&1; tail -30 "$OUT/pytest-examples.log"
  exit 1
fi
bash docs/measured/2026-12-06-isolation/s7-g3.sh
