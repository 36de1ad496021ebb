"""The task record shared by every layer."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Task:
    """One KernelBench-format task.

    `source` is the whole Python module; `origin` says where it came from (a path, or
    `hf://ScalingIntelligence/KernelBench/level_1/23` for the dataset). `level` and `problem_id` are
    set when the task comes from a KernelBench layout (`level1/23_Softmax.py`), else None.
    """

    name: str
    source: str
    origin: str
    level: int | None = None
    problem_id: int | None = None

    @property
    def id(self) -> str:
        """Stable identifier: `level1/23_Softmax` for KernelBench tasks, else the name."""
        if self.level is not None:
            return f"level{self.level}/{self.name}"
        return self.name

    @property
    def sha256(self) -> str:
        """Content hash of the source; keys baseline caches and run records."""
        return hashlib.sha256(self.source.encode()).hexdigest()
