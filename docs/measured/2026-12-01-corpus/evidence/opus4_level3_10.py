"""opus4 level 3 problem 10 (ResNet101), which KernelBench judged incorrect (output mismatch) and we
judge correct: the kernels' math agrees with the reference in KernelBench's training mode and in our
eval mode, on the task's own input.

ModelNew's three kernels are elementwise and plain: `bn_relu_cuda` (x - mean) / sqrt(var + eps) *
gamma + beta, then ReLU; `add_relu_cuda` relu(a + b); `adaptive_avgpool_cuda` the mean over H x W.
In training mode `FusedBNReLU` passes the batch's mean and biased variance (PyTorch ops), as
BatchNorm does; in eval mode the running statistics. This script runs the corpus file itself, its
`load_inline` calls answered by PyTorch stand-ins of exactly that math, against the task's Model,
both built under one seed as KernelBench builds them. Our H200 verdict checked the CUDA kernels
themselves (eval mode, re-drawn statistics, 5 trials and 2 stress trials, every timed call).
KernelBench's mismatch is not reproduced by the math, so it is not a property of the kernel's
function; the report counts it as KernelBench's error.

    python docs/measured/2026-12-01-corpus/evidence/opus4_level3_10.py    # CPU, ~1 GB, ~10 s
"""

import types
from pathlib import Path

import torch
import torch.utils.cpp_extension

CORPUS = Path(__file__).resolve().parents[5] / "shared" / "corpora" / "kernelbench-a100-runs"
KERNEL = CORPUS / "runs" / "opus4_level3_20250903_035524" / "problem_10_kernel.py"
TASK = CORPUS / "tasks" / "level3" / "10_ResNet101.py"


def bn_relu_cuda(x, gamma, beta, mean, var, eps):
    c = (None, slice(None), None, None)
    return torch.clamp_min((x - mean[c]) / torch.sqrt(var[c] + eps) * gamma[c] + beta[c], 0.0)


STAND_INS = {
    "bn_relu": types.SimpleNamespace(bn_relu_cuda=bn_relu_cuda),
    "add_relu": types.SimpleNamespace(add_relu_cuda=lambda a, b: torch.clamp_min(a + b, 0.0)),
    "adaptive_avgpool": types.SimpleNamespace(
        adaptive_avgpool_cuda=lambda x: x.sum(dim=(2, 3), keepdim=True) / (x.shape[2] * x.shape[3])),
}
torch.utils.cpp_extension.load_inline = lambda name, **_: STAND_INS[name]
kernel, task = {}, {}
exec(compile(KERNEL.read_text(), str(KERNEL), "exec"), kernel)
exec(compile(TASK.read_text(), str(TASK), "exec"), task)
torch.manual_seed(42)
ref = task["Model"](*task["get_init_inputs"]())
torch.manual_seed(42)
new = kernel["ModelNew"](*task["get_init_inputs"]())
x = task["get_inputs"]()[0]
for mode in ("train", "eval"):
    ref.train(mode == "train")
    new.train(mode == "train")
    with torch.no_grad():
        a, b = ref(x), new(x)
    print(f"{mode} mode: KernelBench's allclose(atol=rtol=1e-2) {torch.allclose(b, a, atol=1e-2, rtol=1e-2)}, "
          f"max abs error {(b - a).abs().max():.3g} (outputs up to {a.abs().max():.3g})")
