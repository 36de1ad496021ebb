"""Building a workspace's `kernels/` into the module `cuda_extension`, through a content-addressed cache.

The key covers everything that changes the binary: the sources (the candidate's kernels and our fixed
binding files), the flags, the compiler, torch, Python and the target architecture. A hit costs a
hash and a stat; a miss compiles in a child process (`python -m cuda_agent.evaluate.build_child`)
under a wall-clock limit, into a private directory that is renamed into the cache only when the
build succeeded, so concurrent builds of the same key never see half-written files. A compile error
is cached too (`<key>.failed`): the same sources fail the same way, and an agent re-running verify
after a failed compile should not wait for the compiler again.

A miss builds where the same workspace built last (`builds/incremental/<slot>`, one per workspace
folder and toolchain), so that ninja compiles again only the units whose source changed: an agent
edits one kernel between compiles, and the fixed binding and the other kernels keep their objects.
The slot is brought to the candidate's sources file by file (a file is written only where its text
changed), the objects of changed units and the module are removed before ninja runs (so nothing
rests on timestamps), and a changed, new or removed header (any kernels/ file that is not a
compiled unit) or a build that was killed clears the slot's objects. A slot in use by another build
is not waited for: that build then runs in a fresh folder, as every build did before.

Our fixed binding.cpp (the module's entry point: pybind11 and the registry, no candidate code) is
compiled once per toolchain into `builds/binding/<key>/binding.o`, and every workspace build links
that object instead of compiling the file again: pybind11's headers make it a slow compile, paid by
every fresh workspace's first build (docs/measured/2026-12-07-figures-from-the-code.md), and each
rollout of an RL run starts from a fresh workspace. It is compiled outside any sandbox (no candidate
source takes part, and the sandboxed builds read it from the cache's read-only view); where it does
not build, each workspace build compiles binding.cpp itself, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
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

from cuda_agent import sandbox
from cuda_agent.evaluate.cache_layout import BUILDS, BUILDS_BINDING, BUILDS_INCREMENTAL
from cuda_agent.evaluate.candidate import COMPILED_SUFFIXES, Candidate
from cuda_agent.text import clip

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "workspace" / "template"
FIXED_FILES = ("binding.cpp", "binding_registry.h")
MODULE_NAME = "cuda_extension"
CFLAGS = ["-O3"]  # the C++ standard is left to torch.utils.cpp_extension: its headers need the one it picks
CPU_CFLAGS = ["-fopenmp"]
CPU_LDFLAGS = ["-fopenmp"]
CUDA_CFLAGS = ["-O3", "--use_fast_math"]
CUDA_LDFLAGS = ["-lcublas"]
LOG_LIMIT = 20000
SLOTS_KEPT = 16  # workspaces whose objects are kept for their next build, the least recently used go


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
def tool_version(*cmd: str) -> str:
    """What `cmd` (a compiler's --version) prints: all of it, since gcc names its version on the
    first line and nvcc on the fourth; "?" where it does not run."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip()[:2000] if out.returncode == 0 else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


@lru_cache(maxsize=None)
def torch_version() -> str:
    """torch's version without importing it (the harness stays light)."""
    from importlib.metadata import version

    return version("torch")


def _digest(parts: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for label, data in parts:
        h.update(f"{label}\0{len(data)}\0".encode())
        h.update(data.encode())
    return h.hexdigest()


def _fixed_files() -> list[tuple[str, str]]:
    return [(name, (TEMPLATE_DIR / name).read_text()) for name in FIXED_FILES]


def _toolchain(device: str, arch: str | None) -> list[tuple[str, str]]:
    """Everything a build depends on besides the sources (ours and the candidate's)."""
    parts = [("device", device), ("arch", arch or ""),
             ("flags", json.dumps([CFLAGS, CPU_CFLAGS, CPU_LDFLAGS, CUDA_CFLAGS, CUDA_LDFLAGS])),
             ("cxx", tool_version(os.environ.get("CXX", "c++"), "--version"))]
    if device == "cuda":
        parts.append(("nvcc", tool_version("nvcc", "--version")))
    return parts + [("torch", torch_version()), ("python", sys.version)]


def _build_key(candidate: Candidate, fixed: list[tuple[str, str]], toolchain: list[tuple[str, str]]) -> str:
    names = candidate.compiled_sources + [n for n in sorted(candidate.kernels) if n not in candidate.compiled_sources]
    return _digest([*fixed, *(("kernels/" + name, candidate.kernels[name]) for name in names), *toolchain])[:32]


def build_extension(candidate: Candidate, device: str, arch: str | None, cache_dir: Path,
                    timeout_s: float, sup: sandbox.Support | None = None) -> BuildResult | None:
    """Build the candidate's kernels, or return None when it has no compiled sources. With `sup`,
    the compile runs in a sandbox whose only writable folder is the build's own (isolate.py)."""
    if not candidate.compiled_sources:
        return None
    t0 = time.monotonic()
    fixed, toolchain = _fixed_files(), _toolchain(device, arch)
    key = _build_key(candidate, fixed, toolchain)
    final = cache_dir / BUILDS / key
    so = final / f"{MODULE_NAME}.so"
    if so.is_file():
        return BuildResult(True, so, key, True, time.monotonic() - t0, _read_log(final))
    failed = cache_dir / BUILDS / f"{key}.failed"
    if failed.is_file():
        return BuildResult(False, None, key, True, time.monotonic() - t0, failed.read_text())
    if device == "cpu" and (cu := [n for n in candidate.compiled_sources if n.endswith(".cu")]):
        return BuildResult(False, None, key, False, time.monotonic() - t0,
                           f"kernels/{cu[0]}: CUDA sources cannot be built for the cpu backend; "
                           "write the kernels as C++ in kernels/*.cpp, or evaluate with --device cuda")
    (cache_dir / BUILDS).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=cache_dir / BUILDS))
    try:
        with _held_slot(cache_dir / BUILDS_INCREMENTAL, candidate, [*fixed, *toolchain]) as slot:
            src = slot or work  # where the build runs; `work` becomes the published folder
            stage_sources(src, candidate, fixed)
            try:
                binding = binding_object(cache_dir, device, arch, fixed, toolchain, timeout_s)
            except OSError:  # (a full disk, say: this build compiles binding.cpp itself)
                binding = None
            cmd = _child_command(src, device, arch, str(binding or ""))
            popen = dict(cwd=src, env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
            if sup is None:
                proc = subprocess.Popen(cmd, **popen)
            else:
                from cuda_agent.evaluate.isolate import build_spec

                sandbox.hand_over(src, sup)
                proc = sandbox.start(build_spec(src, cache_dir, uid=sup.bwrap_uid), cmd, sup, **popen)
            try:
                out, _ = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
                sandbox.drop_links(src)  # (the folder is written again by the next build)
                shutil.rmtree(src / "build", ignore_errors=True)  # a killed compile may leave half an object
                return BuildResult(False, None, key, False, time.monotonic() - t0,
                                   _tail(out.decode(errors="replace")), timed_out=True)
            log = _tail(out.decode(errors="replace"))
            sandbox.drop_links(src)  # (its outputs are copied and published outside the sandbox)
            built = src / "build" / f"{MODULE_NAME}.so"
            if proc.returncode != 0 or not built.is_file():
                tmp_failed = work / "failed.log"
                tmp_failed.write_text(log)
                os.replace(tmp_failed, failed)
                return BuildResult(False, None, key, False, time.monotonic() - t0, log)
            (work / "build.log").write_text(log)
            if slot is None:
                os.replace(built, work / f"{MODULE_NAME}.so")
                shutil.rmtree(work / "build", ignore_errors=True)
            else:
                shutil.copy2(built, work / f"{MODULE_NAME}.so")  # the slot keeps its own for the next link
        os.chmod(work, 0o755)  # (mkdtemp's 0700) a sandboxed candidate, as another user, loads it
        for f in work.iterdir():
            os.chmod(f, 0o755 if f.is_dir() else 0o644)
        try:
            work.rename(final)  # atomic publish
            work = None  # type: ignore[assignment]
        except OSError:  # another evaluation published the same key first: use theirs
            pass
        return BuildResult(True, so, key, False, time.monotonic() - t0, log)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _child_command(work: Path, device: str, arch: str | None, *binding: str) -> list[str]:
    """The command that compiles the staged folder `work` (build_child.py), with our binding's
    object linked where one is given."""
    return [sys.executable, "-m", "cuda_agent.evaluate.build_child", str(work), device, arch or "", *binding]


def _child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=package_root())


def binding_object(cache_dir: Path, device: str, arch: str | None, fixed: list[tuple[str, str]],
                   toolchain: list[tuple[str, str]], timeout_s: float) -> Path | None:
    """Our binding.cpp compiled for this toolchain (module docstring): the object's absolute path
    (links unresolved: sandboxes see the cache's views at its own path), built here when missing
    (one process at a time; the others wait for it), or None where it did not build (a failure is
    kept, as a workspace's compile errors are; a build cut by `timeout_s` is tried again next time)."""
    root = Path(os.path.abspath(cache_dir)) / BUILDS_BINDING
    key = _digest([*fixed, *toolchain])[:32]
    obj = root / key / "binding.o"
    if obj.is_file():
        return obj
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the same compile either way: wait for the one under way
        if obj.is_file() or (root / f"{key}.failed").is_file():
            return obj if obj.is_file() else None
        work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
        try:
            for name, text in fixed:
                (work / name).write_text(text)
            (work / "kernels").mkdir()
            proc = subprocess.Popen(_child_command(work, device, arch), cwd=work, env=_child_env(),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.returncode is None or proc.returncode < 0:
                return None  # killed: not a verdict on the toolchain
            if proc.returncode != 0 or not (work / "build" / "binding.o").is_file():
                (root / f"{key}.failed").touch()  # builds compile binding.cpp themselves, and say why
                return None
            os.replace(work / "build" / "binding.o", work / "binding.o")
            for f in list(work.iterdir()):
                if f.name != "binding.o":
                    shutil.rmtree(f) if f.is_dir() else f.unlink()
            os.chmod(work, 0o755)  # (mkdtemp's 0700) read by sandboxed builds, as another user
            os.chmod(work / "binding.o", 0o644)
            work.rename(obj.parent)
            work = None  # type: ignore[assignment]
            return obj
        finally:
            if work is not None:
                shutil.rmtree(work, ignore_errors=True)


def _write_if_changed(path: Path, text: str) -> bool:
    """Write `text` to `path` unless it holds it already; whether it was written."""
    try:
        if path.read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass
    path.write_text(text)
    return True


def stage_sources(src: Path, candidate: Candidate, fixed: list[tuple[str, str]] | None = None) -> None:
    """Bring the build folder `src` to the candidate's sources (module docstring): in a fresh folder
    every file is written; in one that holds an earlier build, only what changed, and the objects
    of that build are removed wherever they may no longer match. `fixed`: our fixed files, as
    read for the build's key (read here where not given)."""
    for name, text in fixed if fixed is not None else _fixed_files():
        _write_if_changed(src / name, text)
    kernels, build = src / "kernels", src / "build"
    kernels.mkdir(exist_ok=True)
    changed = {name for name, text in candidate.kernels.items() if _write_if_changed(kernels / name, text)}
    for old in kernels.iterdir():
        if old.name in candidate.kernels:
            continue
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
        changed.add(old.name)
    if any(not name.endswith(COMPILED_SUFFIXES) for name in changed):
        shutil.rmtree(build, ignore_errors=True)  # a header: which units include it is not known here
        return
    for name in changed:  # torch names a unit's object <stem>.o, or <stem>.cuda.o for CUDA
        stem = Path(name).stem
        for obj in (f"{stem}.o", f"{stem}.cuda.o"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(build / obj)
    for stale in (f"{MODULE_NAME}.so", "lock"):  # the module is always linked again; a killed load()'s lock
        with contextlib.suppress(FileNotFoundError):
            os.remove(build / stale)


@contextlib.contextmanager
def _held_slot(root: Path, candidate: Candidate, toolchain: list[tuple[str, str]]):
    """The incremental build folder of this workspace and toolchain (with our fixed files), held
    (flock) for one build; None where the candidate is not a workspace folder or another build
    holds its slot."""
    if candidate.kind != "workspace":
        yield None
        return
    name = _digest([("origin", os.path.realpath(candidate.origin)), *toolchain])[:24]
    slot = root / name
    slot.mkdir(parents=True, exist_ok=True)
    with open(slot / ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        os.utime(slot)  # recently used: kept by _prune_slots
        try:
            yield slot
        finally:
            _prune_slots(root, keep=SLOTS_KEPT, holding=slot)


def _prune_slots(root: Path, keep: int, holding: Path) -> None:
    """Remove all but the `keep` most recently used slots under `root`, never one in use."""
    try:
        slots = sorted((d for d in root.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in slots[keep:]:
        if old == holding:
            continue
        try:
            with open(old / ".lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(old, ignore_errors=True)
        except (BlockingIOError, OSError):
            continue  # in use by another build, or gone already


def _read_log(d: Path) -> str:
    f = d / "build.log"
    return f.read_text() if f.is_file() else ""


def _tail(s: str) -> str:
    return clip(s, LOG_LIMIT, keep="tail")


def package_root() -> str:
    """The PYTHONPATH that lets a child process import this package as the parent does."""
    roots = [str(Path(__file__).resolve().parents[2])]
    if os.environ.get("PYTHONPATH"):
        roots.append(os.environ["PYTHONPATH"])
    return os.pathsep.join(roots)
