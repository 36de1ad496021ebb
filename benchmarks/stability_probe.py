"""Where does a sub-millisecond candidate's spread between evaluations come from? A diagnostic for
the [speed] stability target that keeps every timed call's time, which the result reduces to
batch means.

    python benchmarks/stability_probe.py --kernelbench KB [--repeat 5] [--only 1_Square,19_ReLU] [--jobs N]
        [--set K=V ...]

For each KernelBench level-1 solution in benchmarks/solutions chosen by --only, and for a
torch.matmul candidate with TF32 on (is it our cuBLAS call or any TF32 GEMM?), it runs one
evaluation to fill the caches, then --repeat more, and prints per evaluation the percentiles of the
candidate's timed calls, the median of the calls by their position in the batch, and the share of
calls more than 5% above the median. Last, the spread between evaluations (max/min - 1) by
estimator, over the calls and over the batch means: which estimator a steadier protocol could use,
and whether the noise is a tail (a few slow calls) or a shift of every call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

from cuda_agent.evaluate import EvalConfig, Evaluator, load_candidate
from cuda_agent.evaluate import engine
from cuda_agent.tasks import load_task
from evaluator import config_overrides  # benchmarks/evaluator.py, beside this script

TF32_MATMUL = textwrap.dedent('''
    import torch
    import torch.nn as nn

    torch.backends.cuda.matmul.allow_tf32 = True


    class ModelNew(nn.Module):
        def forward(self, A, B):
            return torch.matmul(A, B)
''')

CAPTURED: list[list[float]] = []  # per timed batch of the candidate, each call's milliseconds


def _capture() -> None:
    """Wrap the engine's batch command to keep each timed call of the candidate (not the
    correctness trials, not the baselines' runners)."""
    original = engine._Evaluation._batch

    def batch(self, items, guarded, check=1.0, runner=None, **kw):
        outcomes, wall = original(self, items, guarded, check, runner, **kw)
        if not guarded and runner is None:
            CAPTURED.append([m for _, _, m in outcomes.values()])
        return outcomes, wall

    engine._Evaluation._batch = batch


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernelbench", required=True, help="KernelBench's task folders (level1/...)")
    p.add_argument("--solutions", default=str(Path(__file__).parent / "solutions"))
    p.add_argument("--only", default="1_Square", help="comma-separated parts of solution names")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--jobs", type=int, default=1, help="the Evaluator's evaluations at a time (its pool of spares)")
    p.add_argument("--device", default="cuda", help="cuda, or cpu to try the script on a small task")
    p.add_argument("--no-tf32-matmul", action="store_true", help="skip the torch.matmul TF32 candidate")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="an EvalConfig field, as for evaluator.py")
    args = p.parse_args()
    sets = config_overrides(p, args.set)
    cache = Path(os.environ.get("CUDA_AGENT_CACHE") or tempfile.mkdtemp(prefix="probe-"))
    try:
        cfg = EvalConfig(device=args.device, policy="kernelbench", cache_dir=cache, **sets)
    except (TypeError, ValueError) as exc:
        p.error(f"--set: {exc}")
    keys = [k for k in args.only.split(",") if k]
    cands = []
    for sol in sorted(Path(args.solutions).glob("level1/*.py")):
        if any(k in sol.stem for k in keys):
            cands.append((sol.stem, load_task(Path(args.kernelbench) / "level1" / sol.name), load_candidate(sol)))
    if not args.no_tf32_matmul:
        tmp = Path(tempfile.mkdtemp(prefix="probe-cand-")) / "tf32_matmul.py"
        tmp.write_text(TF32_MATMUL)
        cands.append(("torch.matmul_tf32", load_task(Path(args.kernelbench) / "level1" /
                                                      "1_Square_matrix_multiplication_.py"), load_candidate(tmp)))
    if not cands:
        p.error(f"--only {args.only}: no solution matches")
    _capture()
    summary = []
    with Evaluator(cfg, jobs=args.jobs) as ev:
        for name, task, cand in cands:
            first = ev.evaluate(task, cand)
            print(f"\n== {name}: first {'correct' if first.correct else 'NOT correct'} "
                  f"{[r.code.value for r in first.reasons]}", flush=True)
            runs = []
            for _ in range(args.repeat):
                CAPTURED.clear()
                r = ev.evaluate(task, cand)
                calls = [m for b in CAPTURED for m in b]
                means = [sum(b) / len(b) for b in CAPTURED if b]
                if not calls:
                    print("  no timed calls captured:", [x.code.value for x in r.reasons])
                    continue
                med = statistics.median(calls)
                by_pos: dict[int, list[float]] = {}
                for b in CAPTURED:
                    for i, m in enumerate(b):
                        by_pos.setdefault(i, []).append(m)
                # calls in time order, in thirds: does the evaluation drift (clock, thermal)?
                thirds = [statistics.median(calls[i * len(calls) // 3:(i + 1) * len(calls) // 3]) for i in range(3)]
                runs.append({"calls": calls, "means": means, "speedup": r.speedup_eager or 0.0})
                print(f"  speedup {r.speedup_eager or 0:.4f}  calls {len(calls)} in {len(means)} batches  "
                      f"p5 {pct(calls, .05):.4f} p25 {pct(calls, .25):.4f} med {med:.4f} p75 {pct(calls, .75):.4f} "
                      f"p95 {pct(calls, .95):.4f} ms  >5%: {sum(m > 1.05 * med for m in calls) / len(calls):.1%}  "
                      f"by position: {' '.join(f'{statistics.median(v):.4f}' for _, v in sorted(by_pos.items()))}  "
                      f"thirds: {' '.join(f'{x:.4f}' for x in thirds)}", flush=True)
            if len(runs) < 2:
                continue
            spread = {}
            for est, fn in (("median", statistics.median), ("p25", lambda x: pct(x, .25)),
                            ("p10", lambda x: pct(x, .10)), ("min", min), ("mean", statistics.mean)):
                for over in ("calls", "means"):
                    v = [fn(x[over]) for x in runs]
                    spread[f"{est}/{over}"] = max(v) / min(v) - 1
            sp = [x["speedup"] for x in runs]
            spread["speedup (the result's)"] = max(sp) / min(sp) - 1 if min(sp) > 0 else float("inf")
            summary.append((name, spread))
            print("  spread between its evaluations: " + "  ".join(f"{k} {v:.2%}" for k, v in spread.items()),
                  flush=True)  # here too: a run cut short by its time limit keeps the tasks done
    print("\nspread between evaluations, max/min - 1, by estimator (over each call / over batch means):")
    for name, spread in summary:
        print(f"  {name}: " + "  ".join(f"{k} {v:.2%}" for k, v in spread.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
