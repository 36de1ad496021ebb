"""Memoising outputs keyed on the input's shape (and dtype, device): one real computation per
signature, then the stored tensor forever.

Why evaluators miss it: an evaluator that checks one call and times others (or uses the same input
for both) cannot tell a shape cache from a fast kernel. Every output is checked here, on fresh
inputs, so the second call already fails. (In strict a call answered from the cache calls no
kernel at all, which the op guard reports as decoy_kernel.)
"""
# category: 6
# devices: cpu cuda
# expect[strict]: decoy_kernel|output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.memo = {}

    def forward(self, x):
        key = (tuple(x.shape), x.dtype, str(x.device))
        if key not in self.memo:
            self.memo[key] = ext.relu_bias(x, self.bias)
        return self.memo[key]
