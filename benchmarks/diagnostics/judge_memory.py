"""What the judge's process holds and keeps cached on the GPU while it prepares a task's trials
(fresh inputs, stress variants, the reference's calls): torch's allocated and reserved memory after
each trial, with and without the judge's trim of its cache after each command
(`Judge.after_command`, which serve.py calls), for task files given on the command line.

    PYTHONPATH=src python3 benchmarks/diagnostics/judge_memory.py .kb/level1/4_Matrix_vector_multiplication_.py

Last run (2026-12-07, H100 80GB): see docs/measured/2026-12-06-dumps.md, the section on the
leaderboard's reference_error verdicts."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

GIB = float(1 << 30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tasks", nargs="+", type=Path, help="KernelBench-format task files")
    ap.add_argument("--trials", type=int, default=5, help="plain trials (then two stress trials)")
    args = ap.parse_args()

    import torch

    from cuda_agent.evaluate.worker.judge import Judge

    for path in args.tasks:
        for trim in (False, True):
            judge = Judge()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            with tempfile.TemporaryDirectory() as shm:
                judge.cmd_setup(task_source=path.read_text(), origin=str(path), device="cuda", init_seed=1,
                                weights_seed=2, shm_dir=shm, touch="bf16")
                plan = [(f"c{i}", None) for i in range(args.trials)] + [("s0", 0), ("s1", 1)]
                for i, (trial, stress) in enumerate(plan):
                    judge.cmd_prepare([{"trial": trial, "seed": 100 + i, "stress": stress, "fill": None}])
                    judge.trials.pop(trial)  # (as `check` forgets a trial)
                    if trim:
                        judge.after_command()
                    print(f"{path.name} trim={trim} {trial}: allocated {torch.cuda.memory_allocated() / GIB:.2f} "
                          f"GiB, reserved {torch.cuda.memory_reserved() / GIB:.2f} GiB, "
                          f"peak reserved {torch.cuda.max_memory_reserved() / GIB:.2f} GiB", flush=True)
            judge.cmd_reset()
            del judge
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
