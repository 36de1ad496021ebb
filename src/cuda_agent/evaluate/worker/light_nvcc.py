"""nvcc for a candidate's CUDA unit, with a light <torch/extension.h> first (run as a script).

    python -I -S light_nvcc.py [--pch DIR] SHIM_DIRS 'REAL NVCC WORDS' NVCC_ARGS...

Most model-written CUDA sources include <torch/extension.h> for `torch::Tensor` and a few factory
functions. That header is all of libtorch's C++ frontend and Python/pybind11, and nvcc parses
whatever a unit includes three times in a row (its front end, the device compiler, the host
compiler): a one-kernel unit with it takes nvcc more than twice as long as with torch's tensor API
alone (<torch/types.h>, which torch/extension.h includes too; docs/measured/2026-12-04-fresh-h200.md,
"a light torch/extension.h for candidates' CUDA units").

So a unit whose source includes <torch/extension.h> is compiled first with `-I SHIM` ahead of every
other include folder, for each folder SHIM of SHIM_DIRS (`os.pathsep`-separated) in turn, until one
compiles: `tensor_headers` where the evaluator names it (at::Tensor, its methods and torch's factory
functions, without ATen's other operators: a unit's nvcc takes about a third less CPU time with it
than with <torch/types.h>; the same file, "a lighter torch/extension.h first"), then `light_headers`
(<torch/types.h>). A folder with a `CALLS` file is skipped for a unit that calls a torch function
qualified (`torch::matmul(`) that the file does not list: that compile could only fail, and a failed
one costs about what a successful one does. The source, its line numbers and every flag stay the
candidate's own; a unit that compiles so uses nothing beyond what that header declares, and the
headers it gets are a subset of those it asked for. A unit that compiles with none (it uses
`torch::nn`, a name only the full header brings in, or it has an error of its own) is compiled again
exactly as written, and only that compile's output and exit status are what the build sees. A unit
that binds itself to Python (`PYBIND11_MODULE`, `py::`: extensions built with `load` or with
`load_inline(functions=None)`) is compiled as written at once: no header of ours declares pybind11.
A unit without <torch/extension.h> is compiled as written.

Each compile runs nvcc's host and device front ends side by side where it can (`nvcc_stages.py`),
and with `--pch DIR`, the final host compile of a unit that is its build's only CUDA unit (the
ninja file in the folder where it runs has one CUDA compile) uses a precompiled header of the
unit's headers kept under DIR (`nvcc_pch.py`).

`OUT.how` (beside the object file) says which compile made it on its first line: the header
folder's name without `_headers` (`tensor`, `light`), or `as written`; then the errors of each
header that did not compile it (why it could not be used); last, where a precompiled header was at
stake, `host header: used`, `built` or `not used`.
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
BINDS = re.compile(rb"\bPYBIND11_MODULE\s*\(|\bpybind11::|\bpy::")  # only the full header declares these
QUALIFIED = re.compile(rb"\b(?:torch|at)::([a-z_]\w*)\s*(\(|::)")  # torch::zeros(, at::cuda::
CALLS = "CALLS"


def option_value(args: list[str], flag: str) -> str | None:
    """The word after `flag` in `args` (`-c SRC`, `-o OUT`), or None."""
    for i, a in enumerate(args[:-1]):
        if a == flag:
            return args[i + 1]
    return None


def read(source: str | None) -> bytes:
    """The unit's own source (empty where there is none to read)."""
    if source is None:
        return b""
    try:
        with open(source, "rb") as f:
            return f.read()
    except OSError:
        return b""


def wants_light(source: str | None) -> bool:
    """Whether the unit's own source includes <torch/extension.h>."""
    return INCLUDE.search(read(source)) is not None


def unlisted(shim: str, text: bytes) -> list[str]:
    """The functions the source calls as `torch::f(`/`at::f(` and the namespaces it names as
    `torch::ns::`/`at::ns::` that the header folder's CALLS file does not list (names split by
    white space, `ns::` for a namespace, `#` starts a comment line); nothing where the folder has
    no such file. A header that declares few of torch's functions lists them, and a unit that calls
    another is not tried with it: that compile could only fail."""
    try:
        with open(os.path.join(shim, CALLS), "rb") as f:
            listed = {w for line in f.read().splitlines() if not line.startswith(b"#") for w in line.split()}
    except OSError:
        return []
    used = {name + sep if sep == b"::" else name for name, sep in QUALIFIED.findall(text)}
    return sorted(n.decode() for n in used - listed)


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


def tier(shim: str) -> str:
    """The name a header folder gets in `OUT.how`: `tensor_headers` -> `tensor`."""
    name = os.path.basename(os.path.normpath(shim))
    return name[: -len("_headers")] if name.endswith("_headers") else name


def main(argv: list[str]) -> int:
    pch = None
    if len(argv) >= 2 and argv[0] == "--pch":
        pch, argv = argv[1], argv[2:]
    if len(argv) < 2:
        sys.stderr.write("usage: light_nvcc.py [--pch DIR] SHIM_DIRS 'REAL NVCC' NVCC_ARGS...\n")
        return 2
    shims, real, args = [d for d in argv[0].split(os.pathsep) if d], shlex.split(argv[1]), argv[2:]
    out, why = option_value(args, "-o"), b""
    if pch is not None and not only_cuda_unit():
        pch = None
    text = read(option_value(args, "-c"))
    if INCLUDE.search(text) and BINDS.search(text):  # no header of ours declares pybind11: each compile could only fail
        why = f"{', '.join(map(tier, shims))}: not tried: the unit binds itself to Python (pybind11)\n".encode()
    elif INCLUDE.search(text):
        for shim in shims:
            if others := unlisted(shim, text):
                why += f"{tier(shim)}: not tried: the unit uses {', '.join(others[:8])}\n".encode()
                continue
            light = nvcc(real, ["-I", shim, *args], pch)
            if light.returncode == 0:
                show(light)  # its warnings, as ninja would have shown them
                note(out, tier(shim), why, light.header)
                return 0
            why += f"{tier(shim)}:\n".encode() + light.stderr[-2000:]
    written = nvcc(real, args, pch)
    show(written)
    if written.returncode == 0:
        note(out, "as written", why, written.header)
    return written.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
