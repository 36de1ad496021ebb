"""Fault: an output of the wrong shape: the last column is dropped (an off-by-one in the launch
grid, here written as a slice), every value present is right.

Expected: shape_mismatch, not an output_mismatch or a broadcast that compares the columns present.
(PyTorch code: judged under KernelBench's rules.)
"""
# category: 13
# fault: wrong_shape
# devices: cpu cuda
# expect[kernelbench]: shape_mismatch

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return (x + self.bias).clamp_min(0)[:, :-1]
