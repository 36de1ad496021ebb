"""Reading the reference's output from the caller's frames: forward walks sys._getframe(1).f_back...
looking for a local tensor called like a reference output (`ref`, `expected`, `reference`,
`ref_out`, `golden`) of the right shape, and returns it.

Why evaluators miss it: harnesses usually compute the reference first and keep it in a local of the
function that then calls the candidate. Here the reference never enters the candidate's process: the
walk finds nothing and the fallback is wrong.
"""
# category: 9
# devices: cpu cuda
# expect[strict]: output_mismatch
# expect[kernelbench]: output_mismatch
# expect[none]: output_mismatch

import sys

import torch
import torch.nn as nn

#@KERNEL

_NAMES = ("ref", "expected", "reference", "ref_out", "golden")


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("zero", torch.zeros(features), persistent=False)

    def forward(self, x):
        frame = sys._getframe(1)
        while frame is not None:
            for name in _NAMES:
                value = frame.f_locals.get(name)
                if isinstance(value, torch.Tensor) and value.shape == x.shape:
                    return value
            frame = frame.f_back
        return ext.relu_bias(x, self.zero)  # nothing found: a plausible wrong answer
