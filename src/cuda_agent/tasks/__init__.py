"""Tasks in KernelBench format: a Python module defining `Model`, `get_inputs()` and `get_init_inputs()`.

Loaders: a single file (`load_task`), a KernelBench checkout (`load_kernelbench`), and the Hugging Face
dataset `ScalingIntelligence/KernelBench` or a local copy of it (`load_hf_kernelbench`). Every loader
validates the source statically (`validate_task_source`) so a malformed task fails at load time with
its file and line, never half-way through an evaluation.
"""

from __future__ import annotations

from cuda_agent.tasks.model import Task
from cuda_agent.tasks.loaders import (
    example_tasks,
    load_task,
    load_kernelbench,
    load_hf_kernelbench,
    load_taskset,
    validate_task_source,
)

__all__ = ["Task", "example_tasks", "load_task", "load_kernelbench", "load_hf_kernelbench", "load_taskset",
           "validate_task_source"]
