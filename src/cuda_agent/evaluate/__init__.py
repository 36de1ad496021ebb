"""The kernel evaluator: one engine for the CLI, the agent's tools, the RL reward, the data filter and
the benchmark. `evaluate(task, candidate, config) -> EvalResult` for one; `Evaluator` for many, with
warm workers, over every GPU (`submit`, `aevaluate`, `map`). Failures are data, never exceptions.

The names below are loaded on first use, so that importing a light submodule (`config`, `result`)
does not import the whole harness.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "Candidate": "candidate", "load_candidate": "candidate",
    "EvalConfig": "config",
    "evaluate": "evaluation",
    "Evaluator": "evaluator",
    "Code": "result", "EvalResult": "result", "Kind": "result", "Reason": "result", "TimeStats": "result",
    "milestone_reward": "reward",
}

if TYPE_CHECKING:
    from cuda_agent.evaluate.candidate import Candidate, load_candidate
    from cuda_agent.evaluate.config import EvalConfig
    from cuda_agent.evaluate.evaluation import evaluate
    from cuda_agent.evaluate.evaluator import Evaluator
    from cuda_agent.evaluate.result import Code, EvalResult, Kind, Reason, TimeStats
    from cuda_agent.evaluate.reward import milestone_reward


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'cuda_agent.evaluate' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"cuda_agent.evaluate.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_WHERE)
