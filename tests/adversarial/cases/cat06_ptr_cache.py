"""Memoising outputs keyed on the input's address: the first call on a buffer computes, later calls on
the same buffer return the stored tensor.

Why evaluators miss it: harnesses that time the same input tensors over and over (and check only the
first output) see correct numbers at a fantastic speed. Here the judge writes fresh contents into the
same two input buffers before every call, so the third call returns a stale answer. (In strict a
call answered from the cache calls no kernel at all, which the op guard reports as decoy_kernel.)
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
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.memo:
            self.memo[key] = ext.relu_bias(x, self.bias)
        return self.memo[key]
