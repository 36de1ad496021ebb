"""nvcc for a candidate's CUDA unit, with a light <torch/extension.h> first (run as a script).

    python -I -S light_nvcc.py [--pch DIR] SHIM_DIR 'REAL NVCC WORDS' NVCC_ARGS...

Most model-written CUDA sources include <torch/extension.h> for `torch::Tensor` and a few factory
functions. That header is all of libtorch's C++ frontend and Python/pybind11, and nvcc parses
whatever a unit includes three times in a row (its front end, the device compiler, the host
compiler): on an H200 machine about 55 s for a one-kernel unit, against about 20 s with torch's
tensor API alone (<torch/types.h>, which torch/extension.h includes too).

So a unit whose source includes <torch/extension.h> is compiled first with `-I SHIM_DIR` ahead of
every other include folder: SHIM_DIR/torch/extension.h includes <torch/types.h> only. The source,
its line numbers and every flag stay the candidate's own; a unit that compiles so uses nothing
beyond torch's tensor API, and the headers it gets are a subset of those it asked for. A unit that
does not compile so (it uses `torch::nn`, pybind11, a name only the full header brings in, or it
has an error of its own) is compiled again exactly as written, and only that compile's output and
exit status are what the build sees. A unit without <torch/extension.h> is compiled as written.

Each compile runs nvcc's host and device front ends side by side where it can (`nvcc_stages.py`),
and with `--pch DIR`, the final host compile of a unit that is its build's only CUDA unit (the
ninja file in the folder where it runs has one CUDA compile) uses a precompiled header of the
unit's headers kept under DIR (`nvcc_pch.py`).

`OUT.how` (beside the object file) says which compile made it on its first line, `light` or
`as written`; after the latter, the light attempt's errors (why it could not be used); last, where
a precompiled header was at stake, `host header: used`, `built` or `not used`.
Standard library only: it runs once per CUDA unit, before anything else of the package loads.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

try:
    from . import nvcc_stages
except ImportError:  # run as a script (the usual way): its folder holds the module
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import nvcc_stages  # type: ignore[no-redef]

INCLUDE = re.compile(rb"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/extension\.h[>\"]", re.M)


def option_value(args: list[str], flag: str) -> str | None:
    """The word after `flag` in `args` (`-c SRC`, `-o OUT`), or None."""
    for i, a in enumerate(args[:-1]):
        if a == flag:
            return args[i + 1]
    return None


def wants_light(source: str | None) -> bool:
    """Whether the unit's own source includes <torch/extension.h>."""
    if source is None:
        return False
    try:
        with open(source, "rb") as f:
            return INCLUDE.search(f.read()) is not None
    except OSError:
        return False


def only_cuda_unit() -> bool:
    """Whether the ninja file where this runs (torch's build folder) has one CUDA compile: a
    precompiled header gives its units' anonymous namespaces one name (`nvcc_pch.py`)."""
    try:
        with open("build.ninja", "rb") as f:
            return len(re.findall(rb"^build [^\n]*: cuda_compile ", f.read(), re.M)) == 1
    except OSError:
        return False


def note(out: str | None, how: str, why: bytes = b"", header: str = "") -> None:
    if out is not None:
        try:
            with open(out + ".how", "wb") as f:
                why = why[-4000:]
                if header:  # on a line of its own after the errors
                    why += (b"" if not why or why.endswith(b"\n") else b"\n") + f"host header: {header}\n".encode()
                f.write(how.encode() + b"\n" + why)
        except OSError:
            pass  # a note for reports, never a reason to fail a build


def nvcc(real: list[str], args: list[str], pch: str | None = None) -> nvcc_stages.Compiled:
    """One compile: nvcc's chains side by side where that can be done, else nvcc as it is."""
    done = nvcc_stages.compile(real, args, pch)
    if done is None:
        plain = subprocess.run([*real, *args], capture_output=True)
        done = nvcc_stages.Compiled(plain.returncode, plain.stdout, plain.stderr)
    return done


def show(done: nvcc_stages.Compiled) -> None:
    """A compile's output, as ninja would have shown nvcc's."""
    sys.stdout.buffer.write(done.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(done.stderr)
    sys.stderr.flush()


def main(argv: list[str]) -> int:
    pch = None
    if len(argv) >= 2 and argv[0] == "--pch":
        pch, argv = argv[1], argv[2:]
    if len(argv) < 2:
        sys.stderr.write("usage: light_nvcc.py [--pch DIR] SHIM_DIR 'REAL NVCC' NVCC_ARGS...\n")
        return 2
    shim, real, args = argv[0], shlex.split(argv[1]), argv[2:]
    out, why = option_value(args, "-o"), b""
    if pch is not None and not only_cuda_unit():
        pch = None
    if wants_light(option_value(args, "-c")):
        light = nvcc(real, ["-I", shim, *args], pch)
        if light.returncode == 0:
            show(light)  # its warnings, as ninja would have shown them
            note(out, "light", header=light.header)
            return 0
        why = light.stderr
    written = nvcc(real, args, pch)
    show(written)
    if written.returncode == 0:
        note(out, "as written", why, written.header)
    return written.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
