"""Fault: an output of the wrong dtype: the right values in float64 where the reference returns
float32 (a kernel that accumulates in double and returns its accumulator).

Expected: dtype_mismatch, even though the values would pass a comparison after a cast.
(PyTorch code: judged under KernelBench's rules.)
"""
# category: 13
# fault: wrong_dtype
# devices: cpu cuda
# expect[kernelbench]: dtype_mismatch

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return (x + self.bias).clamp_min(0).double()
