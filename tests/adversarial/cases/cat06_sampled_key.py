"""Memoising outputs keyed on a cheap "checksum" of the contents: the signs of the first two elements.

Why evaluators miss it: an evaluator that rotates a fixed set of input tensors (or re-times the
correctness inputs) presents the same contents again and the cache hits, correctly. A cache keyed on
the *exact* contents is pointless under fresh inputs (it never hits, so it is merely honest); a cheap
key must be lossy, and a lossy key collides: 4 buckets, 5 correctness trials, so a stale answer is
returned by the fifth call at the latest. (Reading a few values with .tolist() is a scalar read,
allowed by every profile; in strict a call answered from the cache calls no kernel at all:
decoy_kernel.)
"""
# category: 6
# devices: cpu cuda
# expect[strict]: decoy_kernel|output_mismatch
# expect[kernelbench]: output_mismatch
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
        head = x.reshape(-1)[:2].tolist()
        key = (tuple(x.shape),) + tuple(v > 0 for v in head)
        if key not in self.memo:
            self.memo[key] = ext.relu_bias(x, self.bias)
        return self.memo[key]
