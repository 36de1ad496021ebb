"""Worked examples: small tasks, each with reference candidates in both forms and for both backends.

Each example is a folder holding `task.py` (KernelBench format) and its candidates:

    cpu_single.py     cpu_workspace/     (C++ with OpenMP, for `--device cpu`)
    cuda_single.py    cuda_workspace/    (CUDA, for `--device cuda`)

A *single* candidate is one `.py` file defining `ModelNew` that builds its kernels with
`torch.utils.cpp_extension.load_inline`; a *workspace* candidate is a directory holding
`model_new.py` and `kernels/`, built by the evaluator into the module `cuda_extension`. An example
ships only the candidates that make sense for it (gemm_cublas is CUDA only).

The folders are package data, not Python packages. This module does not import torch, nor the
task loaders: `cuda_agent.tasks.example_tasks()` loads the examples' tasks.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from cuda_agent import pyparse
from cuda_agent.errors import UsageError

EXAMPLES_DIR = Path(__file__).resolve().parent
DEVICES = ("cpu", "cuda")
FORMS = ("single", "workspace")


@dataclass(frozen=True)
class Example:
    name: str
    directory: Path
    description: str

    @property
    def task(self) -> Path:
        """The example's task file (KernelBench format)."""
        return self.directory / "task.py"

    def candidate_path(self, device: str, form: str) -> Path:
        """Where the `form` candidate for `device` lives (whether or not this example has one)."""
        if device not in DEVICES:
            raise UsageError(f"device {device!r}: examples have candidates for {', '.join(DEVICES)}")
        if form not in FORMS:
            raise UsageError(f"form {form!r}: use one of {', '.join(FORMS)}")
        return self.directory / (f"{device}_single.py" if form == "single" else f"{device}_workspace")

    def candidates(self, device: str) -> dict[str, Path]:
        """{"single": path, "workspace": path} for `device` ("cpu" or "cuda"), only those present."""
        found: dict[str, Path] = {}
        for form in FORMS:
            path = self.candidate_path(device, form)
            present = path.is_file() if form == "single" else (path / "model_new.py").is_file()
            if present:
                found[form] = path
        return found

    @property
    def devices(self) -> tuple[str, ...]:
        """The backends this example has at least one candidate for."""
        return tuple(d for d in DEVICES if self.candidates(d))


def _description(task: Path) -> str:
    """The first line of the task module's docstring (read with ast: the task is not imported)."""
    try:
        doc = ast.get_docstring(pyparse.parse(task.read_text()))
    except (OSError, SyntaxError, UnicodeDecodeError):
        doc = None
    return doc.strip().splitlines()[0] if doc else ""


def list_examples() -> list[Example]:
    """Every example shipped with the package, sorted by name."""
    return [Example(d.name, d, _description(d / "task.py"))
            for d in sorted(EXAMPLES_DIR.iterdir(), key=lambda p: p.name)
            if d.is_dir() and (d / "task.py").is_file()]


def get_example(name: str) -> Example:
    """The example called `name`; `UsageError` naming the available ones when there is none."""
    examples = list_examples()
    for example in examples:
        if example.name == name:
            return example
    raise UsageError(f"no example named {name!r}; available: {', '.join(e.name for e in examples)}")


__all__ = ["DEVICES", "EXAMPLES_DIR", "Example", "FORMS", "get_example", "list_examples"]
