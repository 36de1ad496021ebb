"""Replay a measured `fresh.py` batch through the memory ledger's admission, sped up, to compare
admission policies on the phases the GPU machine measured (no GPU needed).

    python benchmarks/diagnostics/admission_replay.py FRESH.json --cache CACHE --budget-gib 19.9

Each of the batch's candidates is replayed as `fresh.py` submitted it (round robin over the staged
tasks, `--jobs` at a time): it sleeps its row's phases before the admission (workers, reference
setup, load), holds its task's memory need (`memory.need`, from the memory records under CACHE:
`fresh-cache.tgz` unpacked) in a `MemoryLedger` for its device phases (weights, correctness,
timing), then sleeps its teardown. Every duration is multiplied by `--scale`, the ledger's poll and
queueing intervals too. Three policies:
- `greedy`: the ledger before it queued jobs (a job is admitted whenever it fits; one larger than
  the budget only when nothing is promised). Replayed on the batch it was measured with, it says
  how far the model is from the machine;
- `arrival`: a queue in the order jobs began to wait (a job larger than the budget, or any job
  that has waited 2 s, is queued; none that began to wait later passes it);
- `ledger`: `locks.MemoryLedger` as it is (a job larger than the budget is queued, and while one
  is, no job that is not is admitted).

What the model leaves out: CPU contention changing with the order of work (each phase keeps its
measured length), the pool's spares closed and started again around the largest tasks, and the
GPU's own contention between evaluations admitted together.

Printed: for each policy, candidates a minute, the median admission wait of the tasks above and
below `--big-gib`, and the share of the job slots' time spent waiting for admission.

Last run (2-core machine, 2026-12-05, `--repeat 2`, two replays each; memory records of the H100
batch's cache):
- the H100 batch of 2026-12-05 (70 rows, measured 9.1 a minute; `--budget-gib 19.9`): greedy 14.8-15.3
  a minute, big tasks' median wait 71-73 s; arrival 11.9-12.2, 50 s; ledger 16.5-16.6, 16 s (small
  tasks' 22-29 s, against 0 with greedy);
- the H200 batch of call 5 (48 rows, measured 19.5 a minute; `--budget-gib 67.9`): greedy 19.9-20.8,
  big 17.5-24.9 s; arrival 17.9-18.0; ledger 20.8-21.1, 12.8-17.5 s (no task is above the budget
  there: the ledger admits as greedy does).
The model is close on the H200 and about 1.7 times too fast on the H100, where the pool's spares
closed and started again around each large task (and the cold workers meanwhile) are left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from cuda_agent.evaluate import memory
from cuda_agent.evaluate.locks import MemoryLedger
from cuda_agent.tasks import load_task

PRE = ("policy", "workers", "reference_setup", "load")
DEVICE = ("weights", "correctness", "timing_lock_wait", "timing")
GIB = 1 << 30


class GreedyLedger(MemoryLedger):
    """The ledger without its queue: a job is admitted whenever it fits, one larger than the budget
    whenever nothing is promised."""

    def _verdict(self, need, promised, waiting, queued):
        return "admit" if promised + need <= self.budget or not promised else "wait"


class ArrivalLedger(MemoryLedger):
    """A queue in the order jobs began to wait: a job larger than the budget that waits, and any
    job that has waited `queue_after_s`, is queued, and no job that began to wait after a queued
    one is admitted before it (a job that began before it may be)."""

    queue_after_s = 2.0

    def _verdict(self, need, promised, waiting, queued):
        if not any(k < queued for k in waiting) and (promised + need <= self.budget or not promised):
            return "admit"
        since_ns = int(queued[len(self.WAITING):].split("|", 1)[0])  # (the key holds when it began to wait)
        late = time.time_ns() - since_ns >= self.queue_after_s * 1e9
        return "queue" if need > self.budget or late else "wait"


def replay(rows_by_task, order, needs, budget, jobs, scale, ledger_cls):
    tmp = Path(tempfile.mkdtemp(prefix="admission-replay-"))
    ledger = ledger_cls(tmp / "ledger.json", budget)
    ledger.POLL_S = MemoryLedger.POLL_S * scale  # (an instance attribute: the class's stays as it is)
    ledger.queue_after_s = ArrivalLedger.queue_after_s * scale
    picks = {t: 0 for t in rows_by_task}
    plan = []
    for task in order:  # each task's measured rows in turn
        rows = rows_by_task[task]
        plan.append((task, rows[picks[task] % len(rows)]))
        picks[task] += 1
    t0 = time.monotonic()

    def one(item):
        task, row = item
        ph = row["phases_s"]
        time.sleep(sum(ph.get(k, 0.0) for k in PRE) * scale)
        w0 = time.monotonic()
        with ledger.hold(needs[task]):
            waited = time.monotonic() - w0
            time.sleep(sum(ph.get(k, 0.0) for k in DEVICE) * scale)
        time.sleep(ph.get("teardown", 0.0) * scale)
        return task, waited / scale, (time.monotonic() - t0) / scale

    with ThreadPoolExecutor(jobs) as ex:
        return list(ex.map(one, plan))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fresh_json", type=Path)
    ap.add_argument("--cache", type=Path, required=True, help="a cache holding the tasks' memory records")
    ap.add_argument("--stage", type=Path, default=ROOT / ".fresh")
    ap.add_argument("--budget-gib", type=float, required=True,
                    help="the ledger's budget (memory.budget: 19.9 on an 80 GB H100 and ~67.9 on an H200 at 16 jobs)")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--n", type=int, default=None, help="candidates (default: the batch's rows)")
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--big-gib", type=float, default=30.0, help="tasks above this are 'big' in the printout")
    ap.add_argument("--repeat", type=int, default=1, help="replays of each policy (they vary by a few percent)")
    args = ap.parse_args()

    doc = json.loads(args.fresh_json.read_text())
    rows = doc.get("parallel_rows") or doc["parallel"]["rows"]
    index = json.loads((args.stage / "index.json").read_text())
    names = [f"p{r['problem']}" for r in index]
    needs = {f"p{r['problem']}": memory.need(args.cache, load_task(args.stage / r["task"]).source) for r in index}
    rows_by_task: dict[str, list] = {}
    for r in rows:
        rows_by_task.setdefault(r["name"].split("_")[0], []).append(r)
    n = args.n or len(rows)
    order = [t for t in (names[i % len(names)] for i in range(10 * n)) if t in rows_by_task][:n]
    print(f"{n} candidates over {len(rows_by_task)} tasks, budget {args.budget_gib} GiB, {args.jobs} at a time; "
          f"needs (GiB): " + ", ".join(f"{t} {needs[t] / GIB:.1f}" for t in rows_by_task))
    for name, cls in [("greedy", GreedyLedger), ("arrival", ArrivalLedger), ("ledger", MemoryLedger)] * args.repeat:
        out = replay(rows_by_task, order, needs, int(args.budget_gib * GIB), args.jobs, args.scale, cls)
        wall = max(done for _, _, done in out)
        big = [w for t, w, _ in out if needs[t] > args.big_gib * GIB]
        small = [w for t, w, _ in out if needs[t] <= args.big_gib * GIB]
        print(f"{name:7s} {60 * n / wall:5.1f} a minute ({wall:.0f} s); admission wait median: "
              f"big {statistics.median(big) if big else 0:.1f} s, small {statistics.median(small) if small else 0:.1f} s; "
              f"waiting {sum(w for _, w, _ in out) / (args.jobs * wall):.0%} of the slots' time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
