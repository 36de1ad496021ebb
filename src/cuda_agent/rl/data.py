"""Prompt datasets for verl's PPO trainer (its RLHFDataset rows): one row per task.

A row: `data_source`, `prompt` (the chat messages), `ability`, `reward_model` (verl requires one; the
reward is the evaluator's, so its ground truth is empty), `agent_name` (the agent loop verl runs for
it) and `extra_info` with the task's name and source, which the reward (`rl.reward.compute_score`)
evaluates against.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from cuda_agent.errors import CudaAgentError
from cuda_agent.parquet import write_rows
from cuda_agent.tasks import Task

DATA_SOURCE = "cuda-agent"

SINGLE_TURN_SYSTEM = """You are an expert GPU kernel engineer. You are given a PyTorch model (class \
`Model`, with `get_inputs()` and `get_init_inputs()`). Write `ModelNew`: the same computation, with the \
same constructor arguments and the same parameters, made faster with your own CUDA kernels, compiled \
inline with torch.utils.cpp_extension.load_inline. Its outputs must match Model's within 1e-2. Answer \
with the complete Python module in one ```python code block."""


def task_from_row(data_source: str, extra_info: dict[str, Any] | None) -> Task:
    """The task a prompt row carries (`extra_info`: task_name, task_source), validated. ValueError
    when the row has none."""
    from cuda_agent.tasks.loaders import validate_task_source

    info = extra_info or {}
    source = info.get("task_source")
    if not isinstance(source, str):
        raise ValueError(f"{data_source}: the row's extra_info has no task_source; make the prompts with "
                         "`cuda-agent train prompts` (cuda_agent.rl.data.prompt_rows), which carry each task's source")
    name = str(info.get("task_name") or data_source)
    validate_task_source(source, f"{data_source}:{name}")
    return Task(name=name, source=source, origin=f"{data_source}:{name}")


def single_turn_prompt(task: Task) -> list[dict[str, str]]:
    return [{"role": "system", "content": SINGLE_TURN_SYSTEM},
            {"role": "user", "content": f"```python\n{task.source.rstrip()}\n```"}]


def prompt_rows(tasks: Iterable[Task], agent_name: str = "single_turn_agent") -> list[dict[str, Any]]:
    """verl prompt rows for `tasks`. `agent_name`: verl's `single_turn_agent` (one response per
    task), or the agentic loop's name (whose loop writes the workspace and its own first prompt)."""
    return [{"data_source": DATA_SOURCE, "prompt": single_turn_prompt(t), "ability": "cuda-kernels",
             "reward_model": {"style": "rule", "ground_truth": ""}, "agent_name": agent_name,
             "extra_info": {"index": i, "task_name": t.id, "task_source": t.source}}
            for i, t in enumerate(tasks)]


def write_prompts(tasks: Iterable[Task], out: str | Path, agent_name: str = "single_turn_agent") -> int:
    """Write the prompt rows of `tasks` to the Parquet file `out`; returns how many."""
    rows = prompt_rows(tasks, agent_name)
    if not rows:
        raise CudaAgentError("no tasks to write prompts for")
    write_rows(out, rows)
    return len(rows)
