"""The metrics the field reports (DESIGN section 8), per level and overall, against eager and against
torch.compile. Pure arithmetic over outcomes: no torch, no evaluation.

Over all tasks of the task set (a task with no solution, or whose solution failed, counts as not
correct):
- `pass_rate`: correct / tasks;
- `faster_eager_rate`, `faster_compile_rate`: correct and more than 5% faster (speedup > 1.05) / tasks;
- `fast_p` curves: the share of tasks correct with speedup > p, for p on a grid (fast_0 is the pass
  rate when every correct task was timed).

Geometric means of the speedup, in both conventions, labelled:
- `geomean_eager`, `geomean_compile`: over correct tasks only (those with a speedup);
- `geomean_eager_all`, `geomean_compile_all`: over all tasks, a failed task counted as 1.0x (falling
  back to the baseline).

The speed of light (`sol`): over correct tasks that were timed, the quartiles of the fraction of
the speed of light their kernel reached (the result's `sol.fraction`).

Best-of-samples (several samples per task): a task is correct when any sample is, and its speedup
against each baseline (and its SOL fraction) is the best of its correct samples', chosen per baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from cuda_agent.evaluate.result import quantile

FASTER = 1.05  # "more than 5% faster", as the milestone reward
FAST_P = (0.0, 0.5, 0.8, 1.0, 1.05, 1.5, 2.0, 3.0, 5.0)  # the grid reported in JSON and tables


@dataclass(frozen=True, slots=True)
class Outcome:
    """One task's verdict for the metrics: `correct`, and the speedups when it was timed."""

    task: str
    level: int | None
    correct: bool
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    sol_fraction: float | None = None  # of the speed of light (the result's `sol`), when timed


def best_of(outcomes: Iterable[Outcome]) -> Outcome:
    """One task's samples reduced to one outcome: correct if any is; the best speedups of the
    correct ones, per baseline."""
    samples = list(outcomes)
    if not samples:
        raise ValueError("best_of needs at least one sample")
    good = [o for o in samples if o.correct]

    def best(attr: str) -> float | None:
        values = [getattr(o, attr) for o in good if getattr(o, attr) is not None]
        return max(values) if values else None

    return Outcome(task=samples[0].task, level=samples[0].level, correct=bool(good),
                   speedup_eager=best("speedup_eager"), speedup_compile=best("speedup_compile"),
                   sol_fraction=best("sol_fraction"))


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fast_p(outcomes: list[Outcome], baseline: str, ps: Iterable[float] = FAST_P) -> dict[str, float]:
    """{"p": share of all tasks correct with speedup > p} against `baseline` ("eager"/"compile")."""
    n = len(outcomes)
    attr = f"speedup_{baseline}"
    out = {}
    for p in ps:
        hits = sum(1 for o in outcomes if o.correct and getattr(o, attr) is not None and getattr(o, attr) > p)
        out[_p_key(p)] = hits / n if n else 0.0
    return out


def _p_key(p: float) -> str:
    return f"{p:g}"


def summarize(outcomes: list[Outcome]) -> dict[str, Any]:
    """The metrics of one group of tasks (one outcome per task)."""
    n = len(outcomes)
    correct = [o for o in outcomes if o.correct]
    d: dict[str, Any] = {"tasks": n, "correct": len(correct), "pass_rate": len(correct) / n if n else 0.0}
    for b in ("eager", "compile"):
        attr = f"speedup_{b}"
        timed = [getattr(o, attr) for o in correct if getattr(o, attr) is not None]
        faster = sum(1 for s in timed if s > FASTER)
        d[f"faster_{b}"] = faster
        d[f"faster_{b}_rate"] = faster / n if n else 0.0
        d[f"geomean_{b}"] = _geomean(timed)
        d[f"geomean_{b}_all"] = _geomean([getattr(o, attr) if o.correct and getattr(o, attr) else 1.0
                                          for o in outcomes]) if n else None
        d[f"fast_p_{b}"] = fast_p(outcomes, b)
    fractions = sorted(o.sol_fraction for o in correct if o.sol_fraction is not None)
    d["sol"] = {"timed": len(fractions), **({k: round(quantile(fractions, q), 4) for k, q in
                                              (("p25", 0.25), ("median", 0.5), ("p75", 0.75))} if fractions else {})}
    return d


def metrics(outcomes: list[Outcome]) -> dict[str, Any]:
    """{"levels": {"1": {...}, ...}, "overall": {...}}: one outcome per task (use `best_of` first
    for several samples). Tasks without a level are grouped under "other"."""
    levels: dict[str, list[Outcome]] = {}
    for o in outcomes:
        levels.setdefault(str(o.level) if o.level is not None else "other", []).append(o)
    order = sorted(levels, key=lambda k: (k == "other", int(k) if k.isdigit() else 0))
    return {"levels": {k: summarize(levels[k]) for k in order}, "overall": summarize(outcomes)}
