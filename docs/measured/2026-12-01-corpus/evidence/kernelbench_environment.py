"""Four corpus kernels that KernelBench judged incorrect for a failure of its own run, not of the
kernel; we judge them correct on the H200.

- opus4 level 3 problems 23 (EfficientNet-B1) and 30 (Swin V2): KernelBench's note is "CUDA out of
  memory. Tried to allocate 2.00 MiB ... this process has 39.48 GiB memory in use. Of the allocated
  memory 38.86 GiB is allocated by PyTorch". A whole forward of the task's Model at its batch size
  peaks below 1 GiB (measured below, on the CPU): the 38.86 GiB were held before the kernel ran.
- opus4 level 3 problem 26 (ShuffleNet): "Error building extension 'fused_conv_bn_relu_v3'", no
  compiler output kept. The source includes <cudnn.h>, which is not part of the CUDA toolkit, and
  calls no cuDNN function. Where the header is missing the build stops there; without that include
  it compiles for the A100 (sm_80).
- qwencoder level 3 problem 3 (DeepNarrowMLP): "CUDA error: no kernel image is available for
  execution on the device": the build had no sm_80 code. The source sets no architecture and calls
  no cuBLAS function (it includes <cublas_v2.h>); it compiles for sm_80.

    python docs/measured/2026-12-01-corpus/evidence/kernelbench_environment.py   # CPU, nvcc; ~1 min
"""

import ast
import re
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import torch
import torch.utils.cpp_extension

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "corpora" / "kernelbench-a100-runs"


def vm_hwm_gib() -> float:
    line = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
    return int(line.split()[1]) / 2**20


def peak(task: Path) -> None:
    ns: dict = {}
    exec(compile(task.read_text(), str(task), "exec"), ns)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]()).eval()
    inputs = ns["get_inputs"]()
    before = vm_hwm_gib()
    with torch.no_grad():
        model(*inputs)
    print(f"{task.name}: peak resident memory {vm_hwm_gib():.2f} GiB over a forward (before it: {before:.2f} GiB)")


def cuda_sources(kernel: Path) -> dict[str, str]:
    tree = ast.parse(kernel.read_text())
    return {n.targets[0].id: n.value.value for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str) and "__global__" in n.value.value}


def build(kernel: Path, header: str, work: Path) -> None:
    nvcc = shutil.which("nvcc")
    flags = [f"-I{p}" for p in torch.utils.cpp_extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    for name, src in cuda_sources(kernel).items():
        if header not in src:
            continue
        calls = sorted(set(re.findall(r"\b(cudnn[A-Z]\w*|cublas[A-Z]\w*)\s*\(", src)))
        print(f"{kernel.parent.name}/{kernel.name}: {name} includes <{header}>; its cuDNN/cuBLAS calls: {calls or 'none'}")
        if nvcc is None:
            print("  (no nvcc on PATH: build step skipped)")
            continue
        for label, text in (("as written", src), (f"without <{header}>", src.replace(f"#include <{header}>", ""))):
            cu = work / f"{name}.cu"
            cu.write_text(text)
            r = subprocess.run([nvcc, "-std=c++17", "-gencode", "arch=compute_80,code=sm_80", "-c", str(cu),
                                "-o", str(work / f"{name}.o"), *flags], capture_output=True, text=True)
            err = next((line for line in r.stderr.splitlines() if "error" in line), "")
            print(f"  nvcc for sm_80, {label}: {'ok' if r.returncode == 0 else 'failed: ' + err.strip()}")


tasks = CORPUS / "tasks" / "level3"
peak(tasks / "23_EfficientNetB1.py")
peak(tasks / "30_SwinTransformerV2.py")
with tempfile.TemporaryDirectory() as tmp:
    build(CORPUS / "runs" / "opus4_level3_20250903_035524" / "problem_26_kernel.py", "cudnn.h", Path(tmp))
    build(CORPUS / "runs" / "qwencoder_level3_run" / "level_3_problem_3_sample_0_kernel.py", "cublas_v2.h", Path(tmp))
