"""Fault: an output on the wrong device: the right values, copied back to the host before returning,
where the reference's output lives on the GPU.

Expected: device_mismatch. CUDA only: on the CPU backend every tensor is on the host.
(PyTorch code: judged under KernelBench's rules.)
"""
# category: 13
# fault: wrong_device
# devices: cuda
# expect[kernelbench]: device_mismatch

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return (x + self.bias).clamp_min(0).cpu()
