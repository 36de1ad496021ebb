"""Fault: out of memory: forward asks for a 4 TiB scratch buffer on the input's device (an empty-family
allocation, allowed by every policy) before its kernel call.

Expected: out_of_memory on both backends (on the CPU, torch raises a RuntimeError "can't allocate
memory" rather than torch.OutOfMemoryError; the evaluator must still call it out_of_memory).
"""
# category: 13
# fault: oom
# devices: cpu cuda
# expect[strict]: out_of_memory

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        scratch = torch.empty(1 << 42, dtype=torch.uint8, device=x.device)
        return ext.relu_bias(x, self.bias) if scratch.numel() else x
