"""A dump's entries (`dumps.read_dump`) matched to a task set, as solutions to judge.

`to_solutions` writes each entry's code into a folder in KernelBench's run layout and matches it
to the task set by level and problem id, as `solutions.find_solutions` does for a run folder. A
dump that carries the reference it ran (CUDA-L1's `ref_code`) is checked against the task it is
matched to: a reference whose sizes changed, or that differs beyond formatting and comments
(`reference_difference`), is reported and not judged against another task; `dump_tasks` makes
the task set from the dump's own references instead (`--tasks-from-dump`). `split_by_model` makes
one run per model of a dump of several.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from cuda_agent import pyparse
from cuda_agent.bench.dumps import Entry
from cuda_agent.bench.solutions import Found, Solution
from cuda_agent.errors import TaskError, UsageError
from cuda_agent.tasks import Task, validate_task_source

SIMILARITY = 0.9  # a dump's reference this far from the task's (text, formatting and comments aside) is another task


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:80] or "model"


def _normalized(source: str) -> str | None:
    """The module as Python sees it: no comments, no docstrings, one formatting."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def _sizes(source: str) -> dict[str, Any]:
    """The module-level constants (`batch_size = 16`, `N = 2048 * 2`): where a task keeps its sizes."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if (v := pyparse.constant(node.value, out)) is not None:
                out[node.targets[0].id] = v
    return out


def _inputs(normalized: str) -> str | None:
    """get_inputs and get_init_inputs of a module (`_normalized`): how a task makes its inputs."""
    try:
        tree = ast.parse(normalized)
    except (SyntaxError, ValueError):
        return None
    return "\n".join(ast.unparse(n) for n in tree.body
                     if isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs"))


def reference_difference(task: str, theirs: str) -> tuple[str, bool] | None:
    """How the dump's reference `theirs` differs from the task's source `task`: None where only
    formatting, comments and docstrings do; else (how, whether it is another task: its sizes
    changed, its inputs are made otherwise (another distribution is another task), or its text is
    less than SIMILARITY alike)."""
    a, b = _normalized(task), _normalized(theirs)
    if a is not None and a == b:
        return None
    ours, their = _sizes(task), _sizes(theirs)
    changed = [f"{k} = {their[k]!r} there, {ours[k]!r} here" for k in sorted(ours.keys() & their.keys())
               if ours[k] != their[k]]
    if changed:
        return "its sizes changed: " + ", ".join(changed[:4]), True
    if _inputs(a or task) != _inputs(b or theirs):
        return "its inputs are made otherwise (get_inputs or get_init_inputs differ)", True
    ratio = difflib.SequenceMatcher(None, a or task, b or theirs, autojunk=False).ratio()
    if ratio < SIMILARITY:
        return f"its reference differs (similarity {ratio:.2f})", True
    return f"its reference differs a little (similarity {ratio:.2f}); judged against the task set's", False


@dataclass
class Mismatch:
    """An entry whose reference is not exactly the task's it is matched to: `other` (another task:
    not judged) or only a little different (judged, and reported)."""

    entry: Entry
    task: Task
    why: str
    other: bool


def dump_tasks(entries: list[Entry], names: list[Task]) -> list[Task]:
    """The task set of the dump's own references (`--tasks-from-dump`): one task per (level,
    problem) that has a reference, named as the task of the same level and problem in `names`
    where there is one."""
    named = {(t.level, t.problem_id): t.name for t in names}
    tasks: dict[tuple[int, int], Task] = {}
    for e in entries:
        if e.ref_code is None or (e.level, e.problem) in tasks:
            continue
        try:
            validate_task_source(e.ref_code, e.origin)
        except TaskError as exc:
            raise UsageError(f"{e.origin}: the dump's reference is not a task: {exc}") from None
        name = named.get((e.level, e.problem), f"{e.problem}_from_dump")
        tasks[(e.level, e.problem)] = Task(name=name, source=e.ref_code, origin=e.origin, level=e.level,
                                           problem_id=e.problem)
    if not tasks:
        raise UsageError("--tasks-from-dump: the dump carries no reference code (CUDA-L1's `ref_code`, or "
                         "--columns ref=...); judge it against the task set instead")
    return [tasks[k] for k in sorted(tasks)]


def to_solutions(entries: Iterable[Entry], tasks: list[Task], folder: Path
                 ) -> tuple[Found, dict[tuple[str, int], Entry], list[Mismatch]]:
    """Write each entry's code into `folder` in KernelBench's run layout and match it to `tasks` by
    level and problem id. Samples number a task's entries in the dump's order (its own sample ids
    where it gives them and they are free). Returns the solutions (entries of no task of the set
    in `unmatched`, by origin), the entry behind each (task id, sample), and the entries whose
    reference is not exactly the task's (those of another task left out)."""
    by_kb = {(t.level, t.problem_id): t for t in tasks if t.level is not None and t.problem_id is not None}
    folder.mkdir(parents=True, exist_ok=True)
    found = Found()
    behind: dict[tuple[str, int], Entry] = {}
    mismatched: list[Mismatch] = []
    for e in entries:
        task = by_kb.get((e.level, e.problem))
        if task is None:
            found.unmatched.append(Path(e.origin))
            continue
        if e.ref_code is not None and (diff := reference_difference(task.source, e.ref_code)):
            mismatched.append(Mismatch(e, task, *diff))
            if diff[1]:
                continue
        sample = e.sample if e.sample is not None and (task.id, e.sample) not in behind else 0
        while (task.id, sample) in behind:
            sample += 1
        path = folder / f"level_{e.level}_problem_{e.problem}_sample_{sample}_kernel.py"
        path.write_text(e.code)
        behind[(task.id, sample)] = e
        found.solutions.append(Solution(task, sample, path))
    found.solutions.sort(key=lambda s: (s.task.level or 0, s.task.problem_id or 0, s.task.id, s.sample))
    return found, behind, mismatched


def split_by_model(entries: list[Entry]) -> dict[str, list[Entry]]:
    """The entries of each model (in the dump's order), for one run per model."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(_slug(e.model or "model"), []).append(e)
    return out
