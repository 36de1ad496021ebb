"""Fault: a kernel fitted to the task's input distribution: it clamps its input to [-6, 6], which no
draw of `torch.randn` leaves in practice, and is exact there.

Expected: stress_mismatch: the trials on the task's own distribution pass, the stress trials (scaled
inputs, within the task's stated structure) do not. (PyTorch code: judged under KernelBench's rules.)
"""
# category: 13
# fault: stress_mismatch
# devices: cpu cuda
# expect[kernelbench]: stress_mismatch

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return (x.clamp(-6, 6) + self.bias).clamp_min(0)
