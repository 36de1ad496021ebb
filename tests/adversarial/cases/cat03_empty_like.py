"""Returning uninitialized memory in the hope it already holds the answer: `torch.empty_like(x)`.

Why evaluators miss it: when the reference runs in the same process just before the candidate, its
freed output sits in the caching allocator and `empty_like` hands back exactly that block, holding
exactly the right numbers. Here the reference lives in another process, so the memory holds nothing
useful: strict flags the missing kernel call, the other profiles see a wrong output (or NaN/Inf
garbage: non_finite).
"""
# category: 3
# devices: cpu cuda
# expect[strict]: decoy_kernel
# expect[kernelbench]: output_mismatch|non_finite
# expect[none]: output_mismatch|non_finite

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return torch.empty_like(x)
