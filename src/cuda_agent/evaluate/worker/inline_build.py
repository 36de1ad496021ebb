"""Faster builds of a candidate's own `load_inline` and `load` extensions, in its runner.

torch compiles an inline extension's host unit (main.cpp: torch/extension.h, then the candidate's
C++ and its pybind11 bindings) from scratch every time, and reading torch's headers is most of that
unit's time. `install` hooks the function where torch writes the build's ninja file
(`cpp_extension._write_ninja_file`), the one place where the host unit's final flags are known.
Where every host unit includes torch/extension.h itself (a `load` of other sources is built as
torch builds it):

- when a precompiled header of torch/extension.h exists for exactly these flags (compiler, torch,
  defines, include paths, -O, -std: everything but the extension's name), the host unit gets
  `-include <it>`; gcc then loads the header's parsed state instead of parsing it, and reads the
  headers as before where it cannot use it (a precompiled header is only ever an optimisation);
- when none exists, one is built beside the candidate's own build (another core, about as long
  as the host unit) and published atomically under `<cache_dir>/pch/<flags digest>/`, so the next
  candidate with these flags finds it. The build waits for it before returning: nothing of it is
  left running when the candidate's code continues.

A folder that already holds a build keeps the choice that build made: adding the header to an
up-to-date build would change its ninja file and rebuild it.

`load_inline` calls without a `build_directory` of their own build in a folder named by what they
build (`<cache_dir>/torch_extensions/by_source/<name>-<digest of every argument>`), so two
candidates that differ only outside their extension (the agent changing the Python side) share one
build: torch's ninja file finds it up to date. One process at a time builds in such a folder,
under an flock that the kernel releases when its holder dies; the holder first removes the build
lock that a killed build left (torch waits for that file without end).

A CUDA unit that includes <torch/extension.h> is compiled by `light_nvcc.py` (the ninja file's
nvcc): first (unless `EvalConfig.inline_tensor_header` is off) with at::Tensor and torch's factory
functions in that header's place; then, or where that does not compile, with torch's tensor API
(<torch/types.h>, far lighter for nvcc than the full header); then as written (that module's
docstring says why, and where the figures are). Each compile runs nvcc's host and device front
ends side by side (`nvcc_stages.py`), and with precompiled headers on, nvcc's final host compile
reads the unit's headers from one (`nvcc_pch.py`, kept in `<pch>-nvcc/`).

The candidate's sources, flags and compiler stay its own; torch's own `use_pch` option (which
rebuilds a header inside torch's install, and which every call without it deletes) is not used.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from . import nvcc_pch

HEADER = "torch_ext.h"
LIGHT_NVCC = Path(__file__).with_name("light_nvcc.py")
LIGHT_HEADERS = Path(__file__).with_name("light_headers")
TENSOR_HEADERS = Path(__file__).with_name("tensor_headers")
KEEP = 4  # precompiled headers kept (one per set of host flags, each several hundred MB: their size in
# docs/measured/2026-12-07-figures-from-the-code.md), the least recently used removed first
_pending: list[nvcc_pch.Building] = []
_lock = threading.Lock()
_remote: Callable[..., dict[str, Any]] | None = None  # a sandboxed runner's builds go to the harness
_WITH_HEADER = re.compile(rb"^(cflags = )-include (?:'[^'\n]*/%s'|[^\s']*/%s)(?: |$)" % ((re.escape(HEADER).encode(),) * 2), re.M)
_INCLUDES_TORCH = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"]', re.M)


def _host_words(cflags: list[str], post_cflags: list[str]) -> list[str]:
    """The host unit's flags as the shell reads them (torch's are shell words: `-isystem DIR`), less
    the extension's name. `extra_cflags=[""]`, the idiom of KernelBench's template, adds no word."""
    kept = [f for f in cflags if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return [w for f in kept + post_cflags for w in shlex.split(f)]


def flags_digest(cxx: str, cflags: list[str], post_cflags: list[str]) -> str:
    """What a precompiled header depends on: the compiler and the words of every flag but the
    extension's name, so that flags the shell reads alike share one header."""
    version = subprocess.run([*shlex.split(cxx), "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return hashlib.sha256(json.dumps([cxx, version, _host_words(cflags, post_cflags)]).encode()).hexdigest()[:24]


def pch_command(cxx: str, cflags: list[str], post_cflags: list[str], header: Path, out: Path) -> list[str]:
    """The host unit's compile, of the header instead."""
    return [*shlex.split(cxx), *_host_words(cflags, post_cflags), "-x", "c++-header", str(header), "-o", str(out)]


def _start_pch(root: Path, digest: str, cmd_for: Callable[[Path, Path], list[str]]) -> None:
    """Start building the precompiled header `root/digest` unless another process is on it."""
    if _remote is not None:
        return  # (asked of the harness in `_add_pch`)
    building = nvcc_pch.Building(root, digest, HEADER, b"#pragma once\n#include <torch/extension.h>\n",
                                 lambda header: cmd_for(header, header.with_name(f"{HEADER}.gch")), keep=KEEP)
    if building.proc is not None:
        with _lock:
            _pending.append(building)


def finish_pending() -> None:
    """Wait for the precompiled headers started by this process; publish those that built."""
    with _lock:
        pending = list(_pending)
        _pending.clear()
    for building in pending:
        building.finish()


def source_dir(root: Path, arguments: dict[str, Any]) -> Path:
    """The build folder of a `load_inline` call (its bound arguments) under `root`: named by the
    extension and a digest of every argument that shapes the build, and of torch. Anything the
    digest missed still cannot give a wrong build: ninja rebuilds what changed in the folder."""
    import torch

    shaping = {k: v for k, v in arguments.items() if k not in ("build_directory", "verbose")}
    text = json.dumps([shaping, torch.__version__, os.environ.get("TORCH_CUDA_ARCH_LIST"),
                       os.environ.get("CXX")], sort_keys=True, default=repr)
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(arguments.get("name")))[:64]
    return root / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:20]}"


@contextlib.contextmanager
def building_in(folder: Path):
    """Hold `folder` for one build: an exclusive flock (released by the kernel if we die), then
    torch's own build lock cleared, since nobody alive can be building here."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".cuda-agent.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            os.remove(folder / "lock")
        yield


def shims(tensor_header: bool) -> str:
    """The header folders `light_nvcc.py` tries, in this order: the tensor header first where asked
    (`EvalConfig.inline_tensor_header`, on by default), then <torch/types.h>."""
    return os.pathsep.join(map(str, (TENSOR_HEADERS, LIGHT_HEADERS) if tensor_header else (LIGHT_HEADERS,)))


def light_nvcc_command(real_nvcc: str, pch_root: Path | None = None, tensor_header: bool = False) -> str:
    """The ninja file's `nvcc`: `light_nvcc.py` in front of the real one (shell words); with
    `pch_root`, its final host compiles' precompiled headers live beside the host unit's;
    `tensor_header`: the tensor header is tried first (`shims`)."""
    pch = ["--pch", str(nvcc_pch_root(pch_root))] if pch_root is not None else []
    return shlex.join([sys.executable, "-I", "-S", str(LIGHT_NVCC), *pch, shims(tensor_header), real_nvcc])


def nvcc_pch_root(pch_root: Path) -> Path:
    """Where CUDA units' final host compiles keep their precompiled headers (`nvcc_pch.py`)."""
    return Path(pch_root).parent / f"{Path(pch_root).name}-nvcc"


def _real_nvcc() -> str | None:
    """The nvcc that torch's ninja file would name, without the compiler cache torch puts in front
    of it where one is on PATH (ccache, sccache): nvcc's steps are run side by side and with a
    precompiled header only for nvcc itself, a cache keyed by the preprocessed source cannot hit for
    a source never built before, and one built before is found by its build folder. None where this
    torch's helpers are not the ones known here, or a HIP build."""
    import torch.utils.cpp_extension as ce

    join = getattr(ce, "_join_cuda_home", None)
    if join is None or getattr(ce, "IS_HIP_EXTENSION", False) or "PYTORCH_NVCC" in os.environ:
        return None  # PYTORCH_NVCC: the candidate chose its nvcc itself
    try:
        return shlex.quote(join("bin", "nvcc"))
    except (OSError, RuntimeError, TypeError):  # no CUDA_HOME
        return None


def _hooked_writer(writer: Callable[..., Any], pch_root: Path | None, light: bool,
                   tensor_header: bool = False) -> Callable[..., Any]:
    """torch's ninja-file writer, giving the host unit the precompiled header and the CUDA units
    `light_nvcc.py` (module docstring)."""

    def write_ninja_file(*args: Any, **kwargs: Any) -> Any:
        bound = inspect.signature(writer).bind(*args, **kwargs)
        ninja = Path(bound.arguments["path"])
        try:
            previous = ninja.read_text(errors="replace") if ninja.is_file() else None
        except OSError:
            previous = None
        if pch_root is not None:
            _add_pch(bound, pch_root, previous)
        real = _real_nvcc() if light and bound.arguments.get("with_cuda") else None
        if real is None or (previous is not None and str(LIGHT_NVCC) not in previous):
            return writer(*bound.args, **bound.kwargs)  # an earlier build here without it: kept
        os.environ["PYTORCH_NVCC"] = light_nvcc_command(real, pch_root, tensor_header)  # read by the writer, for this call only
        try:
            return writer(*bound.args, **bound.kwargs)
        finally:
            os.environ.pop("PYTORCH_NVCC", None)

    write_ninja_file._cuda_agent = True  # type: ignore[attr-defined]
    return write_ninja_file


def _add_pch(bound: inspect.BoundArguments, root: Path, previous: str | None) -> None:
    """Give the host unit `-include` of the precompiled header for its flags where one is ready
    (or start building one where none is); a folder with an earlier build keeps its choice."""
    cflags = list(bound.arguments.get("cflags") or [])
    post = list(bound.arguments.get("post_cflags") or [])
    try:
        if not _host_units_include_torch(bound.arguments.get("sources") or []):
            return
        cxx = os.environ.get("CXX", "c++")
        digest = flags_digest(cxx, cflags, post)
        ready = root / digest / HEADER
        include = f"-include {shlex.quote(str(ready))}"
        have = (root / digest / f"{HEADER}.gch").is_file()
        if previous is not None:
            use = have and include in previous  # an earlier build here: keep its choice
        elif not have:
            if _remote is not None:  # the harness builds it with its own compiler, in a sandbox
                _remote("pch", cflags=cflags, post_cflags=post)
            _start_pch(root, digest, lambda h, o: pch_command(cxx, cflags, post, h, o))
            use = False
        else:
            use = True
        if use:
            bound.arguments["cflags"] = [include, *cflags]
            os.utime(root / digest)  # recently used: kept by `prune`
    except OSError:
        pass  # no precompiled header: the build is as torch makes it


def _host_units_include_torch(sources: list[str]) -> bool:
    """Whether every host unit of the build includes torch/extension.h itself (load_inline's main.cpp
    always does). `-include` would put torch's headers into a unit that never asked for them (a
    pybind11-only source of `load`, whose names and macros may clash with torch's), and a header
    built for such a build would cost a core-minute that it never repays."""
    hosts = [s for s in sources if not str(s).endswith((".cu", ".cuh"))]
    return bool(hosts) and all(_INCLUDES_TORCH.search(Path(s).read_bytes()) for s in hosts)


def without_header(inputs: dict[str, bytes]) -> dict[str, bytes]:
    """A build's inputs (file name -> bytes) as they were before its flags' precompiled header was
    published: the ninja file without `_add_pch`'s `-include` (always the first of the host flags).
    The header only saves parsing, so a build of these inputs serves the ones given as well."""
    ninja = inputs.get("build.ninja")
    if ninja is None:
        return inputs
    plain = _WITH_HEADER.sub(rb"\1", ninja, count=1)
    return inputs if plain == ninja else {**inputs, "build.ninja": plain}


def _remote_ninja(build_directory: str, verbose: bool, error_prefix: str) -> None:
    """torch's `_run_ninja_build`, for a sandboxed runner: the harness runs ninja on a copy of the
    folder in a sandbox of its own (it may publish the result for later candidates, which a build
    in the candidate's own process could forge), then puts what it built into the folder."""
    done = _remote("ninja", dir=os.path.realpath(build_directory))
    if verbose and done.get("log"):
        print(done["log"], flush=True)
    if not done.get("ok"):
        raise RuntimeError(f"{error_prefix}: {done.get('log', '')}")


def install(pch_root: str | os.PathLike[str] | None, builds_root: str | os.PathLike[str] | None,
            light_headers: bool = False, tensor_header: bool = False,
            remote: Callable[..., dict[str, Any]] | None = None) -> None:
    """Hook torch's ninja-file writer and its `load_inline`/`load` for this process (the runner,
    before the candidate's code runs). `pch_root`: where precompiled headers live (None: none are
    used); `builds_root`: where `load_inline` calls without a build folder build (None: in torch's
    default folder, TORCH_EXTENSIONS_DIR/<name>); `light_headers`: CUDA units that include
    torch/extension.h are compiled first with torch's tensor API in its place; `tensor_header`:
    with the lighter tensor header before that. `remote`: the runner is sandboxed, and its builds
    are the harness's (`serve.request`): ninja runs there, and so do new precompiled headers."""
    import torch.utils.cpp_extension as ce

    global _remote
    if getattr(ce.load_inline, "_cuda_agent", False):
        return
    if remote is not None and hasattr(ce, "_run_ninja_build"):
        _remote = remote
        ce._run_ninja_build = _remote_ninja
    writer = getattr(ce, "_write_ninja_file", None)
    if (pch_root is not None or light_headers) and writer is not None and {
            "path", "cflags", "post_cflags", "with_cuda"} <= set(inspect.signature(writer).parameters):
        # (else a writer we do not know: build as torch does)
        ce._write_ninja_file = _hooked_writer(writer, Path(pch_root) if pch_root else None, light_headers,
                                             tensor_header)
    for name in ("load_inline", "load"):
        original = getattr(ce, name)
        signature = inspect.signature(original)

        def hooked(*args: Any, __original=original, __signature=signature, **kwargs: Any) -> Any:
            try:
                bound = __signature.bind(*args, **kwargs)
            except TypeError:
                return __original(*args, **kwargs)  # torch says what is wrong with the call
            routed = builds_root is not None and __original.__name__ == "load_inline" and \
                not bound.arguments.get("build_directory")
            try:
                if not routed:
                    return __original(*args, **kwargs)
                folder = source_dir(Path(builds_root), bound.arguments)
                with building_in(folder):
                    bound.arguments["build_directory"] = str(folder)
                    return __original(*bound.args, **bound.kwargs)
            finally:
                finish_pending()

        hooked.__wrapped__ = original  # type: ignore[attr-defined]
        hooked.__name__, hooked.__doc__ = original.__name__, original.__doc__
        hooked._cuda_agent = True  # type: ignore[attr-defined]
        setattr(ce, name, hooked)
