"""The single-turn reward (the paper's first stage): the model answers a task with one response; the
candidate is the ```python block of that response that defines `ModelNew` (the longest such, the last
of equals; `pyparse.extract_module`), evaluated like any other. A response without code scores -1
with the reason `no_model_new`, as a candidate without `ModelNew` does.

`compute_score` is the function verl's reward manager calls (`reward.custom_reward_function`): the
task's source comes in the dataset row's `extra_info["task_source"]` (the prompts that
`rl.data.prompt_rows` writes carry it), and the evaluation runs in this process's Evaluator,
made on first use from `CUDA_AGENT_EVAL_CONFIG` (EvalConfig's fields as JSON) and kept for the
process's life, so workers, compiled baselines and kept judges serve every later call.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from typing import Any

from cuda_agent.evaluate import Code, EvalConfig, EvalResult
from cuda_agent.evaluate.candidate import Candidate
from cuda_agent.evaluate.evaluator import EvaluatorBase
from cuda_agent.pyparse import extract_module
from cuda_agent.tasks import Task


def candidate_from_response(text: str, origin: str = "<response>") -> Candidate:
    """The single-file candidate in a model's response. ValueError when it holds no python block."""
    return Candidate(origin=origin, kind="file", model_new=extract_module(text, "ModelNew"))


def score_response(task: Task, text: str, evaluator: EvaluatorBase, config: EvalConfig | None = None) -> EvalResult:
    """The verdict on the candidate in `text` (reward -1, `no_model_new`, when there is no code)."""
    try:
        cand = candidate_from_response(text)
    except ValueError as exc:
        res = EvalResult(task=task.id, candidate="<response>")
        res.add(Code.NO_MODEL_NEW, f"the response holds no candidate: {exc}")
        return res
    return evaluator.evaluate(task, cand, config)


_EVALUATOR: EvaluatorBase | None = None
_LOCK = threading.Lock()


def _evaluator() -> EvaluatorBase:
    global _EVALUATOR
    with _LOCK:
        if _EVALUATOR is None:
            from cuda_agent.evaluate import Evaluator

            fields = json.loads(os.environ.get("CUDA_AGENT_EVAL_CONFIG") or "{}")
            _EVALUATOR = Evaluator(EvalConfig(**fields))
            atexit.register(_EVALUATOR.close)  # its warm workers go with the process
        return _EVALUATOR


def compute_score(data_source: str, solution_str: str, ground_truth: Any = None,
                  extra_info: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
    """verl's reward-function interface: {"score": the milestone reward, and the verdict's
    correctness, speedups and reason codes for verl's logs}."""
    from cuda_agent.tasks.loaders import validate_task_source

    info = extra_info or {}
    source = info.get("task_source")
    if not isinstance(source, str):
        raise ValueError(f"{data_source}: the row's extra_info has no task_source; make the prompts with "
                         "cuda_agent.rl.data.prompt_rows (they carry each task's source)")
    name = str(info.get("task_name") or data_source)
    validate_task_source(source, f"{data_source}:{name}")
    task = Task(name=name, source=source, origin=f"{data_source}:{name}")
    res = score_response(task, solution_str, _evaluator())
    return {"score": float(res.reward), "correct": bool(res.correct),
            "speedup_eager": res.speedup_eager or 0.0, "speedup_compile": res.speedup_compile or 0.0,
            "reasons": ",".join(r.code.value for r in res.failures)}
