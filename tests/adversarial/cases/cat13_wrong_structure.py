"""Fault: an output of the wrong structure: the right tensor wrapped in a one-element tuple where the
reference returns a bare tensor.

Expected: structure_mismatch (a harness that unpacks sequences loosely would compare the tensor
inside and pass). (PyTorch code: judged under KernelBench's rules.)
"""
# category: 13
# fault: wrong_structure
# devices: cpu cuda
# expect[kernelbench]: structure_mismatch

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return ((x + self.bias).clamp_min(0),)
