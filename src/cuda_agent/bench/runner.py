"""A benchmark run: evaluate every (task, sample) of a task set through the evaluator pool, storing each
verdict as it arrives, skipping those already stored (resume) unless asked to rescore; and the
outcomes the metrics are computed from.
"""

from __future__ import annotations

import shutil
import sys
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from cuda_agent import __version__
from cuda_agent.bench.metrics import Outcome, best_of, metrics
from cuda_agent.bench.solutions import Solution
from cuda_agent.bench.store import Record, Store
from cuda_agent.errors import CandidateError
from cuda_agent.evaluate import Code, EvalConfig, EvalResult, load_candidate
from cuda_agent.evaluate.baselines import PROTOCOL
from cuda_agent.evaluate.evaluator import EvaluatorBase
from cuda_agent.tasks import Task

VERSION = f"{__version__}+timing{PROTOCOL}"  # stored with every verdict: which evaluator gave it
NO_SOLUTION = "no_solution"  # the reason counted for a task that has no candidate at all
NOT_EVALUATED = "not_evaluated"  # a task whose dump entries are stored, not yet judged (a cut run: it resumes)


def run_params(taskset: str, tasks: list[Task], solutions: str, device: str, config: EvalConfig) -> dict[str, Any]:
    """What a run is: a resume must match it (store.open_run)."""
    return {"taskset": taskset, "solutions": solutions, "device": device, "policy": config.policy,
            "tasks": [[t.id, t.level] for t in tasks], "config": config.to_json()}


@dataclass
class Progress:
    """Callbacks for a progress display: `start(total)`, then `advance(solution, result)` per verdict."""

    start: Callable[[int], None] = lambda total: None
    advance: Callable[[Solution, EvalResult], None] = lambda sol, res: None


def run(store: Store, name: str, solutions: list[Solution], evaluator: EvaluatorBase,
        rescore: bool = False, progress: Progress | None = None) -> int:
    """Evaluate the solutions of run `name` not yet stored (all of them with `rescore`); returns
    how many were evaluated. Each verdict is committed as it arrives; on an interrupt the queued
    evaluations are dropped, the running ones are waited for and stored (the pool waits for them as
    it closes anyway), and a second interrupt gives those up."""
    progress = progress or Progress()
    done = set() if rescore else store.done(name)
    pending = [s for s in solutions if (s.task.id, s.sample) not in done]
    progress.start(len(pending))
    futures: dict[Future, tuple[Solution, str]] = {}
    for sol in pending:
        try:
            cand = load_candidate(sol.path)
        except CandidateError as exc:  # a broken solution is a verdict, not the end of the run
            res = EvalResult(task=sol.task.id, candidate=str(sol.path))
            res.add(Code.LOAD_ERROR, str(exc))
            _put(store, name, sol, "", res)
            progress.advance(sol, res)
            continue
        futures[evaluator.submit(sol.task, cand)] = (sol, cand.sha256)
    evaluated = len(pending) - len(futures)
    kept: set[Future] = set()

    def keep(fut: Future) -> None:
        nonlocal evaluated
        sol, sha = futures[fut]
        res = fut.result()
        _put(store, name, sol, sha, res)
        kept.add(fut)
        evaluated += 1
        progress.advance(sol, res)

    try:
        for fut in as_completed(futures):
            keep(fut)
    except KeyboardInterrupt:  # queued evaluations go; the running ones finish and are stored
        running = [f for f in futures if not f.cancel() and f not in kept]
        print(f"stopping: {len(running)} running evaluation(s) finish and are stored; interrupt again to stop "
              "at once (they are then evaluated again by the next run)", file=sys.stderr)
        for fut in as_completed(running):
            keep(fut)
        raise
    finally:
        for fut in futures:
            fut.cancel()
    return evaluated


def run_agent(store: Store, name: str, tasks: list[Task], client, episode_cfg, out_dir: Path,
              evaluator: EvaluatorBase, episodes: int = 4, progress: Progress | None = None,
              rescore: bool = False) -> int:
    """The agent solves each task not yet stored (an episode in `out_dir/<task id>/`), `episodes` at
    a time, their final evaluations sharing `evaluator`; each verdict is stored as sample 0 when its
    episode ends. Returns how many episodes ran."""
    from cuda_agent.agent.loop import run_episode  # the agent layer, only when benchmarking it

    progress = progress or Progress()
    done = set() if rescore else store.done(name)
    pending = [t for t in tasks if (t.id, 0) not in done]
    progress.start(len(pending))

    def one(task: Task) -> tuple[Task, Path, EvalResult]:
        folder = out_dir / task.id
        if folder.exists():  # an episode cut short by an interrupt: started again from scratch
            shutil.rmtree(folder)
        ep = run_episode(task, folder, client, episode_cfg, evaluator=evaluator)
        return task, ep.workspace, ep.result

    ran = 0
    with ThreadPoolExecutor(max(episodes, 1), thread_name_prefix="cuda-agent-episode") as pool:
        futures = [pool.submit(one, t) for t in pending]
        try:
            for fut in as_completed(futures):
                task, ws, res = fut.result()
                sol = Solution(task, 0, ws)
                _put(store, name, sol, load_candidate(ws).sha256 if (ws / "model_new.py").exists() else "", res)
                ran += 1
                progress.advance(sol, res)
        finally:
            for fut in futures:
                fut.cancel()
    return ran


def _put(store: Store, name: str, sol: Solution, sha: str, res: EvalResult) -> None:
    store.put(name, sol.task.id, sol.sample, sol.task.level, str(sol.path), sha, res, VERSION)


# -- from stored verdicts to metrics --------------------------------------------------------------

def outcome(task: str, level: int | None, res: EvalResult | None) -> Outcome:
    if res is None:
        return Outcome(task, level, False)
    return Outcome(task, level, res.correct, res.speedup_eager, res.speedup_compile,
                   (res.sol or {}).get("fraction"))


@dataclass
class Summary:
    """A run's metrics: best-of-samples, each sample's, and failure reasons by count."""

    best: dict[str, Any]
    outcomes: list[Outcome]  # best of samples, one per task of the task set
    samples: dict[int, dict[str, Any]]
    reasons: dict[str, int]
    per_task: list[dict[str, Any]]
    records: list[Record]

    def to_json(self) -> dict[str, Any]:
        d = dict(self.best)
        if len(self.samples) > 1:
            d["samples"] = {str(k): v for k, v in self.samples.items()}
        d["reasons"] = self.reasons
        return d


def summarize_run(store: Store, name: str) -> Summary:
    params = store.require_run(name)
    tasks = [(t, lv) for t, lv in params["tasks"]]
    records = list(store.records(name))
    by_task: dict[str, dict[int, EvalResult]] = {}
    for r in records:
        by_task.setdefault(r.task, {})[r.sample] = r.result
    sample_ids = sorted({r.sample for r in records}) or [0]
    best = [best_of([outcome(t, lv, res) for res in by_task.get(t, {}).values()] or [outcome(t, lv, None)])
            for t, lv in tasks]
    samples = {s: metrics([outcome(t, lv, by_task.get(t, {}).get(s)) for t, lv in tasks]) for s in sample_ids}
    reasons: dict[str, int] = {}
    per_task = []
    claimed = {task for task, _ in store.claimed(name)}  # a dump's entries, stored before they are judged
    for (t, lv), b in zip(tasks, best):
        results = by_task.get(t, {})
        missing = NOT_EVALUATED if t in claimed else NO_SOLUTION
        if not results:
            reasons[missing] = reasons.get(missing, 0) + 1
        for res in results.values():
            if not res.correct:
                code = res.failures[0].code.value if res.failures else "not_correct"
                reasons[code] = reasons.get(code, 0) + 1
        per_task.append({"task": t, "level": lv, "correct": b.correct, "samples": len(results),
                         "speedup_eager": b.speedup_eager, "speedup_compile": b.speedup_compile,
                         "sol_fraction": b.sol_fraction, "generalizes": _generalizes(results.values()),
                         "reasons": sorted({f.code.value for res in results.values() for f in res.failures})
                         or ([missing] if not results else [])})
    return Summary(metrics(best), best, samples, dict(sorted(reasons.items(), key=lambda kv: -kv[1])), per_task, records)


def _generalizes(results) -> bool | None:
    """A task's shape trials over its correct samples: False if any sample's kernel failed at other
    sizes, True if every one tried passed, None where none was tried (no --shapes, nothing to scale)."""
    told = [(r.generalization or {}).get("generalizes") for r in results if r.correct]
    told = [g for g in told if g is not None]
    return None if not told else all(told)


def default_run_name(taskset: str, solutions: str | None, device: str) -> str:
    base = Path(solutions).name if solutions else Path(taskset).name
    return f"{base or 'run'}-{device}"
