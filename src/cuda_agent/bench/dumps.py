"""Published kernel dumps as solutions: the files other systems released, read as they are.

A dump is a table of generated kernels, one row per kernel, in a JSON file (an array of rows, rows
one per line, or an object holding such arrays, e.g. one per level), a JSONL file, a Parquet or
Arrow file, or a folder of them (a Hugging Face dataset as downloaded or saved included). Its shape
says which it is:

- CUDA-L1's `optimized_cuda_code/<gpu>.json` and `optimized_cuda_code/codes/<gpu>.json` (rows held
  under their level, `"1": [...]`): `level_id` (or that key), `task_id` (KernelBench's problem id,
  from 1), `ref_code` (the task as CUDA-L1 ran it), `custom_code` (null where it has none), and its
  claimed speedups `score_*` (`score_default` over eager PyTorch). A row with a kernel is taken as
  claimed correct: CUDA-L1 publishes the kernels that passed its own checks, with their speedups.
- The KernelBench leaderboard's `raw_data.json`: `level`, `problem_id` (from 0), `model`, `code`,
  and speedups (`speedup*` columns) and correctness where it gives them.
- The AI CUDA Engineer's archive (Sakana AI, `level_<n>.parquet` on Hugging Face): `Level_ID`,
  `Task_ID` (from 1), `CUDA_Code` (a CUDA extension exporting `forward`, not a ModelNew module),
  `PyTorch_Code_Functional` (the task with its computation in `module_fn`, which `Model.forward`
  takes as `fn=`), `PyTorch_Code_Module` (the task), `Correct`, `CUDA_Speedup_Native`. Each
  kernel becomes the module its archive ran (`functional_candidate`).
- KernelBench's samples (`ScalingIntelligence/kernelbench-samples`): a folder of one file per
  kernel, `level1/MODEL/problem_19/sample_0/kernel.json`, each an object with the `kernel` and its
  `eval_result`: level, model, problem (from 1) and sample from the folders (`path_fields`).
- An object of task names to code (`{"level1/19_ReLU": "..."}`), or rows with `task` and `code`.
- Anything else through `Columns` (`--columns level=...,problem=...,code=...,model=...,sample=...`),
  which says whether problem ids count from 0 or 1. Columns one object down are named
  `outer.inner`; a folder layout's fields are `path.level`, `path.problem`, `path.sample`, `path.model`.

Claimed figures are read the same way from every shape (`claims`): correctness from a column named
`correct` (`Correct`, `is_correct`, `correctness`, `passed`), speedups from the columns whose name
holds `speedup`, the one over eager PyTorch (`eager`, `native`, else not `compile`) as the claim.

`read_dump` turns a dump into `Entry` rows (the claimed figures kept beside the code); a file of
unknown shape gets an error that shows the keys found and the `--columns` line that would read it.
`dump_match.py` matches the entries to a task set.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from cuda_agent import pyparse
from cuda_agent.bench.solutions import KB_RUN_FILE, Solution
from cuda_agent.errors import UsageError

SUFFIXES = (".json", ".jsonl", ".parquet", ".arrow")
# files of a dataset folder that describe it and hold no rows (`datasets`' save_to_disk and the Hub's)
METADATA = frozenset({"dataset_info.json", "dataset_infos.json", "dataset_dict.json", "state.json"})
COLUMN_KEYS = ("level", "problem", "task", "code", "model", "sample", "ref", "correct", "speedup", "base")
CORRECT_NAMES = ("correct", "correctness", "is_correct", "passed")  # a column of claimed correctness, any case
# a task's name as dumps write it: level1/19_ReLU(.py), level_1_problem_19(_sample_0...), 1/19_ReLU
TASK_NAME = re.compile(r"^\s*level[_ ]?(\d+)(?:/|_problem_|[_ ]+)(\d+)(?=\b|_)|^\s*(\d+)/(\d+)(?=_|\b)", re.I)
GROUP = "group"  # rows held in an object by key ({"1": [...], ...}) get the key in this column


@dataclass
class Entry:
    """One kernel of a dump: where it came from (`origin`: file and row), the KernelBench task it
    claims to solve (problem ids from 1), its code, and what the dump claims about it."""

    origin: str
    level: int
    problem: int
    code: str
    model: str | None = None
    sample: int | None = None
    ref_code: str | None = None
    claimed: dict[str, Any] = field(default_factory=dict)  # correct, speedup (over eager), the raw figures


@dataclass(frozen=True)
class Columns:
    """Which column holds what, for a dump of no known shape; `base`: the first problem id (0 or 1)."""

    level: str | None
    problem: str | None
    code: str
    task: str | None = None  # a column of task names (level1/19_ReLU), in place of level and problem
    model: str | None = None
    sample: str | None = None
    ref: str | None = None
    correct: str | None = None  # the dump's claimed correctness (else a column named like CORRECT_NAMES)
    speedup: str | None = None  # its claimed speedup over eager (else a column named *speedup*)
    base: int = 1

    @classmethod
    def parse(cls, text: str) -> "Columns":
        """`level=L,problem=P,code=C[,model=M][,sample=S][,ref=R][,correct=K][,speedup=X],base=0|1`
        (base: 1 if left out; `problem=P:0` says the same as base=0), or `task=T,code=C,...`: a
        column of task names (level1/19_ReLU, level_1_problem_19) in place of level and problem."""
        pairs: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            if not sep or key not in COLUMN_KEYS or not value:
                raise UsageError(f"--columns {text!r}: {part!r} is not KEY=COLUMN with KEY one of "
                                 f"{', '.join(COLUMN_KEYS)}; e.g. --columns level=level,problem=problem_id,"
                                 "code=kernel,base=0")
            pairs[key] = value
        if pairs.get("problem", "")[-2:] in (":0", ":1"):  # problem=COLUMN:0, the same as base=0
            pairs["problem"], pairs["base"] = pairs["problem"][:-2], pairs["problem"][-1]
        missing = [k for k in (("code",) if "task" in pairs else ("level", "problem", "code")) if k not in pairs]
        if missing:
            raise UsageError(f"--columns {text!r}: name the column of {', '.join(missing)} too (or task=COLUMN "
                             "for a column of task names such as level1/19_ReLU, in place of level and problem)")
        base = pairs.pop("base", "1")
        if base not in ("0", "1"):
            raise UsageError(f"--columns {text!r}: base must be 0 or 1 (the first problem id), not {base!r}")
        return cls(**{"level": None, "problem": None, **pairs}, base=int(base))


# -- reading --
def dump_files(path: Path) -> list[Path]:
    """The dump files at `path`: the file itself, or those in the folder (recursively), less hidden
    folders and a dataset's own metadata (`METADATA`), so that a downloaded or saved Hugging Face
    dataset is read as its folder."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES
                  and p.name not in METADATA and not any(part.startswith(".") for part in p.relative_to(path).parts))


def is_dump(path: Path) -> bool:
    """Is `path` a dump (a dump file, or a folder with dump files and no candidate `.py` files)?"""
    if path.is_file():
        return path.suffix.lower() in SUFFIXES
    return path.is_dir() and bool(dump_files(path)) and not any(path.rglob("*.py"))


def read_rows(file: Path) -> list[tuple[str, dict[str, Any]]]:
    """The rows of one dump file, each with its origin (`file#i`, or `file#key/i` inside an object)."""
    if file.suffix.lower() in (".parquet", ".arrow"):
        return [(f"{file}#{i}", r) for i, r in enumerate(_arrow_rows(file))]
    text = file.read_text(errors="replace")
    if file.suffix.lower() == ".jsonl":
        return _rows_of(_json_lines(file, text), str(file))
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # rows one per line (CUDA-L1's .json files are)
        data = _json_lines(file, text)
    return _rows_of(data, str(file))


def _arrow_rows(file: Path) -> list[dict[str, Any]]:
    """A Parquet file's rows, or an Arrow file's (`datasets`' save_to_disk writes Arrow streams)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kind = "Parquet" if file.suffix.lower() == ".parquet" else "Arrow"
    try:
        if kind == "Parquet":
            return pq.read_table(file).to_pylist()
        try:
            return pa.ipc.open_stream(file).read_all().to_pylist()
        except pa.ArrowInvalid:
            return pa.ipc.open_file(file).read_all().to_pylist()
    except Exception as exc:  # noqa: BLE001 - any reader failure is the file's
        raise UsageError(f"{file}: cannot read it as {kind} ({exc})") from None


def _json_lines(file: Path, text: str) -> list[Any]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UsageError(f"{file}:{n}: not a JSON row ({exc.msg}); a dump holds one JSON object "
                                 "per line, or one JSON array of objects") from None
    return rows


def _rows_of(data: Any, origin: str) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(data, list):
        sep = "/" if "#" in origin else "#"  # file#3, or file#KEY/3 for rows held under a key
        rows = [(f"{origin}{sep}{i}", r) for i, r in enumerate(data)]
        bad = next((o for o, r in rows if not isinstance(r, dict)), None)
        if bad is not None:
            raise UsageError(f"{bad}: a row must be a JSON object (keys and values), not "
                             f"{type(dict(rows)[bad]).__name__}")
        return rows
    if isinstance(data, dict):
        if data and all(isinstance(v, str) for v in data.values()) and any(TASK_NAME.match(k) for k in data):
            return [(f"{origin}#{k}", {"task": k, "code": v}) for k, v in data.items()]  # {"level1/19_ReLU": code}
        lists = {k: v for k, v in data.items()
                 if isinstance(v, list) and v and isinstance(v[0], dict) and not {"role", "content"} <= set(v[0])}
        if lists:  # {"1": [...], "2": [...]} (rows by level: the key is their column GROUP), or {"data": [...]}
            return [(o, {GROUP: key, **row} if GROUP not in row else row)
                    for key, v in lists.items() for o, row in _rows_of(v, f"{origin}#{key}")]
        return [(f"{origin}#0", data)]
    raise UsageError(f"{origin}: holds {type(data).__name__}, not rows (a JSON array of objects, or one "
                     "object per line)")


# -- recognising --
def _kernel_code(x: Any) -> str | None:
    """A row's kernel source, or None where the row has none: null, empty, or a missing value
    written out as text (CUDA-L1's h100.json has `"custom_code": "None"` in 17 rows whose scores
    belong to its other variants; a table written by pandas has "nan"). A model's whole reply
    (prose around ```python fences, as datasets of generations keep it) gives its fenced module
    (`pyparse.extract_module`: the block defining ModelNew); a reply without one is kept as it is,
    for the evaluator to say what is wrong with it."""
    if not isinstance(x, str) or x.strip().lower() in ("", "none", "null", "nan"):
        return None
    if "```" in x:
        try:
            ast.parse(x)
        except SyntaxError:
            try:
                return pyparse.extract_module(x, "ModelNew")
            except ValueError:
                return x
    return x


def _code_cell(x: Any, folder: Path | None, origin: str) -> Any:
    """A code cell's text: a cell that names a source file (one line ending in .py, .cu or .cpp: a
    table of a run folder's kernels) gives the file's text, the path taken from the dump's folder,
    which it must stay inside; a chat (a list of {"role", "content"} messages, as datasets of
    generations keep them) its last assistant message; text is the code itself."""
    if isinstance(x, list) and x and all(isinstance(m, dict) and "content" in m for m in x):
        said = [m for m in x if m.get("role") == "assistant"] or x
        return said[-1]["content"]
    if x is not None and not isinstance(x, str):
        raise UsageError(f"{origin}: its code cell holds {type(x).__name__}, not text: name the column of the "
                         "kernels' source (or of file paths, or of chat messages) as code=COLUMN")
    if x is None or folder is None or "\n" in x.strip() or Path(x.strip()).suffix not in (".py", ".cu", ".cpp"):
        return x
    path = (folder / x.strip()).resolve()
    if not path.is_relative_to(folder.resolve()) or not path.is_file():
        raise UsageError(f"{origin}: its code names the file {x.strip()!r}, which is not a file inside the dump's "
                         f"folder {folder}: a code column holds the kernels' source, or their paths from there")
    return path.read_text(errors="replace")


def _number(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _int(x: Any, origin: str, what: str) -> int:
    if isinstance(x, bool) or x is None:
        raise UsageError(f"{origin}: {what} is {x!r}, not a number")
    try:
        v = int(str(x).strip().lower().removeprefix("level_").removeprefix("level"))
    except ValueError:
        raise UsageError(f"{origin}: {what} is {x!r}, not a whole number") from None
    return v


def _flat(row: dict[str, Any], depth: int = 3) -> dict[str, Any]:
    """The row with the keys of objects inside it, down to `depth` levels, as `outer.inner` (a dump
    that keeps its verdicts as `{"kernelbench": {"correct": ...}}` or `{"eval_result": {"eval_0":
    {...}}}`)."""
    out = dict(row)
    for k, v in row.items():
        if isinstance(v, dict) and depth > 1:
            out.update({f"{k}.{inner}": x for inner, x in _flat(v, depth - 1).items() if f"{k}.{inner}" not in row})
    return out


def claims(row: dict[str, Any], correct: str | None = None, speedup: str | None = None) -> dict[str, Any]:
    """What a row claims of its kernel: `correct` (a boolean column, `correct` or one named like
    CORRECT_NAMES in any case, in the row or up to two objects down in it), `speedup` (over eager
    PyTorch: the column `speedup`, else of the columns whose name holds "speedup" one with `eager`
    or `native` in it, else one without `compile`, whatever their order), and every speedup figure
    under its own name."""
    flat = _flat(row)
    figures = {k: v for k, v in ((k, _number(v)) for k, v in flat.items() if "speedup" in k.lower()) if v is not None}
    if speedup is not None:
        claimed = _number(flat.get(speedup))
    else:
        eager = [v for k, v in figures.items() if "eager" in k.lower() or "native" in k.lower()] or \
            [v for k, v in figures.items() if "compile" not in k.lower()] or list(figures.values())
        claimed = eager[0] if eager else None
    if correct is None:
        named = [k for k in flat if k.lower().rpartition(".")[2] in CORRECT_NAMES]
        correct = min(named, key=lambda k: ("." in k, CORRECT_NAMES.index(k.lower().rpartition(".")[2])), default=None)
    said = flat.get(correct) if correct is not None else None
    if isinstance(said, str) and said.strip().lower() in ("true", "false"):
        said = said.strip().lower() == "true"
    return {"correct": bool(said) if isinstance(said, (bool, int)) and said in (0, 1) else None,
            "speedup": claimed, **figures}


def _level(row: dict[str, Any], origin: str, key: str) -> int:
    """The row's level: its own column, else the key it was held under (CUDA-L1's codes/<gpu>.json)."""
    if row.get(key) is None and row.get(GROUP) is None:
        raise UsageError(f"{origin}: no {key} (and not held under a level's key)")
    return _int(row[key], origin, key) if row.get(key) is not None else _int(row[GROUP], origin, "its level key")


def _cuda_l1(origin: str, row: dict[str, Any]) -> Entry | None:
    code = _kernel_code(row.get("custom_code"))
    if code is None:
        return None  # CUDA-L1 has no kernel for this task
    scores = {k: _number(v) for k, v in row.items() if k.startswith("score")}
    level = _level(row, origin, "level_id")
    return Entry(origin, level, _int(row["task_id"], origin, "task_id"), code,
                 model="CUDA-L1", ref_code=row.get("ref_code") if isinstance(row.get("ref_code"), str) else None,
                 claimed={"correct": True, "speedup": scores.get("score_default", scores.get("score")),
                          **{k: v for k, v in scores.items() if v is not None}})


def _leaderboard(origin: str, row: dict[str, Any]) -> Entry | None:
    code = _kernel_code(row.get("code"))
    if code is None:
        return None
    claimed = claims(row)
    if claimed["correct"] is None and claimed["speedup"] is not None and claimed["speedup"] > 0:
        claimed["correct"] = True  # the leaderboard times (and lists) only kernels its evaluation found correct
    return Entry(origin, _level(row, origin, "level"), _int(row["problem_id"], origin, "problem_id") + 1,
                 code, model=str(row["model"]) if row.get("model") is not None else None,
                 sample=_int(row["sample_id"], origin, "sample_id") if row.get("sample_id") is not None else None,
                 claimed=claimed)


def functional_candidate(cuda_code: str, functional: str) -> str:
    """A ModelNew module from a CUDA extension that exports `forward` and the task in functional
    form (the AI CUDA Engineer's): the functional module as it is, the extension built with
    `load_inline` (its own PYBIND11_MODULE binds it), and ModelNew, the functional `Model` with
    the extension's `forward` passed as `fn`, as the archive evaluated it."""
    return (f"{functional.rstrip()}\n\n\n"
            "# The kernel: a CUDA extension exporting forward(), run in place of module_fn.\n"
            "from torch.utils.cpp_extension import load_inline as _load_inline\n\n"
            f"_CUDA_SOURCE = {cuda_code!r}\n"
            "_extension = _load_inline(name=\"functional_kernel\", cpp_sources=\"\", cuda_sources=_CUDA_SOURCE)\n\n\n"
            "class ModelNew(Model):\n"
            "    def forward(self, *args):\n"
            "        return super().forward(*args, fn=_extension.forward)\n")


def _ai_cuda_engineer(origin: str, row: dict[str, Any]) -> Entry | None:
    cuda, functional = _kernel_code(row.get("CUDA_Code")), _kernel_code(row.get("PyTorch_Code_Functional"))
    if cuda is None or functional is None:
        return None
    ref = row.get("PyTorch_Code_Module")
    claimed = claims(row)
    if isinstance(row.get("Kernel_Name"), str):
        claimed["kernel_name"] = row["Kernel_Name"]
    return Entry(origin, _level(row, origin, "Level_ID"), _int(row["Task_ID"], origin, "Task_ID"),
                 functional_candidate(cuda, functional), model="AI CUDA Engineer",
                 ref_code=ref if isinstance(ref, str) else None, claimed=claimed)


def _kernelbench_sample(origin: str, row: dict[str, Any]) -> Entry | None:
    code = _kernel_code(row.get("kernel"))
    if code is None:
        return None
    level = row.get("path.level", row.get("level"))
    sample = row.get("path.sample")
    return Entry(origin, _int(level, origin, "level"), _int(row["path.problem"], origin, "problem"), code,
                 model=row.get("path.model"), sample=sample, claimed=claims(row))


# (name, keys a row must have, one of which, reader): the first that a file's first row fits reads it
SHAPES = (
    ("CUDA-L1", {"task_id", "custom_code"}, {"level_id", GROUP}, _cuda_l1),
    ("KernelBench leaderboard", {"problem_id", "model", "code"}, {"level", GROUP}, _leaderboard),
    ("AI CUDA Engineer", {"Task_ID", "CUDA_Code", "PyTorch_Code_Functional"}, {"Level_ID", GROUP}, _ai_cuda_engineer),
    ("KernelBench samples", {"kernel", "path.problem"}, {"path.level", "level"}, _kernelbench_sample),
    ("task names", {"task", "code"}, {"task"}, lambda o, r: _by_columns(
        Columns(None, None, "code", task="task", **{k: k for k in ("model", "sample") if k in r}), o, r)),
)


def _require(columns: Iterable[str | None], flat: dict[str, Any], origin: str) -> None:
    """Every column named (`--columns`) is in the row (`_flat`), or an error that lists its keys."""
    missing = [c for c in columns if c is not None and c not in flat]
    if missing:
        raise UsageError(f"{origin}: no column {', '.join(map(repr, missing))} (--columns); its keys: "
                         f"{', '.join(sorted(flat))}")


def _by_columns(cols: Columns, origin: str, row: dict[str, Any], folder: Path | None = None) -> Entry | None:
    flat = _flat(row)
    _require((cols.level, cols.problem, cols.task, cols.code, cols.model, cols.sample, cols.ref), flat, origin)
    code = _kernel_code(_code_cell(flat[cols.code], folder, origin))
    if code is None:
        return None
    level, problem = _level_problem(cols, origin, flat)
    return Entry(origin, level, problem, code,
                 model=str(flat[cols.model]) if cols.model and flat[cols.model] is not None else None,
                 sample=_int(flat[cols.sample], origin, cols.sample) if cols.sample and flat[cols.sample] is not None else None,
                 ref_code=flat[cols.ref] if cols.ref and isinstance(flat[cols.ref], str) else None,
                 claimed=claims(row, cols.correct, cols.speedup))


def _level_problem(cols: Columns, origin: str, row: dict[str, Any]) -> tuple[int, int]:
    """A row's level and problem id (from 1), from their columns or from a task name (`task=`;
    a level column, where given, serves names without a level: 19_ReLU)."""
    if cols.task is None:
        return (_int(row[cols.level], origin, cols.level),
                _int(row[cols.problem], origin, cols.problem) + (1 - cols.base))
    name = str(row[cols.task])
    if (m := TASK_NAME.match(name)) is not None:
        level, problem = (int(g) for g in (m.groups()[:2] if m.group(1) else m.groups()[2:]))
        return level, problem + (1 - cols.base)
    if cols.level is not None and (m := re.match(r"^\s*(\d+)(?=_|\.py|$)", Path(name).name)) is not None:
        return _int(row[cols.level], origin, cols.level), int(m.group(1)) + (1 - cols.base)
    raise UsageError(f"{origin}: {cols.task} is {name!r}, not a task name with its level and problem "
                     "(level1/19_ReLU, level_1_problem_19); add level=COLUMN for names without a level (19_ReLU)")


def suggest_columns(row: dict[str, Any]) -> str:
    """A `--columns` line guessed from a row's keys and what they hold (the user checks it: it is
    shown, never used). The code is the longest text that looks like code, else a column named like
    code; level, problem and sample are whole numbers; a text naming the task (level1/19_ReLU, or
    19_ReLU beside a level) stands for level and problem."""
    keys = list(row)
    text = [k for k in keys if isinstance(row[k], str)]
    whole = [k for k in keys if isinstance(row[k], int) and not isinstance(row[k], bool)
             or isinstance(row[k], str) and re.fullmatch(r"\s*(level_?)?\d+\s*", row[k], re.I)]

    def pick(among: list[str], *words: str) -> str | None:
        return next((k for w in words for k in among if w in k.lower()), None)

    def codelike(value: str) -> bool:
        return "\n" in value and any(s in value for s in ("ModelNew", "__global__", "import ", "```", "#include"))

    code = (max((k for k in text if codelike(row[k])), key=lambda k: len(row[k]), default=None)
            or pick(text, "code", "kernel", "solution", "completion", "response", "generation", "output")
            or max(text, key=lambda k: len(row[k]), default="CODE"))
    names = [k for k in text if k != code]
    level = pick(whole, "level", "lvl")
    parts: dict[str, str]
    if (named := next((k for k in names if TASK_NAME.match(row[k])), None)) is not None:
        parts = {"task": named}
    elif level is not None and (short := next((k for k in names if re.match(r"^\s*\d+_\w", row[k])), None)):
        parts = {"task": short, "level": level}  # 19_ReLU: the problem id of KernelBench's file name
    else:
        numbers = [k for k in whole if k != level]
        parts = {"level": level or "LEVEL",
                 "problem": pick(numbers, "problem", "task", "pid", "id") or "PROBLEM"}
    parts["code"] = code
    if (model := pick(names, "model")) is not None:
        parts["model"] = model
    if (sample := pick([k for k in whole if k not in parts.values()], "sample")) is not None:
        parts["sample"] = sample
    line = ",".join(f"{k}={v}" for k, v in parts.items())
    if "problem" not in parts:  # task names carry KernelBench's problem ids, which count from 1
        return f"--columns {line}"
    return f"--columns {line},base=1   (base=0 if its problem ids count from 0)"


def path_fields(file: Path) -> dict[str, Any]:
    """What the folders of a dump file say of its rows, for a dump laid out as one file per kernel
    (KernelBench's samples: `level1/MODEL/problem_19/sample_0/kernel.json`): `path.level`,
    `path.problem` and `path.sample` from folders named so, and `path.model`, the folder between
    the level's and the problem's. The four folders above the file are read, so that a dump given
    as one model's folder (`level1/MODEL`) still has its level."""
    parts = file.resolve().parts[-5:-1]
    out: dict[str, Any] = {}
    at: dict[str, int] = {}
    for i, part in enumerate(parts):
        if (m := re.fullmatch(r"(level|problem|sample)[_-]?(\d+)", part, re.I)) is not None:
            out[f"path.{m.group(1).lower()}"], at[m.group(1).lower()] = int(m.group(2)), i
    if at.keys() >= {"level", "problem"} and at["problem"] - at["level"] == 2:
        out["path.model"] = parts[at["level"] + 1]
    return out


def read_dump(path: str | Path, columns: Columns | None = None) -> tuple[list[Entry], dict[str, str]]:
    """The entries of the dump at `path` (a file or a folder of them) and, per file, the shape it
    was read as. Rows without code (a task the dump has no kernel for) are left out."""
    root = Path(path)
    if not root.exists():
        raise UsageError(f"{root}: no such file or folder")
    files = dump_files(root)
    if not files:
        raise UsageError(f"{root}: no dump file here ({', '.join(SUFFIXES)})")
    entries: list[Entry] = []
    shapes: dict[str, str] = {}
    for file in files:
        rows = read_rows(file)
        if not rows:
            raise UsageError(f"{file}: holds no rows")
        if fields := path_fields(file):
            rows = [(o, {**fields, **r}) for o, r in rows]
        first = rows[0][1]
        if columns is not None:
            shapes[str(file)] = "columns"
            _require((columns.correct, columns.speedup), _flat(first), rows[0][0])  # later rows may leave a claim out
            read = lambda o, r, folder=file.parent: _by_columns(columns, o, r, folder)  # noqa: E731
        else:
            shape = next(((name, fn) for name, keys, level, fn in SHAPES if keys <= set(first) and level & set(first)),
                         None)
            if shape is None:
                raise UsageError(f"{file}: a dump of unknown shape; its rows have the keys "
                                 f"{', '.join(sorted(first))}. Say which column holds what, e.g.:\n  "
                                 + suggest_columns(first))
            shapes[str(file)] = shape[0]
            read = shape[1]
        for origin, row in rows:
            if (e := read(origin, row)) is not None:
                entries.append(e)
    return entries, shapes


def run_folder_claims(folder: Path, solutions: list[Solution]) -> list[tuple[str, int, str, dict[str, Any]]]:
    """What a KernelBench run folder's own `eval_results.json` says of its kernels (by problem id,
    one result or a list of them by `sample_id`): compiled, correct, its runtime; for the run store's
    `claimed`, matched to `solutions` found in that folder's run layout. Empty without the file."""
    results = folder / "eval_results.json"
    if not results.is_file():
        return []
    try:
        data = json.loads(results.read_text(errors="replace"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{results}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{results}: expected an object keyed by problem id, found {type(data).__name__}")
    out = []
    for sol in solutions:
        m = KB_RUN_FILE.match(sol.path.name)
        if m is None or sol.path.parent != folder:
            continue
        problem, sample = m.group(2), int(m.group(3))
        got = data.get(problem)
        rows = got if isinstance(got, list) else [got] if isinstance(got, dict) else []
        row = next((r for r in rows if isinstance(r, dict) and r.get("sample_id", 0) == sample), None)
        if row is None:
            continue
        correct = row.get("correctness", row.get("correct"))
        runtime = _number(row.get("runtime"))
        out.append((sol.task.id, sol.sample, f"{results}#{problem}/{sample}",
                    {"correct": bool(correct) if isinstance(correct, bool) else None, "speedup": None,
                     "compiled": row.get("compiled"), **({"runtime_ms": runtime} if runtime and runtime > 0 else {})}))
    return out
