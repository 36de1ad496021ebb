"""What the judge and the runners share: verdict-bearing failures and their classification, the one
timed call, the device, the precision switches, and the evaluation's directory and environment.

Imports nothing heavy at module level: torch is imported inside the functions that need it.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from pathlib import Path
from typing import Any

from cuda_agent.evaluate.guard import NAMESPACES, namespace_objects, resolve
from cuda_agent.evaluate.result import Code
from cuda_agent.text import clip

ILLEGAL_ADDRESS_ERRORS = {700, 716, 717, 718, 719}  # cudaErrorIllegalAddress ... cudaErrorLaunchFailure
CUDA_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation: the runtime's own out of memory (not the caching allocator's)
# a CUDA library that could not allocate device memory for its handle or workspace (`cublasCreate`
# on a full GPU): out of memory too, which a neighbour on the GPU may have caused
LIBRARY_OUT_OF_MEMORY = re.compile(r"\b(?:CUBLAS|CUDNN|CUSOLVER|CUSPARSE|CUFFT)_(?:STATUS_)?ALLOC_FAILED\b")


class Failure(Exception):
    """A verdict-bearing failure raised inside a worker command."""

    def __init__(self, code: Code, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def trace(exc: BaseException, limit: int = 6000) -> str:
    """The whole traceback of `exc` (its tail when long): for failures of the task's or our code."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return clip(text, limit, keep="tail")


def candidate_trace(exc: BaseException, root: str | os.PathLike, limit: int = 6000) -> str:
    """`exc` as the candidate's author should read it: the frames of its own files (under `root`,
    named relative to it), where a library raised it, and the exception; no frame of the harness,
    of importlib or of the worker. A syntax error reads `model_new.py, line N` with the line and a
    caret. When no frame is the candidate's (the harness itself failed on what it returned), the
    whole traceback."""
    root = os.path.realpath(root)

    def mine(filename: str) -> str | None:
        if not os.path.isabs(filename):  # <frozen importlib...>, <string>
            return None
        path = os.path.realpath(filename)
        return os.path.relpath(path, root) if path.startswith(root + os.sep) else None

    if isinstance(exc, SyntaxError) and exc.filename and (name := mine(exc.filename)):
        text = (exc.text or "").rstrip("\n")
        caret = ""
        if text and exc.offset:
            indent = len(text) - len(text.lstrip())
            caret = "\n    " + " " * max(exc.offset - 1 - indent, 0) + "^"
        return f"{name}, line {exc.lineno}: {type(exc).__name__}: {exc.msg}\n    {text.strip()}{caret}"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [(name, f) for f in frames if (name := mine(f.filename))]
    if not own:
        return trace(exc, limit)
    lines = ["Traceback (your code, most recent call last):"]
    for name, f in own:
        lines.append(f"  {name}, line {f.lineno}, in {f.name}" + (f"\n    {f.line}" if f.line else ""))
    last = frames[-1]
    if not mine(last.filename) and not _harness_file(last.filename):
        lines.append(f"  raised in {_library_path(last.filename)}, line {last.lineno}, in {last.name}")
    lines.append("".join(traceback.format_exception_only(type(exc), exc)).rstrip())
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is not None:
        lines.append("caused by: " + "".join(traceback.format_exception_only(type(cause), cause)).rstrip())
    text = "\n".join(lines)
    return clip(text, limit)


_PACKAGE_DIR = str(Path(__file__).resolve().parents[2])  # cuda_agent/


def _harness_file(filename: str) -> bool:
    return filename.startswith("<frozen") or os.path.realpath(filename).startswith(_PACKAGE_DIR + os.sep)


def _library_path(filename: str) -> str:
    """A library's file as `package/module.py` (from site-packages on), else as it is."""
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1:])
    return filename


def classify(exc: BaseException, root: str | os.PathLike | None = None) -> tuple[Code, str]:
    """Reason code and message for an exception escaping candidate (or task) code. `root`: the
    folder of the candidate's files, whose frames alone the message shows (`candidate_trace`)."""
    import torch

    from cuda_agent.evaluate.guard import GuardFailure

    if isinstance(exc, (Failure, GuardFailure)):
        return exc.code, exc.message
    if isinstance(exc, SystemExit):
        return Code.EARLY_EXIT, f"candidate code tried to exit the process (SystemExit({exc.code!r})) instead of returning"
    message = candidate_trace(exc, root) if root is not None else trace(exc)
    if isinstance(exc, torch.OutOfMemoryError) or (isinstance(exc, RuntimeError) and (
            "DefaultCPUAllocator: can't allocate memory" in str(exc) or LIBRARY_OUT_OF_MEMORY.search(str(exc)))):
        return Code.OUT_OF_MEMORY, message
    accel = getattr(torch, "AcceleratorError", None)
    if accel is not None and isinstance(exc, accel):
        if getattr(exc, "error_code", None) in ILLEGAL_ADDRESS_ERRORS:
            return Code.ILLEGAL_MEMORY_ACCESS, message
        if getattr(exc, "error_code", None) == CUDA_OUT_OF_MEMORY:  # a neighbour may have caused it
            return Code.OUT_OF_MEMORY, message
    return Code.RUNTIME_ERROR, message


def device_of(name: str):
    import torch

    if name == "cuda":
        if not torch.cuda.is_available():
            raise Failure(Code.DEVICE_UNAVAILABLE,
                          "--device cuda was asked for, but torch sees no CUDA device here "
                          f"(torch {torch.__version__}); use --device cpu")
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def timed_call(timer: Any, fn: Any, args: list[Any], spin: bool = True) -> tuple[Any, float]:
    """The one timed call, for eager, torch.compile and the candidate alike: caches flushed, then the
    host clock around the call and a device-wide synchronize (every stream of the process), in
    milliseconds. `spin=False` (correctness trials, whose times nobody uses): the waits sleep
    instead of holding a core (`Timer.sync`)."""
    import torch

    timer.flush()
    timer.touch(spin)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = fn(*args)
        timer.sync(spin)
        ms = (time.perf_counter() - t0) * 1e3
    return out, ms


def nothing() -> None:
    return None


def read_switch(get: Any) -> Any:
    """A precision switch's value, or "refused" where torch will not read it: a process that set
    its precision through both torch's older API (allow_tf32, set_float32_matmul_precision) and
    the newer one (fp32_precision) makes the older getters raise."""
    try:
        return get()
    except RuntimeError:
        return "refused"


def precision_switches() -> dict[str, Any]:
    """Precision switches that change results (recorded in the result, allowed within tolerance).
    Whether cuBLAS float32 matmuls use TF32 comes from the older switch, or where torch refuses
    to read it, from the newer one (`none` there inherits the global `torch.backends` setting)."""
    import torch

    m = torch.backends.cuda.matmul
    new = getattr(m, "fp32_precision", None)
    tf32 = read_switch(lambda: bool(m.allow_tf32))
    if tf32 == "refused":
        tf32 = new == "tf32" or (new == "none" and getattr(torch.backends, "fp32_precision", None) == "tf32")
    return {"matmul_allow_tf32": tf32, "matmul_fp32_precision": new,
            "float32_matmul_precision": read_switch(torch.get_float32_matmul_precision)}


def name_process(role: str) -> None:
    """Call this process `ca-<role>` where ps, top and /proc show a command's name (Linux, 15
    bytes): a worker forked from the zygote otherwise shows as one more python, and the machine's
    CPU and device memory can then be told apart by role. Nothing happens elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, f"ca-{role}"[:15].encode(), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def enter(cwd: str, env: dict[str, Any]) -> None:
    """Move into an evaluation's directory and environment."""
    import tempfile

    os.chdir(cwd)
    os.environ.update({str(k): str(v) for k, v in env.items()})
    tempfile.tempdir = None  # TMPDIR may have changed


_warm_timer: Any = None  # the Timer a warmed spare made (keep_warm_timer), for the role it becomes


def keep_warm_timer(timer: Any) -> None:
    """Keep the Timer a spare warmed up for the first `timer_for` of the role it becomes."""
    global _warm_timer
    _warm_timer = timer


def timer_for(device: Any, touch: str) -> Any:
    """A Timer for `device` with `touch`: the one this process warmed as a spare, if it is that,
    else a new one."""
    global _warm_timer
    from cuda_agent.evaluate.timing import Timer

    timer, _warm_timer = _warm_timer, None
    if timer is not None and timer.device == device and timer.touch_kind == touch:
        return timer
    return Timer(device, touch)


def process_state() -> dict[str, Any]:
    """What task code can change in the judge's process that would change a later task's
    reference or inputs: torch's global switches, the functions of its public namespaces (a patch),
    Python threads left running."""
    import threading
    import warnings

    import torch

    with warnings.catch_warnings():  # some switches have newer spellings and warn when read
        warnings.simplefilter("ignore")
        state: dict[str, Any] = {
            "default dtype": torch.get_default_dtype(),
            "grad mode": torch.is_grad_enabled(),
            "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
            "CPU threads": torch.get_num_threads(),
            "Python threads": threading.active_count(),
            "cudnn": (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark,
                      torch.backends.cudnn.deterministic, read_switch(lambda: torch.backends.cudnn.allow_tf32),
                      getattr(torch.backends.cudnn, "fp32_precision", None)),
            "matmul": (torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
                       torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
            **precision_switches(),
        }
        get_default_device = getattr(torch, "get_default_device", None)
        if get_default_device is not None:
            state["default device"] = str(get_default_device())
    for name in NAMESPACES:  # functions, classes, descriptors: not flags (torch.cuda._initialized)
        state[name] = namespace_objects(name)
    return state


def state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two `process_state`s: changed switches, and attributes of torch's
    namespaces replaced or removed, or added to a class (a method shadowing its base's; a module
    gains attributes as torch loads its submodules lazily)."""
    changes = []
    for key, old in before.items():
        new = after.get(key)
        if key in NAMESPACES:
            replaced = [a for a, v in old.items() if a not in new or new[a] is not v]
            if isinstance(resolve(key), type):
                replaced += [a for a in new if a not in old]
            if replaced:
                changes.append(f"{key}: {', '.join(sorted(replaced)[:4])} replaced")
        elif new != old:
            changes.append(f"{key}: {old!r} -> {new!r}")
    return changes
