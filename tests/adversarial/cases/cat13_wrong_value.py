"""Fault: an honest kernel with a small numerical error: relu clamps at 0.05 instead of 0, so every
element below 0.05 is off by up to 0.05 (five times the default tolerance), the rest exact.

Expected: output_mismatch. A wrong answer, not a cheat: the comparison must catch an error that is
small but beyond atol = rtol = 1e-2, without any other reason. (PyTorch code: judged under
KernelBench's rules, which allow torch ops in forward.)
"""
# category: 13
# fault: wrong_value
# devices: cpu cuda
# expect[kernelbench]: output_mismatch

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return (x + self.bias).clamp_min(0.05)
