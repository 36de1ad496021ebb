"""Training mode against eval mode: three corpus kernels on which KernelBench and we judge different
functions, because KernelBench never calls `.eval()` and we run both models in `.eval()` (DESIGN
section 3), so BatchNorm normalises with the batch's statistics there and with the running ones here.

- opus4 level 3 problem 8 (ResNet basic block): ModelNew's fused `bn_relu` kernel normalises with
  `bn1.running_mean` / `running_var` (inference batch norm). KernelBench: output mismatch. Us: correct.
- qwencoder level 2 problems 52 and 73: `forward` runs the reference's own PyTorch ops when
  `self.training` and its CUDA path only otherwise. KernelBench timed and checked the PyTorch branch
  (correct, and no kernel ran); we check the CUDA path, which pads the convolution by 1 where the
  task's has no padding: `torch::conv2d(input, weight, bias, 1, 1, 1, 1)` (problem 52, line 55) and
  `pad = kernel_size // 2` (problem 73, line 162), so its output is 128x128 where the task's is
  126x126 (shape_mismatch; problem 73's path also ignores bn.weight and bn.bias).

This script shows the first case on the CPU, with the kernel's math written in PyTorch (a smaller
input than the task's 10x3x224x224, and running statistics re-drawn as our evaluator does):

    python docs/measured/2026-12-01-corpus/evidence/training_mode.py
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
block = nn.ModuleDict({
    "conv1": nn.Conv2d(3, 64, 3, padding=1, bias=False), "bn1": nn.BatchNorm2d(64),
    "conv2": nn.Conv2d(64, 64, 3, padding=1, bias=False), "bn2": nn.BatchNorm2d(64),
    "down": nn.Conv2d(3, 64, 1, bias=False), "bnd": nn.BatchNorm2d(64)})
for name in ("bn1", "bn2", "bnd"):  # learned state re-drawn, as the evaluator does
    bn = block[name]
    bn.weight.data.uniform_(0.5, 1.5), bn.bias.data.normal_(0, 0.1)
    bn.running_mean.normal_(0, 0.1), bn.running_var.uniform_(0.5, 1.5)


def reference(x):  # the task's Model.forward
    out = F.relu(block["bn1"](block["conv1"](x)))
    out = block["bn2"](block["conv2"](out))
    return F.relu(out + block["bnd"](block["down"](x)))


def kernel(x):  # ModelNew.forward: bn_relu_cuda uses bn1's running statistics in every mode
    bn1 = block["bn1"]
    out = F.relu(F.batch_norm(block["conv1"](x), bn1.running_mean, bn1.running_var, bn1.weight, bn1.bias,
                              training=False, eps=bn1.eps))
    out = block["bn2"](block["conv2"](out))
    return F.relu(out + block["bnd"](block["down"](x)))  # add_relu_cuda


x = torch.rand(4, 3, 56, 56)
with torch.no_grad():
    for mode in ("train", "eval"):
        block.train(mode == "train")
        state = {k: v.clone() for k, v in block.state_dict().items()}
        ref = reference(x)
        block.load_state_dict(state)  # training-mode batch norm updated its running statistics
        got = kernel(x)
        block.load_state_dict(state)
        print(f"{mode} mode: allclose(atol=rtol=1e-2) {torch.allclose(got, ref, atol=1e-2, rtol=1e-2)}, "
              f"max abs error {(got - ref).abs().max():.3g}")
