#!/usr/bin/env bash
# [isolation] speed figures: fresh.py alone, parallel (16 at once), service, sandboxed.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "from cuda_agent import sandbox; print(sandbox.support())"
sed -i 's|^export PYTHONPATH="$PWD/src"|export PYTHONPATH="/tmp/site:$PWD/src"|' benchmarks/gpu/fresh.sh
STEPS="${STEPS:-alone parallel service}" ALONE=3 N=${N:-32} JOBS=16 FRESH_LIMIT=${FRESH_LIMIT:-500} bash benchmarks/gpu/fresh.sh
cp "$OUT/fresh.log" "$OUT/fresh-log.txt" 2>/dev/null
