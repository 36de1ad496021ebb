"""Which candidate solves which task: the two layouts of a solutions folder.

Ours: one candidate per task, a single file or a workspace, named after the task:
    DIR/level1/19_ReLU.py   or  DIR/level1/19_ReLU/model_new.py   (KernelBench task ids)
    DIR/19_ReLU.py          or  DIR/19_ReLU/model_new.py          (the task's name alone)
KernelBench's run layout: several samples per task, found anywhere under DIR:
    level_{L}_problem_{P}_sample_{S}_kernel.py

A folder may mix both; a task then gets every sample found (ours is sample 0 unless a KernelBench
file claims that number). Files that fit neither layout, or name a task that is not in the task
set, are reported, never guessed at. `bundled_solutions` gives the bundled examples' own candidates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.errors import UsageError
from cuda_agent.examples import FORMS, list_examples
from cuda_agent.tasks import Task, example_tasks

KB_RUN_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


@dataclass(frozen=True, slots=True)
class Solution:
    task: Task
    sample: int
    path: Path


@dataclass
class Found:
    solutions: list[Solution] = field(default_factory=list)
    unmatched: list[Path] = field(default_factory=list)  # files fitting no task of the set

    def by_task(self) -> dict[str, list[Solution]]:
        out: dict[str, list[Solution]] = {}
        for s in self.solutions:
            out.setdefault(s.task.id, []).append(s)
        return out


def find_solutions(folder: str | Path, tasks: list[Task]) -> Found:
    """Match the candidates under `folder` to `tasks` (both layouts)."""
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"{root}: the solutions folder does not exist or is not a folder; pass a folder "
                         "holding one candidate per task (e.g. level1/19_ReLU.py) or KernelBench's "
                         "level_L_problem_P_sample_S_kernel.py files")
    by_kb = {(t.level, t.problem_id): t for t in tasks if t.level is not None and t.problem_id is not None}
    found = Found()
    taken: set[tuple[str, int]] = set()

    def add(task: Task, sample: int, path: Path) -> None:
        if (task.id, sample) in taken:
            raise UsageError(f"{path}: a second candidate for task {task.id} sample {sample}; keep one")
        taken.add((task.id, sample))
        found.solutions.append(Solution(task, sample, path))

    kb_files = sorted(p for p in root.rglob("level_*_problem_*_sample_*_kernel.py") if p.is_file())
    for p in kb_files:
        m = KB_RUN_FILE.match(p.name)
        task = by_kb.get((int(m.group(1)), int(m.group(2)))) if m else None
        if task is None:
            found.unmatched.append(p)
            continue
        add(task, int(m.group(3)), p)
    kb_set = set(kb_files)
    for task in tasks:
        names = [task.id, task.name] if task.id != task.name else [task.name]
        for name in names:
            path = _ours(root, name)
            if path is not None and path not in kb_set:
                sample = 0
                while (task.id, sample) in taken:
                    sample += 1
                add(task, sample, path)
                break
    used = {s.path for s in found.solutions}
    workspaces = {s.path for s in found.solutions if s.path.is_dir()}
    for p in sorted(root.rglob("*.py")):
        if p in used or p in found.unmatched or any(w in p.parents for w in workspaces):
            continue
        unit = next((a for a in p.parents if a != root and root in a.parents and (a / "model_new.py").is_file()),
                    p)  # a stray workspace is reported once, not file by file
        if unit not in found.unmatched:
            found.unmatched.append(unit)
    found.solutions.sort(key=lambda s: (s.task.level or 0, s.task.problem_id or 0, s.task.id, s.sample))
    return found


def bundled_solutions(device: str) -> list[Solution]:
    """The bundled examples' own candidates for `device` ("cpu" or "cuda"): the single file as
    sample 0, the workspace as sample 1 (FORMS' order); an example without one for `device` has none."""
    tasks = {t.name: t for t in example_tasks()}
    return [Solution(tasks[ex.name], FORMS.index(form), path)
            for ex in list_examples() for form, path in ex.candidates(device).items()]


def _ours(root: Path, name: str) -> Path | None:
    single, workspace = root / f"{name}.py", root / name
    if single.is_file():
        return single
    if (workspace / "model_new.py").is_file():
        return workspace
    return None
