"""Where does a sub-millisecond candidate's spread between evaluations come from? A diagnostic for
the [speed] stability target that keeps every timed call's time, which the result reduces to
batch means.

    python benchmarks/diagnostics/stability_probe.py --kernelbench KB [--repeat 5] [--only 1_Square,19_ReLU] [--jobs N]
        [--set K=V ...] [--ab K=V ...]

For each KernelBench level-1 solution in benchmarks/solutions chosen by --only, and for a
torch.matmul candidate with TF32 on (is it our cuBLAS call or any TF32 GEMM?), it runs one
evaluation to fill the caches, then --repeat more, and prints per evaluation the percentiles of the
candidate's timed calls, the median of the calls by their position in the batch, and the share of
calls more than 5% above the median. Last, the spread between evaluations (max/min - 1) by
estimator, over the calls and over the batch means: which estimator a steadier protocol could use,
and whether the noise is a tail (a few slow calls) or a shift of every call. On a GPU with
nvidia-ml-py, each evaluation's line is followed by the GPU's clock, power and the share of the time
NVML counted its clocks slowed, by reason (power cap, thermal, ...): benchmarks/gpu_sampler.py, of
the GPU that drew the most power during the evaluation.

--ab K=V compares two configurations in the same time windows: arm A (the --set fields) and arm B
(A with the --ab fields), each in an Evaluator of its own, their evaluations alternating (A B, then
B A, ...). The same code measured 0.9% and 6.7% on one H200 in calls minutes apart, so an A/B made
of separate calls says little.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

from cuda_agent.evaluate import EvalConfig, Evaluator, load_candidate
from cuda_agent.evaluate.evaluation import Evaluation
from cuda_agent.tasks import load_task

BENCHMARKS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCHMARKS))

from evaluator import config_overrides  # noqa: E402  (benchmarks/evaluator.py)
from gpu_sampler import describe, open_sampler  # noqa: E402  (benchmarks/gpu_sampler.py)

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
    """Wrap the evaluation's batch command to keep each timed call of the candidate (not the
    correctness trials, not the baselines' runners)."""
    original = Evaluation.run_batch

    def batch(self, items, guarded, check=1.0, runner=None, **kw):
        outcomes, wall = original(self, items, guarded, check, runner, **kw)
        if not guarded and runner is None:
            CAPTURED.append([m for _, _, m in outcomes.values()])
        return outcomes, wall

    Evaluation.run_batch = batch


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


def report(label: str, r) -> dict | None:
    """Print the timed calls of one evaluation (as CAPTURED holds them); its figures for the
    spread, or None if none was timed."""
    calls = [m for b in CAPTURED for m in b]
    means = [sum(b) / len(b) for b in CAPTURED if b]
    if not calls:
        print(f"  {label}no timed calls captured:", [x.code.value for x in r.reasons], flush=True)
        return None
    med = statistics.median(calls)
    by_pos: dict[int, list[float]] = {}
    for b in CAPTURED:
        for i, m in enumerate(b):
            by_pos.setdefault(i, []).append(m)
    # calls in time order, in thirds: does the evaluation drift (clock, thermal)?
    thirds = [statistics.median(calls[i * len(calls) // 3:(i + 1) * len(calls) // 3]) for i in range(3)]
    print(f"  {label}speedup {r.speedup_eager or 0:.4f}  calls {len(calls)} in {len(means)} batches  "
          f"p5 {pct(calls, .05):.4f} p25 {pct(calls, .25):.4f} med {med:.4f} p75 {pct(calls, .75):.4f} "
          f"p95 {pct(calls, .95):.4f} ms  >5%: {sum(m > 1.05 * med for m in calls) / len(calls):.1%}  "
          f"by position: {' '.join(f'{statistics.median(v):.4f}' for _, v in sorted(by_pos.items()))}  "
          f"thirds: {' '.join(f'{x:.4f}' for x in thirds)}", flush=True)
    return {"calls": calls, "means": means, "speedup": r.speedup_eager or 0.0}


def spread(runs: list[dict]) -> dict[str, float]:
    """max/min - 1 between evaluations, by estimator over the calls and over the batch means."""
    out = {}
    for est, fn in (("median", statistics.median), ("p25", lambda x: pct(x, .25)),
                    ("p10", lambda x: pct(x, .10)), ("min", min), ("mean", statistics.mean)):
        for over in ("calls", "means"):
            v = [fn(x[over]) for x in runs]
            out[f"{est}/{over}"] = max(v) / min(v) - 1
    sp = [x["speedup"] for x in runs]
    out["speedup (the result's)"] = max(sp) / min(sp) - 1 if min(sp) > 0 else float("inf")
    return out


def shown(spreads: dict[str, float]) -> str:
    return "  ".join(f"{k} {v:.2%}" for k, v in spreads.items())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernelbench", required=True, help="KernelBench's task folders (level1/...)")
    p.add_argument("--solutions", default=str(BENCHMARKS / "solutions"))
    p.add_argument("--only", default="1_Square", help="comma-separated parts of solution names")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--jobs", type=int, default=1, help="the Evaluator's evaluations at a time (its pool of spares)")
    p.add_argument("--device", default="cuda", help="cuda, or cpu to try the script on a small task")
    p.add_argument("--no-tf32-matmul", action="store_true", help="skip the torch.matmul TF32 candidate")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="an EvalConfig field, as for evaluator.py")
    p.add_argument("--ab", action="append", default=[], metavar="FIELD=VALUE",
                   help="an EvalConfig field of arm B, timed alternately with arm A (the --set fields)")
    args = p.parse_args()
    sets, ab = config_overrides(p, args.set), config_overrides(p, args.ab, "--ab")
    cache = Path(os.environ.get("CUDA_AGENT_CACHE") or tempfile.mkdtemp(prefix="probe-"))
    arms = {"": sets} if not ab else {"A": sets, "B": {**sets, **ab}}
    try:
        cfgs = {arm: EvalConfig(device=args.device, policy="kernelbench", cache_dir=cache, **kw)
                for arm, kw in arms.items()}
    except (TypeError, ValueError) as exc:
        p.error(f"--set/--ab: {exc}")
    if ab:
        print(f"arm A: {sets or 'defaults'}; arm B: {arms['B']}", flush=True)
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
    # every GPU, sampled every 5 ms (this process starts no CUDA context of its own)
    sampler = open_sampler(period_s=0.005) if args.device == "cuda" else None
    with contextlib.ExitStack() as stack:
        evs = {arm: stack.enter_context(Evaluator(cfg, jobs=args.jobs)) for arm, cfg in cfgs.items()}
        for name, task, cand in cands:
            for arm, ev in evs.items():  # fills the caches (builds, baselines)
                first = ev.evaluate(task, cand)
                print(f"\n== {name}{f' (arm {arm})' if arm else ''}: first "
                      f"{'correct' if first.correct else 'NOT correct'} {[r.code.value for r in first.reasons]}",
                      flush=True)
            runs: dict[str, list[dict]] = {arm: [] for arm in evs}
            order = list(evs)
            for i in range(args.repeat):
                for arm in order if i % 2 == 0 else order[::-1]:  # A B, B A, ...: no arm always first
                    CAPTURED.clear()
                    if sampler is not None:
                        sampler.span()  # the evaluation's span starts here
                    r = evs[arm].evaluate(task, cand)
                    run = report(f"{arm} " if arm else "", r)
                    if sampler is not None:
                        print(f"  GPU: {describe(sampler.span())}", flush=True)
                    if run is not None:
                        runs[arm].append(run)
            for arm, arm_runs in runs.items():
                if len(arm_runs) < 2:
                    continue
                summary.append((f"{name}{f' {arm}' if arm else ''}", spread(arm_runs)))
                # printed here too: a run cut short by its time limit keeps the tasks it finished
                print(f"  spread between its evaluations{f' (arm {arm})' if arm else ''}: {shown(summary[-1][1])}",
                      flush=True)
    if sampler is not None:
        sampler.close()
    print("\nspread between evaluations, max/min - 1, by estimator (over each call / over batch means):")
    for name, sp in summary:
        print(f"  {name}: {shown(sp)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
