#!/usr/bin/env bash
# One call on the GPU machine for the [dumps] issue: a published dump evaluated as `cuda-agent bench`
# reads it (no preparation), cut by LIMIT (SIGTERM: the running evaluations finish; KILL GRACE seconds later); the run store comes back in $OUT/runs/bench.sqlite and
# the next call resumes from it when carried back as .dumps/bench.sqlite. The tasks' measured baselines
# (with the cache's secret that signs them) come back in $OUT/dumps-cache.tgz; carried back as
# .dumps/cache.tgz they are unpacked into an empty cache, so a fresh machine of the same kind (device,
# driver and software are in each entry's key) does not measure them again.
#   device run: DUMP=.dumps/h100.json ARGS="--tasks-from-dump --policy kernelbench" bash benchmarks/gpu/dumps.sh
#               DUMP=.dumps/raw_data.json ARGS="--policy kernelbench" RUN=leaderboard bash benchmarks/gpu/dumps.sh
#   (carry .whl .kb .dumps: KernelBench's level folders in .kb, the dump files in .dumps)
# Then here: cuda-agent report RUN --db FILES_AT/runs/bench.sqlite --out FILES_AT/runs
set -uo pipefail
source "$(dirname "$0")/env.sh"
export CUDA_AGENT_CACHE="$PWD/.cache/dumps"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT/runs"
DUMP="${DUMP:-.dumps/h100.json}"
RUN="${RUN:-$(basename "${DUMP%.*}")}"
[[ -f .dumps/bench.sqlite && ! -f "$OUT/runs/bench.sqlite" ]] && cp .dumps/bench.sqlite "$OUT/runs/bench.sqlite"
if [[ -f .dumps/cache.tgz && ! -d "$CUDA_AGENT_CACHE/baselines" ]]; then
    mkdir -p "$CUDA_AGENT_CACHE" && tar xzf .dumps/cache.tgz -C "$CUDA_AGENT_CACHE" && echo "baselines unpacked from .dumps/cache.tgz"
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
t0=$(date +%s)
# shellcheck disable=SC2086  # ARGS holds several options
timeout -k "${GRACE:-30}" "${LIMIT:-500}" python3 -m cuda_agent bench .kb --solutions "$DUMP" ${ARGS:-} --device cuda \
    --jobs "${JOBS:-16}" --run "$RUN" --out "$OUT/runs" > "$OUT/$RUN.log" 2> "$OUT/$RUN.err"
rc=$?
echo "bench $DUMP: rc $rc in $(( $(date +%s) - t0 )) s (124: cut by LIMIT; run again with the store carried back)"
grep -v "evaluating in-process" "$OUT/$RUN.err" | tail -8
tar czf "$OUT/dumps-cache.tgz" -C "$CUDA_AGENT_CACHE" baselines 2>/dev/null
python3 - "$OUT/runs/bench.sqlite" "$RUN" <<'P'
import collections, json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("select result from results where run = ?", (sys.argv[2],)).fetchall()
codes = collections.Counter()
for (res,) in rows:
    r = json.loads(res)
    codes["correct" if r["correct"] else ([x["code"] for x in r["reasons"] if x.get("kind") != "info"] or ["?"])[0]] += 1
print(f"{len(rows)} verdicts stored:", dict(codes.most_common()))
P
