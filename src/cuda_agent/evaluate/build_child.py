"""Child process of build.py: compiles a staged workspace into build/cuda_extension.so.

    python -m cuda_agent.evaluate.build_child WORK_DIR cpu|cuda ARCH [BINDING_OBJECT]

BINDING_OBJECT: our binding.cpp already compiled for this toolchain (build.binding_object), linked
instead of compiling the file again.

Kept apart from build.py so that the parent's module is not imported twice under runpy.
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path

from cuda_agent.evaluate.build import (CFLAGS, CPU_CFLAGS, CPU_LDFLAGS, CUDA_CFLAGS, CUDA_LDFLAGS,
                                       MODULE_NAME)


def compile_workspace(work: Path, device: str, arch: str, binding_object: str = "") -> None:
    """Runs in the child process: compile every source in `work` into build/cuda_extension.so, with
    `binding_object` linked in place of binding.cpp's own compile where given."""
    if arch:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    import torch.utils.cpp_extension as cpp

    sources = ([] if binding_object else [str(work / "binding.cpp")]) + sorted(
        str(p) for p in (work / "kernels").iterdir() if p.suffix in (".cu", ".cpp", ".cc"))
    build_dir = work / "build"
    build_dir.mkdir(exist_ok=True)  # an incremental slot keeps the objects of its last build here
    cuda = device == "cuda"
    kwargs = dict(
        name=MODULE_NAME, sources=sources,
        extra_cflags=CFLAGS + ([] if cuda else CPU_CFLAGS),
        extra_cuda_cflags=CUDA_CFLAGS if cuda else None,
        extra_sycl_cflags=None,
        extra_ldflags=(CUDA_LDFLAGS if cuda else CPU_LDFLAGS) + ([binding_object] if binding_object else []),
        extra_include_paths=[str(work)],
        build_directory=str(build_dir), verbose=True, with_cuda=cuda, with_sycl=False,
    )
    # The private builder compiles without importing the module into this process; its signature
    # moves between torch releases, so pass only what it accepts, and fall back to the public load().
    builder = getattr(cpp, "_write_ninja_file_and_build_library", None) or cpp.load
    accepted = inspect.signature(builder).parameters
    builder(**{k: v for k, v in kwargs.items() if k in accepted})


if __name__ == "__main__":
    try:
        compile_workspace(Path(sys.argv[1]), sys.argv[2], sys.argv[3], *sys.argv[4:5])
    except Exception as exc:  # the log is the message; the exit status is the verdict
        print(f"\nbuild failed: {exc}", flush=True)
        sys.exit(1)
