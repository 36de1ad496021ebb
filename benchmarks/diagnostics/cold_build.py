"""Each step of a cold `load_inline` build, timed on its own: where a fresh candidate's build goes.

    python benchmarks/diagnostics/cold_build.py [--device cuda] [--concurrent 8] [--json OUT]

A representative model-written extension (one elementwise kernel and its launcher in the CUDA
source, which includes `torch/extension.h`; a declaration in the C++ source) is built by
`load_inline` in a fresh process. Its `build.ninja` is then replayed one command at a time:

- `python -c "import torch"`, then `import torch.utils.cpp_extension` on top;
- the whole `load_inline` (ninja runs the host and the CUDA unit side by side, then the link);
- the host unit (`main.cpp`: torch/extension.h and pybind11 bindings), the CUDA unit (nvcc), the link;
- the host unit again with a precompiled header of torch/extension.h (the header's own build
  timed too), and at -O0;
- the CUDA unit without torch headers (a kernel and a plain C launcher: the workspace form);
- `--concurrent` cold builds of distinct extensions at once (a benchmark's batch on one machine).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
// TAG
"""
CPP_SRC = "torch::Tensor relu_cuda(torch::Tensor x);"
CPU_SRC = r"""
torch::Tensor relu_cpu(torch::Tensor x) { return x.clamp_min(0); }
// TAG
"""
LIGHT_CU = r"""
#include <cuda_runtime.h>
#include <cstdint>
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" void relu_launch(const float* x, float* y, int64_t n, cudaStream_t s) {
    relu_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}
"""

BUILD = r'''
import sys, time
t0 = time.monotonic()
import torch
from torch.utils.cpp_extension import load_inline
t1 = time.monotonic()
cuda = sys.argv[3] == "cuda"
kw = dict(cuda_sources=[open(sys.argv[4]).read()], functions=["relu_cuda"]) if cuda else dict(functions=["relu_cpu"])
load_inline(name=sys.argv[1], cpp_sources=[open(sys.argv[5]).read()], build_directory=sys.argv[2],
            extra_cflags=["-O3"], extra_cuda_cflags=["-O3"] if cuda else None, verbose=False, **kw)
print(f"{t1 - t0:.3f} {time.monotonic() - t1:.3f}")
'''


def timed(cmd: list[str] | str, cwd: Path | None = None, env: dict | None = None) -> tuple[float, str]:
    t0 = time.monotonic()
    out = subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{cmd}: rc {out.returncode}\n{out.stderr[-2000:]}")
    return time.monotonic() - t0, out.stdout + out.stderr


def load_inline_build(name: str, d: Path, device: str, tag: str) -> tuple[float, float, float]:
    """(import torch + cpp_extension, load_inline, wall) of one cold build in a fresh process."""
    d.mkdir(parents=True)
    cu, cpp = d / "src.cu", d / "src.cpp"
    cu.write_text(CUDA_SRC.replace("TAG", tag))
    cpp.write_text(CPP_SRC if device == "cuda" else CPU_SRC.replace("TAG", tag))
    build = d / "build"
    build.mkdir(parents=True)
    wall, out = timed([sys.executable, "-c", BUILD, name, str(build), device, str(cu), str(cpp)])
    imp, li = (float(x) for x in out.split()[-2:])
    return imp, li, wall


def ninja_commands(build: Path) -> dict[str, str]:
    """The build's commands by output (main.o / cuda.cuda.o / the .so), from `ninja -t commands`."""
    out = subprocess.run(["ninja", "-t", "commands"], cwd=build, capture_output=True, text=True, check=True).stdout
    cmds = {}
    for line in out.splitlines():
        if " -o " in line or line.rstrip().endswith(".so"):
            target = shlex.split(line)[shlex.split(line).index("-o") + 1]
            cmds[target] = line
    return cmds


class Figures(dict):
    """Each figure printed and written to the JSON file as soon as it is measured."""

    def __init__(self, path: Path | None):
        super().__init__()
        self.path = path

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        if key != "commands":
            print(f"{key}: {json.dumps(value)}", flush=True)
        if self.path:
            self.path.write_text(json.dumps(self, indent=1))

    def update(self, *args, **kw) -> None:
        for k, v in dict(*args, **kw).items():
            self[k] = v


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--concurrent", type=int, default=8, help="cold builds at once (0: skip)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cold-build-"))
    res = Figures(args.json)
    res.update(device=args.device, cpus=os.cpu_count())
    res["import_torch_s"] = round(timed([sys.executable, "-c", "import torch"])[0], 2)
    res["import_torch_cpp_extension_s"] = round(timed([sys.executable, "-c",
                                                       "import torch, torch.utils.cpp_extension"])[0], 2)
    imp, li, wall = load_inline_build("cold_a", root / "a", args.device, "a")
    res.update(load_inline_s=round(li, 2), load_inline_process_wall_s=round(wall, 2))
    build = root / "a" / "build"
    cmds = ninja_commands(build)
    res["commands"] = cmds
    for target, cmd in cmds.items():  # replay each alone (outputs removed first)
        (build / target).unlink(missing_ok=True)
    steps = {}
    for target, cmd in cmds.items():
        steps[target] = round(timed(cmd, cwd=build)[0], 2)
        res["steps_s"] = steps
    host = next(c for t, c in cmds.items() if t == "main.o")
    # the host unit with a precompiled header of torch/extension.h, built with the unit's own flags
    pch_dir = root / "pch"
    pch_dir.mkdir()
    (pch_dir / "torch_ext.h").write_text("#pragma once\n#include <torch/extension.h>\n")
    words = shlex.split(host)
    i = words.index("-c")
    flags = [w for w in words[1:i] if not w.startswith("-DTORCH_EXTENSION_NAME") and w not in ("-MMD", "-MF")
             and not w.endswith(".o.d")]
    pch_cmd = [words[0], *flags, "-x", "c++-header", str(pch_dir / "torch_ext.h"), "-o", str(pch_dir / "torch_ext.h.gch")]
    res["pch_build_s"] = round(timed(pch_cmd)[0], 2)
    with_pch = words[:i] + ["-include", str(pch_dir / "torch_ext.h"), "-Winvalid-pch"] + words[i:]
    t, out = timed(with_pch, cwd=build)
    res["host_with_pch_s"] = round(t, 2)
    res["host_with_pch_warnings"] = out.strip()[-500:]
    o0 = [w if not re.fullmatch(r"-O[0-9s]", w) else "-O0" for w in words]
    res["host_O0_s"] = round(timed(o0, cwd=build)[0], 2)
    if args.device == "cuda":
        light = root / "light.cu"
        light.write_text(LIGHT_CU)
        nv = next(c for t, c in cmds.items() if t.endswith(".cuda.o"))
        arch = re.findall(r"-gencode=\S+|--generate-code=\S+|-arch=\S+", nv)
        res["nvcc_arch_flags"] = arch
        res["nvcc_light_s"] = round(timed(["nvcc", "-O3", *arch, "-Xcompiler", "-fPIC", "-c", str(light), "-o",
                                           str(root / "light.o")])[0], 2)
        # the torch-including unit: preprocessing alone, and without its PTX
        pre = re.sub(r"--generate-dependencies-with-compile --dependency-output \S+|-MM?D -MF \S+", "", nv)
        pre = re.sub(r" -o \S+", " -o /dev/null", pre.replace(" -c ", " -E "))
        res["nvcc_preprocess_only_s"] = round(timed(pre, cwd=build)[0], 2)
        # nvcc's own account of its phases (front end, device compile, ptxas, host compile)
        with contextlib.suppress(RuntimeError, OSError, ValueError):
            timed(f"{nv} --time {root / 'nvcc_time.csv'}", cwd=build)
            phases: dict[str, float] = {}
            for row in csv.reader((root / "nvcc_time.csv").read_text().splitlines()[1:]):
                if len(row) >= 8:  # source, phase, inputs, output, arch, tool, value, unit
                    phases[row[1].strip()] = round(phases.get(row[1].strip(), 0.0) + float(row[6]) / 1e3, 2)
            res["nvcc_phases_s"] = phases
        sass_only = re.sub(r"-gencode=arch=compute_(\d+),code=compute_\d+", "", nv)
        res["nvcc_no_ptx_s"] = round(timed(sass_only, cwd=build)[0], 2) if sass_only != nv else None
    # many cold builds at once
    n = args.concurrent
    if not n:
        return 0
    t0 = time.monotonic()
    with ThreadPoolExecutor(n) as pool:
        walls = list(pool.map(lambda k: load_inline_build(f"cold_c{k}", root / f"c{k}", args.device, f"c{k}")[2],
                              range(n)))
    res["concurrent"] = {"n": n, "wall_s": round(time.monotonic() - t0, 1),
                         "each_s": sorted(round(w, 1) for w in walls)}
    shutil.rmtree(root, ignore_errors=True)
    print("critical path of one cold build: import {:.1f} s + max(host {:.1f}, cuda {}) s + link {} s".format(
        res["import_torch_cpp_extension_s"], steps.get("main.o", 0), steps.get("cuda.cuda.o", "-"),
        next((v for k, v in steps.items() if k.endswith(".so")), "-")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
