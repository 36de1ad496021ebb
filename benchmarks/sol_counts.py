"""How much of a task set the speed of light counts exactly: every task's reference built and run on
torch's meta device (no memory, no time) under the judge's `WorkCounter`, and the operators it could
not count, by how many tasks use them. A task whose Model cannot be built on the meta device (it
reads a value with `.item()`, or imports a package missing here) is listed apart: the evaluator
counts it on real inputs, where this check cannot.

    python benchmarks/sol_counts.py KernelBench/ --levels 1,2,3
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def count_task(path: Path) -> dict:
    import torch

    from cuda_agent.evaluate.worker.work import counted

    module: dict = {"__name__": "sol_counts_task"}
    exec(compile(path.read_text(), str(path), "exec"), module)
    with torch.device("meta"):
        model = module["Model"](*module["get_init_inputs"]()).eval()
        inputs = list(module["get_inputs"]())
    with torch.no_grad():
        _, work = counted(lambda: model(*inputs), inputs, model)
    return work


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("taskset", type=Path, help="a folder holding level1/, level2/, ... of KernelBench-format tasks")
    ap.add_argument("--levels", default="1,2,3", help="levels to read (default 1,2,3)")
    args = ap.parse_args()
    import warnings

    warnings.filterwarnings("ignore")
    uncounted: collections.Counter = collections.Counter()
    exact, partial, unbuilt = 0, [], []
    for level in args.levels.split(","):
        for path in sorted((args.taskset / f"level{level}").glob("*.py")):
            try:
                work = count_task(path)
            except Exception as exc:  # noqa: BLE001 - reported, not raised: the next task goes on
                unbuilt.append(f"level{level}/{path.name}: {type(exc).__name__}: {str(exc)[:80]}")
                continue
            if work.get("uncounted") or "error" in work:
                partial.append(f"level{level}/{path.name}")
                uncounted.update(work.get("uncounted", ["(error)"]))
            else:
                exact += 1
    total = exact + len(partial)
    print(f"counted exactly: {exact} of {total} tasks built on the meta device; {len(unbuilt)} not built there")
    for op, n in uncounted.most_common():
        print(f"  uncounted {op}: {n} task(s)")
    for line in partial:
        print(f"  partial: {line}")
    for line in unbuilt:
        print(f"  not built on meta: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
