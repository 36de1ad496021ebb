"""Building a workspace's `kernels/` into the module `cuda_extension`, through a content-addressed cache.

The key covers everything that changes the binary: the sources (the candidate's kernels and our fixed
binding files), the flags, the compiler, torch, Python and the target architecture. A hit costs a
hash and a stat; a miss compiles in a child process (`python -m cuda_agent.evaluate.build`) under a
wall-clock limit (`python -m cuda_agent.evaluate.build_child`), into a private directory that is
renamed into the cache only when the build succeeded, so concurrent builds of the same key never see
half-written files. A compile error is cached too (`<key>.failed`): the same sources fail the same
way, and an agent re-running verify after a failed compile should not wait for the compiler again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from cuda_agent.evaluate.candidate import Candidate

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "workspace" / "template"
FIXED_FILES = ("binding.cpp", "binding_registry.h")
MODULE_NAME = "cuda_extension"
CFLAGS = ["-O3"]  # the C++ standard is left to torch.utils.cpp_extension: its headers need the one it picks
CPU_CFLAGS = ["-fopenmp"]
CPU_LDFLAGS = ["-fopenmp"]
CUDA_CFLAGS = ["-O3", "--use_fast_math"]
CUDA_LDFLAGS = ["-lcublas"]
LOG_LIMIT = 20000


@dataclass(frozen=True, slots=True)
class BuildResult:
    ok: bool
    so_path: Path | None
    key: str
    cached: bool
    seconds: float
    log: str  # compiler output (tail), for the model to read
    timed_out: bool = False


@lru_cache(maxsize=None)
def _tool_version(*cmd: str) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[-1] if out.returncode == 0 else "?"
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


@lru_cache(maxsize=None)
def _torch_version() -> str:
    """torch's version without importing it (the harness stays light)."""
    from importlib.metadata import version

    return version("torch")


def build_key(candidate: Candidate, device: str, arch: str | None) -> str:
    h = hashlib.sha256()

    def feed(label: str, data: str) -> None:
        h.update(f"{label}\0{len(data)}\0".encode())
        h.update(data.encode())

    for name in FIXED_FILES:
        feed(name, (TEMPLATE_DIR / name).read_text())
    for name in candidate.compiled_sources + [n for n in sorted(candidate.kernels)
                                              if n not in candidate.compiled_sources]:
        feed("kernels/" + name, candidate.kernels[name])
    feed("device", device)
    feed("arch", arch or "")
    feed("flags", json.dumps([CFLAGS, CPU_CFLAGS, CPU_LDFLAGS, CUDA_CFLAGS, CUDA_LDFLAGS]))
    feed("cxx", _tool_version(os.environ.get("CXX", "c++"), "--version"))
    if device == "cuda":
        feed("nvcc", _tool_version("nvcc", "--version"))
    feed("torch", _torch_version())
    feed("python", sys.version)
    return h.hexdigest()[:32]


def build_extension(candidate: Candidate, device: str, arch: str | None, cache_dir: Path,
                    timeout_s: float) -> BuildResult | None:
    """Build the candidate's kernels, or return None when it has no compiled sources."""
    if not candidate.compiled_sources:
        return None
    t0 = time.monotonic()
    key = build_key(candidate, device, arch)
    final = cache_dir / "builds" / key
    so = final / f"{MODULE_NAME}.so"
    if so.is_file():
        return BuildResult(True, so, key, True, time.monotonic() - t0, _read_log(final))
    failed = cache_dir / "builds" / f"{key}.failed"
    if failed.is_file():
        return BuildResult(False, None, key, True, time.monotonic() - t0, failed.read_text())
    if device == "cpu" and (cu := [n for n in candidate.compiled_sources if n.endswith(".cu")]):
        return BuildResult(False, None, key, False, time.monotonic() - t0,
                           f"kernels/{cu[0]}: CUDA sources cannot be built for the cpu backend; "
                           "write the kernels as C++ in kernels/*.cpp, or evaluate with --device cuda")
    (cache_dir / "builds").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=cache_dir / "builds"))
    try:
        for name in FIXED_FILES:
            shutil.copy(TEMPLATE_DIR / name, work / name)
        (work / "kernels").mkdir()
        for name, src in candidate.kernels.items():
            (work / "kernels" / name).write_text(src)
        cmd = [sys.executable, "-m", "cuda_agent.evaluate.build_child", str(work), device, arch or ""]
        env = dict(os.environ, PYTHONPATH=package_root())
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return BuildResult(False, None, key, False, time.monotonic() - t0,
                               _tail(out.decode(errors="replace")), timed_out=True)
        log = _tail(out.decode(errors="replace"))
        built = work / "build" / f"{MODULE_NAME}.so"
        if proc.returncode != 0 or not built.is_file():
            tmp_failed = work / "failed.log"
            tmp_failed.write_text(log)
            os.replace(tmp_failed, failed)
            return BuildResult(False, None, key, False, time.monotonic() - t0, log)
        (work / "build.log").write_text(log)
        os.replace(built, work / f"{MODULE_NAME}.so")
        shutil.rmtree(work / "build", ignore_errors=True)
        try:
            work.rename(final)  # atomic publish
            work = None  # type: ignore[assignment]
        except OSError:  # another evaluation published the same key first: use theirs
            pass
        return BuildResult(True, so, key, False, time.monotonic() - t0, log)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _read_log(d: Path) -> str:
    f = d / "build.log"
    return f.read_text() if f.is_file() else ""


def _tail(s: str) -> str:
    return s if len(s) <= LOG_LIMIT else "[... compiler output truncated ...]\n" + s[-LOG_LIMIT:]


def package_root() -> str:
    """The PYTHONPATH that lets a child process import this package as the parent does."""
    roots = [str(Path(__file__).resolve().parents[2])]
    if os.environ.get("PYTHONPATH"):
        roots.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(roots)
