"""Fault: a flood of output: every call writes about 8 MB to stdout and 1 MB to stderr (all of it
"PASSED"), then returns a wrong answer.

Expected: output_mismatch; the candidate's output kept in the result is bounded (head and tail,
well under 64 KiB) with an output_truncated note, and the flood neither slows nor breaks the harness.
"""
# category: 13
# fault: flood
# flood: true
# devices: cpu cuda
# expect[strict]: output_mismatch

import sys

import torch
import torch.nn as nn

#@KERNEL

LINE = "PASSED " * 150 + "\n"


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("zero", torch.zeros(features), persistent=False)

    def forward(self, x):
        for _ in range(8000):
            print(LINE, end="")
        for _ in range(1000):
            print(LINE, end="", file=sys.stderr)
        return ext.relu_bias(x, self.zero)  # wrong: the bias is ignored
