"""Self-check of the evaluator on real KernelBench tasks: each task's own Model, renamed ModelNew (the
starter `init-workspace` writes), must be judged correct. Any other verdict is an evaluator bug
(seen: the judge running out of memory on 1G-element outputs, before comparisons were chunked).

    python benchmarks/kernelbench_selfcheck.py KernelBench/ --max-elements 20000000 --device cpu

With --timing it is also the check of timing symmetry: the candidate is the reference itself, so
its speedup over eager must come out at 1.00x, whatever the protocol costs (`examples` as the task
set times the bundled example tasks):

    python benchmarks/kernelbench_selfcheck.py examples --device cuda --timing

Tasks whose inputs and parameters hold more than --max-elements elements are skipped (sizes are
read on the meta device, nothing is allocated).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from cuda_agent.evaluate import EvalConfig, evaluate, load_candidate
from cuda_agent.tasks import example_tasks
from cuda_agent.tasks import load_kernelbench
from cuda_agent.workspace import starter_model_new


def size(task) -> int | None:
    ns: dict = {}
    try:
        exec(compile(task.source, task.origin, "exec"), ns)
        with torch.device("meta"):
            inputs = ns["get_inputs"]()
            model = ns["Model"](*ns["get_init_inputs"]())
    except Exception:
        return None
    return sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)) + \
        sum(p.numel() for p in model.parameters())


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("kernelbench", help="a KernelBench checkout or its folder of level1/ ... level3/, "
                   "or `examples` for the bundled example tasks")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--max-elements", type=int, default=20_000_000)
    p.add_argument("--device", default="cpu")
    p.add_argument("--only", default="", help="substring of the task ids to run")
    p.add_argument("--timing", action="store_true", help="time it too (speedups should be 1.00x)")
    args = p.parse_args()
    # The reference itself is PyTorch code: KernelBench's rules.
    cfg = EvalConfig(device=args.device, policy="kernelbench", trials=2, stress_trials=1,
                     timing=args.timing, compile_baseline=False, timeout_s=600)
    tasks = example_tasks() if args.kernelbench == "examples" else load_kernelbench(args.kernelbench,
                                                                                     levels=args.levels)
    tasks = [t for t in tasks if args.only in t.id]
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            n = size(task)
            if n is None or n > args.max_elements:
                continue
            cand = Path(tmp) / f"{task.id.replace('/', '_')}.py"
            starter = starter_model_new(task.source, args.device)
            cand.write_text("\n".join(ln for ln in starter.splitlines()
                                      if not ln.strip().startswith("import cuda_extension")))
            t0 = time.monotonic()
            res = evaluate(task, load_candidate(cand), cfg)
            verdict = "ok" if res.correct else "FAIL " + "; ".join(
                f"{r.code.value}: {r.message[:300]}" for r in res.failures)
            if res.correct and args.timing:
                verdict += " " + ", ".join(f"{k} {v.median:.4f} ms (iqr {v.iqr:.4f}, n {v.n})"
                                           for k, v in res.times_ms.items() if v)
                verdict += f": {res.speedup_eager:.3f}x"
            print(f"{task.id} ({n} elements) {time.monotonic() - t0:.1f} s {verdict}", flush=True)
            if not res.correct:
                failed.append(task.id)
    print(f"{len(failed)} failed: {failed}" if failed else "all correct")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
