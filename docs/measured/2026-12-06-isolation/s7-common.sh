# sourced by each call: the bubblewrap wheel under /tmp/site, the source tree on PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
sed -i 's|^export PYTHONPATH="$PWD/src"|export PYTHONPATH="/tmp/site:$PWD/src"|' benchmarks/gpu/fresh.sh
