"""The single-turn reward (the paper's first stage): the model answers a task with one response; the
candidate is the ```python block of that response that defines `ModelNew` (the longest such, the last
of equals; `pyparse.extract_module`), evaluated like any other. A response without code scores -1
with the reason `no_model_new`, as a candidate without `ModelNew` does.

`compute_score` (and `acompute_score`, its coroutine, which the recipe names) is the function verl's
reward manager calls (`reward.custom_reward_function`): the
task's source comes in the dataset row's `extra_info["task_source"]` (the prompts that
`rl.data.prompt_rows` writes carry it), and the evaluation runs in this process's Evaluator,
made on first use from `CUDA_AGENT_EVAL_CONFIG` (EvalConfig's fields as JSON) and kept for the
process's life, so workers, compiled baselines and kept judges serve every later call.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import sys
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


_EVALUATORS: dict[str, EvaluatorBase] = {}
_LOCK = threading.Lock()


def shared_evaluator(fields: dict[str, Any] | None = None) -> EvaluatorBase:
    """This process's evaluator for the EvalConfig `fields` (default: `CUDA_AGENT_EVAL_CONFIG`, JSON),
    made on first use and kept until the process exits: a client of the warm evaluation service
    when one runs for this cache and device (`$CUDA_AGENT_SERVICE`: auto, start or off; several
    reward workers then share its pool), else an Evaluator with warm workers of its own. Which one
    is logged on stderr once."""
    if fields is None:
        fields = json.loads(os.environ.get("CUDA_AGENT_EVAL_CONFIG") or "{}")
    key = json.dumps(fields, sort_keys=True, default=str)
    with _LOCK:
        if key not in _EVALUATORS:
            from cuda_agent.evaluate import Evaluator
            from cuda_agent.evaluate.config import default_service_mode
            from cuda_agent.evaluate.service import connect

            config = EvalConfig(**{"isolation": "required", **fields})  # model-written code, unattended
            client, how = connect(config, default_service_mode())
            print(f"cuda-agent reward: {how}", file=sys.stderr)
            _EVALUATORS[key] = ev = client or Evaluator(config)
            atexit.register(ev.close)
        return _EVALUATORS[key]


def close_shared_evaluators() -> None:
    with _LOCK:
        evaluators = list(_EVALUATORS.values())
        _EVALUATORS.clear()
    for ev in evaluators:
        ev.close()


def compute_score(data_source: str, solution_str: str, ground_truth: Any = None,
                  extra_info: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
    """verl's reward-function interface: {"score": the milestone reward, and the verdict's
    correctness, speedups and reason codes for verl's logs}."""
    from cuda_agent.rl.data import task_from_row

    task = task_from_row(data_source, extra_info)
    res = score_response(task, solution_str, shared_evaluator())
    return {"score": float(res.reward), "correct": bool(res.correct),
            "speedup_eager": res.speedup_eager or 0.0, "speedup_compile": res.speedup_compile or 0.0,
            "reasons": ",".join(r.code.value for r in res.failures)}


async def acompute_score(data_source: str, solution_str: str, ground_truth: Any = None,
                         extra_info: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    """`compute_score` on a thread: verl awaits a coroutine reward function, so the evaluations of
    a batch's responses overlap (the Evaluator's pool runs them side by side) instead of queueing."""
    return await asyncio.to_thread(compute_score, data_source, solution_str, ground_truth, extra_info, **kw)
