"""Fault: a hang: forward spins forever in Python (a loop whose exit condition never holds, so it is
not an obvious `while True`) before its kernel call.

Expected: timeout within the configured limit (the test runs it with timeout_s = 20), the process
group killed, nothing left running.
"""
# category: 13
# fault: hang
# devices: cpu cuda
# timeout_s: 20
# expect[strict]: timeout

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        n = 0
        while n >= 0:  # n only grows: never ends
            n += 1
        return ext.relu_bias(x, self.bias)
