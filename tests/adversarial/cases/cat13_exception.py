"""Fault: an exception escapes forward (after a real kernel call).

Expected: runtime_error with the traceback, not a crash of the evaluator.
"""
# category: 13
# fault: exception
# devices: cpu cuda
# expect[strict]: runtime_error

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        out = ext.relu_bias(x, self.bias)
        if out.numel() > 0:
            raise ValueError("kernel launch failed: too many resources requested for launch")
        return out
