"""Loading and statically validating KernelBench-format tasks.

A task is a Python module that defines a class `Model` (with `forward`) and two module-level
functions, `get_inputs()` and `get_init_inputs()`, each returning a list. Validation parses the
module with `ast` only: task code is never executed here, and neither torch nor datasets is imported
when this module is imported (`datasets` is imported lazily by `load_hf_kernelbench`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from cuda_agent import pyparse
from cuda_agent.errors import TaskError, UsageError
from cuda_agent.tasks.model import Task

_LEVEL_DIR = re.compile(r"^level(\d+)$")
_TASK_FILE = re.compile(r"^(\d+)_.*\.py$")
_TASK_STEM = re.compile(r"^(\d+)_")
_NEEDS_NETWORK_LEVELS = frozenset({4})
_DEFAULT_HF_SOURCE = "ScalingIntelligence/KernelBench"
_LOCAL_FORMATS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}
_SHAPE_HINT = "a KernelBench task needs `Model`, `get_inputs()` and `get_init_inputs()`"


# --------------------------------------------------------------------------------------------------
# Static validation
# --------------------------------------------------------------------------------------------------


def _positional_range(fn: ast.FunctionDef | ast.AsyncFunctionDef, skip_self: bool) -> tuple[int, int | None]:
    """(required, maximum) positional arguments of `fn`; maximum is None when it takes *args."""
    params = list(fn.args.posonlyargs) + list(fn.args.args)
    if skip_self and params:
        params = params[1:]
    n_defaults = min(len(fn.args.defaults), len(params))
    required = len(params) - n_defaults
    maximum = None if fn.args.vararg is not None else len(params)
    return required, maximum


def _describe_range(required: int, maximum: int | None) -> str:
    if maximum is None:
        return f"at least {required}"
    if required == maximum:
        return f"exactly {required}"
    return f"{required} to {maximum}"


def _literal_return_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int] | None:
    """(item count, line) when `fn` ends with `return [a, b, ...]` without starred items, else None."""
    if not fn.body:
        return None
    last = fn.body[-1]
    if not isinstance(last, ast.Return) or not isinstance(last.value, (ast.List, ast.Tuple)):
        return None
    if any(isinstance(elt, ast.Starred) for elt in last.value.elts):
        return None
    return len(last.value.elts), last.lineno


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    found = None
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            found = node  # the last definition wins, as at runtime
    return found


def validate_task_source(source: str, path: str) -> None:
    """Check statically that `source` is a KernelBench-format task; raise `TaskError` if not.

    Checks: the module parses; it defines class `Model` with a `forward` method; it defines
    `get_inputs()` and `get_init_inputs()` callable with no arguments; and, where both sides are
    literal, the number of items `get_inputs()` / `get_init_inputs()` return matches the positional
    parameters of `Model.forward` / `Model.__init__`. The source is parsed, never executed.
    """
    try:
        tree = pyparse.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(
            path,
            f"syntax error: {exc.msg}; fix the Python syntax of the task module",
            exc.lineno,
        ) from None
    except ValueError as exc:  # e.g. source containing NUL bytes
        raise TaskError(path, f"cannot be parsed as Python: {exc}") from None

    model: ast.ClassDef | None = None
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            model = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node

    if model is None:
        raise TaskError(path, f"defines no class `Model`; {_SHAPE_HINT}")

    forward = _method(model, "forward")
    if forward is None:
        raise TaskError(
            path,
            "class `Model` has no `forward` method; define `def forward(self, ...)` in `Model` "
            "taking the tensors that `get_inputs()` returns",
            model.lineno,
        )

    for name, role in (
        ("get_inputs", "the list of forward arguments"),
        ("get_init_inputs", "the list of `Model(...)` constructor arguments"),
    ):
        fn = functions.get(name)
        if fn is None:
            raise TaskError(
                path,
                f"defines no function `{name}()`; add a module-level `def {name}():` returning "
                f"{role} ({_SHAPE_HINT})",
            )
        required, _ = _positional_range(fn, skip_self=False)
        kw_required = [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]
        if required or kw_required:
            raise TaskError(
                path,
                f"`{name}()` requires parameters but is called with no arguments; "
                f"remove its parameters or give them defaults",
                fn.lineno,
            )

    _check_arity(path, functions["get_inputs"], forward, "forward", "get_inputs")
    init = _method(model, "__init__")
    if init is not None:
        _check_arity(path, functions["get_init_inputs"], init, "__init__", "get_init_inputs")


def _check_arity(
    path: str,
    producer: ast.FunctionDef | ast.AsyncFunctionDef,
    consumer: ast.FunctionDef | ast.AsyncFunctionDef,
    consumer_name: str,
    producer_name: str,
) -> None:
    literal = _literal_return_count(producer)
    if literal is None:
        return
    count, return_line = literal
    required, maximum = _positional_range(consumer, skip_self=True)
    if count >= required and (maximum is None or count <= maximum):
        return
    raise TaskError(
        path,
        f"`{producer_name}()` returns {count} item(s) (line {return_line}) but "
        f"`Model.{consumer_name}` (line {consumer.lineno}) takes "
        f"{_describe_range(required, maximum)} positional argument(s) besides self; "
        f"make the returned list match the `{consumer_name}` signature",
        return_line,
    )


# --------------------------------------------------------------------------------------------------
# Files and KernelBench checkouts
# --------------------------------------------------------------------------------------------------


def _level_and_id(path: Path) -> tuple[int | None, int | None]:
    level_match = _LEVEL_DIR.match(path.parent.name)
    id_match = _TASK_STEM.match(path.stem)
    if level_match and id_match:
        return int(level_match.group(1)), int(id_match.group(1))
    return None, None


def load_task(path: str | Path) -> Task:
    """Read, validate and return the task in the Python file `path`.

    `level` and `problem_id` are set when the file sits in a KernelBench layout
    (`.../level1/23_Softmax.py`); the task name is the file stem.
    """
    p = Path(path)
    if p.suffix != ".py":
        raise UsageError(f"{p}: a task must be a Python file (`.py`); pass the task module's path")
    if not p.exists():
        raise UsageError(f"{p}: task file does not exist; check the path")
    if not p.is_file():
        raise UsageError(f"{p}: is not a file; pass the path of a task module (`.py`)")
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{p}: cannot read the task file ({exc}); check its permissions and encoding") from None
    validate_task_source(source, str(p))
    level, problem_id = _level_and_id(p)
    return Task(name=p.stem, source=source, origin=str(p), level=level, problem_id=problem_id)


def _level_dirs(folder: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    if folder.is_dir():
        for child in folder.iterdir():
            m = _LEVEL_DIR.match(child.name)
            if m and child.is_dir():
                found[int(m.group(1))] = child
    return found


def load_kernelbench(root: str | Path, levels: Iterable[int] | None = None) -> list[Task]:
    """Load every task of a KernelBench checkout, sorted by (level, problem_id).

    `root` may be the checkout root (holding `KernelBench/level1/...`), its `KernelBench/` folder, or
    any folder holding `level1/`..`levelN/` directly. `levels` defaults to every level present
    except 4 (its tasks need network access). Files not named `<id>_<Name>.py` are skipped.
    """
    base = Path(root)
    if not base.is_dir():
        raise UsageError(f"{base}: KernelBench root does not exist or is not a folder; check the path")
    candidates = [base, base / "KernelBench"]
    dirs: dict[int, Path] = {}
    for candidate in candidates:
        dirs = _level_dirs(candidate)
        if dirs:
            break
    if not dirs:
        looked = ", ".join(f"{c}/level<N>/" for c in candidates)
        raise UsageError(
            f"{base}: no KernelBench level folder found (looked for {looked}); pass a KernelBench "
            f"checkout root, its `KernelBench/` folder, or a folder holding `level1/`, `level2/`, ..."
        )

    if levels is None:
        wanted = sorted(lv for lv in dirs if lv not in _NEEDS_NETWORK_LEVELS)
    else:
        wanted = sorted({int(lv) for lv in levels})
        missing = [lv for lv in wanted if lv not in dirs]
        if missing:
            present = ", ".join(str(lv) for lv in sorted(dirs)) or "none"
            raise UsageError(
                f"{base}: level(s) {', '.join(map(str, missing))} not found (present: {present}); "
                f"choose among the present levels"
            )

    tasks: list[Task] = []
    for lv in wanted:
        for file in dirs[lv].iterdir():
            if file.is_file() and _TASK_FILE.match(file.name):
                tasks.append(load_task(file))
    tasks.sort(key=lambda t: (t.level, t.problem_id, t.name))
    return tasks


# --------------------------------------------------------------------------------------------------
# Hugging Face dataset (hub or local copy)
# --------------------------------------------------------------------------------------------------


def _import_datasets():
    try:
        import datasets  # noqa: PLC0415 - heavy optional dependency, imported on demand
    except ImportError:
        raise UsageError(
            "loading the KernelBench dataset needs the `datasets` package; "
            "install it with `pip install 'cuda-agent[data]'`"
        ) from None
    return datasets


def _row_task(row: dict, origin: str, default_level: int | None) -> Task:
    name = row.get("name") if row.get("name") is not None else row.get("id")
    missing = [col for col, value in (("code", row.get("code")), ("name", name)) if value is None]
    if missing:
        raise UsageError(
            f"{origin}: row lacks column(s) {', '.join(missing)}; a task row needs `code` and `name` "
            f"(or `id`, as in datasets made by `cuda-agent synth`); KernelBench's also `level` and `problem_id`"
        )
    name = str(name)
    if name.endswith(".py"):
        name = name[: -len(".py")]
    level = row.get("level")
    level = int(level) if level is not None else default_level
    problem_id = row.get("problem_id")
    if problem_id is None:
        m = _TASK_STEM.match(name)
        problem_id = int(m.group(1)) if m else None
    else:
        problem_id = int(problem_id)
    source = str(row["code"])
    validate_task_source(source, origin)
    return Task(name=name, source=source, origin=origin, level=level, problem_id=problem_id)


def _local_files(path: Path) -> list[Path]:
    if path.is_file():
        if path.suffix.lower() not in _LOCAL_FORMATS:
            raise UsageError(
                f"{path}: unsupported dataset file type; use one of "
                f"{', '.join(sorted(_LOCAL_FORMATS))}"
            )
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in _LOCAL_FORMATS)
    if not files:
        raise UsageError(
            f"{path}: folder holds no dataset file ({', '.join(sorted(_LOCAL_FORMATS))}); "
            f"pass a folder with the dataset files, a single file, or a hub name"
        )
    return files


def load_hf_kernelbench(
    source: str | Path = _DEFAULT_HF_SOURCE, levels: Iterable[int] | None = None
) -> list[Task]:
    """Load KernelBench from the Hugging Face dataset, or from a local copy of it.

    `source` is a hub dataset name (splits `level_1`..`level_4`), a local `.parquet`/`.jsonl`/
    `.json`/`.csv` file, or a folder of such files (columns `code`, `level`, `name`, `problem_id`).
    `levels` defaults to 1, 2 and 3 (level 4 needs network access at evaluation time). Every row's
    code is validated; origins are `hf://<source>/level_<L>/<problem_id>` or `<file>#<row>`.
    """
    wanted = None if levels is None else sorted({int(lv) for lv in levels})
    default_levels = [1, 2, 3]
    local = Path(source)
    tasks: list[Task] = []

    if local.exists():
        datasets = _import_datasets()
        keep = set(wanted) if wanted is not None else set(default_levels)
        for file in _local_files(local):
            fmt = _LOCAL_FORMATS[file.suffix.lower()]
            try:
                ds = datasets.load_dataset(fmt, data_files=str(file), split="train")
            except Exception as exc:  # noqa: BLE001 - report any reader failure as a usage error
                raise UsageError(f"{file}: cannot read as {fmt} dataset ({exc}); check the file") from None
            for i, row in enumerate(ds):
                origin = f"{file}#{i}"
                level = row.get("level")
                if level is None:
                    if row.get("id") is None:
                        raise UsageError(
                            f"{origin}: row has no `level`; a KernelBench dataset row needs "
                            f"`code`, `level`, `name` and `problem_id` (a dataset of ours: `id` and `code`)"
                        )
                    if wanted is None:  # a dataset of ours: tasks without levels
                        tasks.append(_row_task(row, origin, None))
                elif int(level) in keep:
                    tasks.append(_row_task(row, origin, None))
    else:
        looks_local = Path(str(source)).suffix.lower() in _LOCAL_FORMATS
        if isinstance(source, Path) or looks_local or str(source).startswith((".", "/")):
            raise UsageError(f"{source}: no such file or folder; pass an existing local dataset or a hub name")
        datasets = _import_datasets()
        for lv in wanted if wanted is not None else default_levels:
            split = f"level_{lv}"
            try:
                ds = datasets.load_dataset(str(source), split=split)
            except Exception as exc:  # noqa: BLE001 - network/hub failures become one clear message
                raise UsageError(
                    f"cannot load split `{split}` of dataset `{source}` ({type(exc).__name__}: {exc}); "
                    f"check the name and network access, or pass a local copy (.parquet/.jsonl) instead"
                ) from None
            for i, row in enumerate(ds):
                pid = row.get("problem_id", i)
                tasks.append(_row_task(row, f"hf://{source}/{split}/{pid}", lv))

    tasks.sort(key=lambda t: (t.level if t.level is not None else 0, t.problem_id or 0, t.name))
    return tasks


# --------------------------------------------------------------------------------------------------
# Any task set named on the command line
# --------------------------------------------------------------------------------------------------


def example_tasks() -> list[Task]:
    """Every bundled example's task (`cuda_agent.examples`), named after its example (each file is
    `task.py` in the example's folder)."""
    from cuda_agent.examples import list_examples

    return [replace(load_task(e.task), name=e.name) for e in list_examples()]


def load_taskset(spec: str | Path, levels: Iterable[int] | None = None) -> list[Task]:
    """The tasks of a TASKSET argument: `examples` (the bundled ones), a KernelBench checkout (its
    root, its `KernelBench/` folder, or a folder of `levelN/`), a task file (`.py`), a dataset file or
    folder (`.jsonl`, `.parquet`, ...: KernelBench's or one made by `cuda-agent synth`), or the output
    folder of `cuda-agent synth` (its tasks.jsonl)."""
    if str(spec) == "examples":
        return example_tasks()
    path = Path(spec)
    if path.is_file() and path.suffix == ".py":
        return [load_task(path)]
    if path.is_file() and path.suffix.lower() in _LOCAL_FORMATS:
        return load_hf_kernelbench(path, levels=levels)
    if path.is_dir():
        if (path / "synth.json").is_file() and (path / "tasks.jsonl").is_file():  # a `cuda-agent synth` folder
            return load_hf_kernelbench(path / "tasks.jsonl", levels=levels)
        if _level_dirs(path) or _level_dirs(path / "KernelBench"):
            return load_kernelbench(path, levels=levels)
        return load_hf_kernelbench(path, levels=levels)
    raise UsageError(f"{spec}: no such task set; pass `examples`, a KernelBench checkout, a task file (.py) "
                     f"or a dataset file ({', '.join(sorted(_LOCAL_FORMATS))})")
