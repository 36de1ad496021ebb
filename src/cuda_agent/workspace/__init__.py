"""The agent's working directory (DESIGN section 4), CUDA-Agent compatible.

    model.py                  the reference Model (a read-only copy of the task)
    model_new.py              ModelNew, calling the extension's ops (`import cuda_extension`)
    kernels/*.cu | *.cpp      kernels with C++ launchers (.cpp on the cpu backend)
    kernels/*_binding.cpp     tensor handling + Python bindings, registered with REGISTER_BINDING
    binding.cpp, binding_registry.h, utils/, SKILL.md   fixed (read-only) files

`init_workspace` creates one. The fixed commands (`bash utils/compile.sh`, `python3 -m
utils.verification`, `python3 -m utils.profiling`) call `cuda_agent.workspace.commands.main`, which
reads only `model_new.py` and `kernels/` from the workspace. The task itself is recorded outside it,
under `<cache_dir>/workspaces/<key>/`, because the agent can edit anything inside it (model.py too);
`CUDA_AGENT_TASK` (a task file) overrides the record.

Importing this module is cheap: no torch.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from cuda_agent import pyparse
from cuda_agent.errors import UsageError
from cuda_agent.tasks import Task

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
TASK_ENV = "CUDA_AGENT_TASK"
"""Environment variable naming a task file; when set, the commands use it instead of the record."""

FIXED_FILES = ("binding.cpp", "binding_registry.h", "utils/__init__.py", "utils/compile.sh",
               "utils/verification.py", "utils/profiling.py")
READ_ONLY = 0o444
READ_ONLY_EXEC = 0o555  # utils/compile.sh: runnable as ./utils/compile.sh too
EXAMPLE_OP = "example_scale"
KERNEL_EXT = {"cuda": ".cu", "cpu": ".cpp"}

# Device-specific wording of SKILL.md (placeholders of template/SKILL.md.in besides the computed ones).
_SKILL_TEXT: dict[str, dict[str, str]] = {
    "cuda": {
        "DEVICE_DESC": "an NVIDIA GPU",
        "KERNEL_LANG": "CUDA",
        "KERNEL_FENCE": "cuda",
        "LIBRARIES": "cuBLAS for GEMM and cuDNN for convolutions, called directly (the build links cuBLAS)",
        "SYNC_RULE": "Launch on the current stream (`c10::cuda::getCurrentCUDAStream()`, as in the example). "
                     "Work on other streams must be joined back into it before the op returns: when a "
                     "call returns, all its work is finished or queued on the current stream.",
        "TIMING_SCOPE": "the GPU is idle (every stream), so launch overhead and all work count",
        "FLUSH_NOTE": "; the L2 cache is flushed before each call",
        "TIPS": "## Tips\n\n"
                "- Memory traffic usually dominates: fuse consecutive ops into one kernel so intermediates "
                "never reach global memory.\n"
                "- Coalesce global accesses (consecutive threads, consecutive addresses); use vector loads "
                "(`float4`) where alignment allows.\n"
                "- Reductions: one block per row, warp shuffles (`__shfl_down_sync`), shared memory for the "
                "partial sums.\n"
                "- GEMM and convolutions: cuBLAS/cuDNN called directly are allowed; fuse the element-wise "
                "epilogue (bias, activation) into your own kernel after them, or write a tiled kernel.\n"
                "- No host synchronisation in the op (`cudaDeviceSynchronize`, `.item()`): it costs time.\n",
    },
    "cpu": {
        "DEVICE_DESC": "the CPU (cuda-agent's cpu backend)",
        "KERNEL_LANG": "C++",
        "KERNEL_FENCE": "cpp",
        "LIBRARIES": "OpenMP (`#pragma omp`; the build passes `-fopenmp`) and SIMD intrinsics, "
                     "but no BLAS or other math library",
        "SYNC_RULE": "All work of a call is finished when it returns: no background threads or deferred "
                     "work (OpenMP parallel regions, which join at their end, are fine).",
        "TIMING_SCOPE": "it returns (wall clock), so all work counts",
        "FLUSH_NOTE": "",
        "TIPS": "## Tips\n\n"
                "- Fuse consecutive ops into one loop nest so intermediates stay in cache.\n"
                "- Parallelise the outer loop with `#pragma omp parallel for`; keep the inner loop over "
                "contiguous memory so the compiler vectorises it (`-O3` is on).\n"
                "- Block (tile) loops over matrices so the working set fits in cache.\n"
                "- Skip OpenMP for tiny sizes (`if (n > ...)` clause): starting threads costs microseconds.\n",
    },
}


def _record_key(dest: Path) -> str:
    return hashlib.sha256(os.path.realpath(dest).encode()).hexdigest()[:16]


def record_dir(dest: str | Path, cache_dir: Path | None = None) -> Path:
    """Where the task of the workspace `dest` is recorded: `<cache_dir>/workspaces/<key>/`."""
    from cuda_agent.evaluate.cache_layout import WORKSPACES
    from cuda_agent.evaluate.config import default_cache_dir

    return Path(cache_dir or default_cache_dir()) / WORKSPACES / _record_key(Path(dest))


def _read_record(dest: Path, cache_dir: Path | None) -> tuple[str, dict[str, Any]] | None:
    rec = record_dir(dest, cache_dir)
    try:
        return (rec / "task.py").read_text(encoding="utf-8"), json.loads((rec / "meta.json").read_text())
    except (OSError, ValueError):
        return None


def workspace_task(dest: str | Path, cache_dir: Path | None = None) -> tuple[Task, dict[str, Any]]:
    """The task of the workspace `dest` and its record's metadata (`device` among it).

    `$CUDA_AGENT_TASK`, when set, names the task file and overrides the record. Raises `UsageError`
    when neither exists.
    """
    dest = Path(dest)
    found = _read_record(dest, cache_dir)
    meta = found[1] if found else {}
    if path := os.environ.get(TASK_ENV):
        from cuda_agent.tasks import load_task

        return load_task(path), meta
    if found is None:
        raise UsageError(
            f"{dest}: no task is recorded for this workspace (looked in {record_dir(dest, cache_dir)}); "
            f"create it with `cuda-agent init-workspace TASK {dest}`, or set {TASK_ENV} to the task file")
    source, meta = found
    task = Task(name=meta["name"], source=source, origin=meta["origin"], level=meta.get("level"),
                problem_id=meta.get("problem_id"))
    return task, meta


def _write_record(dest: Path, task: Task, device: str, cache_dir: Path | None) -> None:
    rec = record_dir(dest, cache_dir)
    rec.mkdir(parents=True, exist_ok=True)
    meta = {"task_id": task.id, "name": task.name, "origin": task.origin, "level": task.level,
            "problem_id": task.problem_id, "task_sha256": task.sha256, "device": device,
            "workspace": os.path.realpath(dest), "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    for name, text in (("task.py", task.source), ("meta.json", json.dumps(meta, indent=2) + "\n")):
        tmp = rec / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, rec / name)  # atomic: a command never reads half a record


def _replace(path: Path, text: str, mode: int) -> None:
    """Write `text` to `path` afresh. Whatever was there (a read-only file, a symlink planted in its
    place, a directory) is removed first, so nothing is written through a link."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)


def _real_dir(path: Path) -> None:
    """Make `path` a real directory (not a symlink to one elsewhere)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    path.mkdir(exist_ok=True)


def render_skill(task: Task, device: str) -> str:
    """SKILL.md for `task` on `device` ("cuda" or "cpu")."""
    from cuda_agent.evaluate.config import EvalConfig

    cfg = EvalConfig()
    ext = KERNEL_EXT[device]
    values = {
        **_SKILL_TEXT[device],
        "TASK_ID": task.id,
        "DEVICE": device,
        "KERNEL_EXT": ext,
        "ATOL": f"{cfg.atol:g}",
        "RTOL": f"{cfg.rtol:g}",
        "NORM_TOL": f"{cfg.norm_tol:g}",
        "EXAMPLE_KERNEL": _example(device, EXAMPLE_OP + ext).rstrip("\n"),
        "EXAMPLE_BINDING": _example(device, EXAMPLE_OP + "_binding.cpp").rstrip("\n"),
    }
    text = (TEMPLATE_DIR / "SKILL.md.in").read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    assert "{{" not in text, "SKILL.md.in has a placeholder that render_skill does not fill"
    return text


def _example(device: str, name: str) -> str:
    return (TEMPLATE_DIR / f"kernels_{device}" / name).read_text(encoding="utf-8")


# --- the starter model_new.py ----------------------------------------------------------------------

_STARTER_HEADER = '''\
# model_new.py -- STARTER written by `cuda-agent init-workspace`: a copy of model.py's Model, renamed
# ModelNew. It is correct, but it still computes with PyTorch ops, which the evaluator's policy rejects
# (reward -1). Replace every PyTorch op in forward() with calls into your extension, for example
#
#     y = cuda_extension.example_scale_forward(x, 2.0)   # kernels/example_scale{ext} + its _binding.cpp
#
# Keep __init__'s arguments and its parameters and buffers (names, shapes, dtypes): the reference
# weights are loaded into ModelNew with load_state_dict(strict=True). Do not import model.py: only this
# file and kernels/ are evaluated. See SKILL.md.
'''


def _renamed_class(lines: list[str], node: ast.ClassDef, start: int) -> list[str]:
    """The source lines of class `Model` (from line `start`), renamed `ModelNew`, references included
    (e.g. `super(Model, self)`)."""
    seg = [ln.encode() for ln in lines[start - 1:node.end_lineno]]
    edits: dict[int, list[tuple[int, int]]] = {}  # line index in seg -> [(start, end) byte columns]
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Model" and sub.lineno == sub.end_lineno:
            edits.setdefault(sub.lineno - start, []).append((sub.col_offset, sub.end_col_offset))
    for i, spans in edits.items():
        line = seg[i]
        for a, b in sorted(spans, reverse=True):  # right to left keeps earlier offsets valid
            line = line[:a] + b"ModelNew" + line[b:]
        seg[i] = line
    out = [ln.decode() for ln in seg]
    i = node.lineno - start
    out[i] = re.sub(r"\bclass\s+Model\b", "class ModelNew", out[i], count=1)
    return out


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def _mentions_model(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(node))


def starter_model_new(source: str, device: str) -> str:
    """A starter model_new.py: the task module without get_inputs/get_init_inputs, its `Model` renamed
    `ModelNew`, plus `import cuda_extension` and a header saying what to do. Task code is parsed, never
    run."""
    tree = pyparse.parse(source)
    lines = source.splitlines()
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the module docstring describes the task, not the starter
    chunks: list[tuple[str, list[str]]] = []  # (kind, lines); kind: import, def or code
    emitted: set[int] = set()  # line numbers already copied (statements sharing a line with `;`)
    for node in body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            chunk = _renamed_class(lines, node, start)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.name in ("get_inputs", "get_init_inputs"):
            continue
        elif _is_main_guard(node) or _mentions_model(node):
            continue  # module-level code using the reference would fail (or cheat) in ModelNew's module
        else:
            if all(n in emitted for n in range(start, node.end_lineno + 1)):
                continue
            chunk = lines[start - 1:node.end_lineno]
        emitted.update(range(start, node.end_lineno + 1))
        kind = ("import" if isinstance(node, (ast.Import, ast.ImportFrom))
                else "def" if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                else "code")
        chunks.append((kind, chunk))
    n_imports = next((i for i, (kind, _) in enumerate(chunks) if kind != "import"), len(chunks))
    chunks.insert(n_imports, ("import", ["import cuda_extension  # the module built from kernels/ by "
                                         "utils/compile.sh"]))
    out = [_STARTER_HEADER.format(ext=KERNEL_EXT[device]).rstrip("\n")]
    prev = "header"
    for kind, chunk in chunks:
        if kind == prev and kind != "def":
            pass  # consecutive imports or statements stay together
        elif kind == "def" or prev == "def":
            out += ["", ""]
        else:
            out.append("")
        out.extend(chunk)
        prev = kind
    return "\n".join(out).rstrip("\n") + "\n"


# --- init_workspace --------------------------------------------------------------------------------

def _write_fixed(dest: Path, task: Task, device: str) -> None:
    _real_dir(dest / "utils")
    for rel in FIXED_FILES:
        mode = READ_ONLY_EXEC if rel.endswith(".sh") else READ_ONLY
        _replace(dest / rel, (TEMPLATE_DIR / rel).read_text(encoding="utf-8"), mode)
    _replace(dest / "model.py", task.source, READ_ONLY)
    _replace(dest / "SKILL.md", render_skill(task, device), READ_ONLY)


def _same_task(dest: Path, task: Task, cache_dir: Path | None) -> bool:
    found = _read_record(dest, cache_dir)
    if found is not None:
        return found[1].get("task_sha256") == task.sha256
    # No record (a cleared cache): the workspace's own copy of the task identifies it.
    try:
        return (dest / "model_new.py").is_file() and (dest / "model.py").read_text(encoding="utf-8") == task.source
    except (OSError, UnicodeDecodeError):
        return False


def init_workspace(task: Task, dest: str | Path, device: str = "auto", cache_dir: Path | None = None) -> Path:
    """Create the workspace for `task` in `dest` (a new or empty directory) and record its task.

    On a directory that is already a workspace for the same task, only the fixed files (utils/,
    binding.cpp, binding_registry.h, model.py, SKILL.md) are rewritten; model_new.py and kernels/ are
    kept. `device` ("cuda", "cpu" or "auto": cuda when nvidia-smi lists a GPU) selects the example
    kernel, the wording of SKILL.md, and the default device of the workspace's commands. Returns the
    workspace's resolved path.
    """
    from cuda_agent.evaluate.config import DEVICES
    from cuda_agent.evaluate.device import resolve_device

    if device not in DEVICES:
        raise UsageError(f"device={device!r}: use one of {', '.join(DEVICES)}")
    device = resolve_device(device)
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"{dest}: exists and is not a directory; give a new or empty directory")
    refresh = dest.is_dir() and any(dest.iterdir())
    if refresh and not _same_task(dest, task, cache_dir):
        found = _read_record(dest, cache_dir)
        what = (f"already a workspace for another task ({found[1].get('task_id')})" if found
                else "not empty")
        raise UsageError(f"{dest}: {what}; give a new or empty directory, or remove this one first")
    dest.mkdir(parents=True, exist_ok=True)
    dest = dest.resolve()

    _write_fixed(dest, task, device)
    if not refresh:  # a refresh never touches the agent's files
        (dest / "kernels").mkdir()
        ext = KERNEL_EXT[device]
        for name in (EXAMPLE_OP + ext, EXAMPLE_OP + "_binding.cpp"):
            (dest / "kernels" / name).write_text(_example(device, name), encoding="utf-8")
        (dest / "model_new.py").write_text(starter_model_new(task.source, device), encoding="utf-8")
    _write_record(dest, task, device, cache_dir)
    return dest


__all__ = ["TASK_ENV", "init_workspace", "record_dir", "render_skill", "starter_model_new", "workspace_task"]
