"""The package's exception tree.

Every error a user can cause derives from `CudaAgentError` and also from the standard category it
belongs to, so callers can catch either. Messages say what happened, where, and what to do.
Evaluation verdicts are never exceptions: a failing candidate is an `EvalResult` with reasons.
"""

from __future__ import annotations


class CudaAgentError(Exception):
    """Root of every error raised by cuda_agent on purpose."""


class UsageError(CudaAgentError, ValueError):
    """Bad input from the user: a path that does not exist, an option out of range."""


class TaskError(CudaAgentError, ValueError):
    """A task file that is not a valid KernelBench-format task.

    `path` and `line` locate the problem (line is 1-based, or None when it concerns the whole file).
    """

    def __init__(self, path: str, message: str, line: int | None = None):
        self.path = path
        self.line = line
        self.detail = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


class CandidateError(CudaAgentError, ValueError):
    """A candidate path that is neither a single file defining ModelNew nor a workspace directory."""
