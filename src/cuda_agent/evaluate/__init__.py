"""The kernel evaluator: one engine for the CLI, the agent's tools, the RL reward, the data filter and
the benchmark. `evaluate(task, candidate, config) -> EvalResult` for one; `Evaluator` for many, with
warm workers, over every GPU (`submit`, `aevaluate`, `map`). Failures are data, never exceptions.
"""

from __future__ import annotations

from cuda_agent.evaluate.candidate import Candidate, load_candidate
from cuda_agent.evaluate.config import EvalConfig
from cuda_agent.evaluate.evaluation import evaluate
from cuda_agent.evaluate.evaluator import Evaluator
from cuda_agent.evaluate.result import Code, EvalResult, Kind, Reason, TimeStats
from cuda_agent.evaluate.reward import milestone_reward

__all__ = ["Candidate", "Code", "EvalConfig", "EvalResult", "Evaluator", "Kind", "Reason", "TimeStats",
           "evaluate", "load_candidate", "milestone_reward"]
