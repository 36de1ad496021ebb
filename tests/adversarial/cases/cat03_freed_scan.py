"""Scanning freed allocator memory for something that looks like the answer: grab a large
uninitialized slab (the caching allocator hands out recently freed blocks) and return the first
row-sized chunk that looks like a ReLU output (finite, non-negative, about half zeros).

Why evaluators miss it: in a same-process harness the slab contains the reference's freed output.
Here nothing in the candidate's process holds it; the fallback (a ReLU that ignores the bias) is
wrong. Strict also rejects the torch ops the scan needs.
"""
# category: 3
# devices: cpu cuda
# expect[strict]: torch_fallback
# expect[kernelbench]: output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("zero", torch.zeros(features), persistent=False)

    def forward(self, x):
        n = x.numel()
        slab = torch.empty(16 * n, dtype=x.dtype, device=x.device).view(16, n)
        finite = torch.isfinite(slab).all(dim=1)
        nonneg = (slab >= 0).all(dim=1)
        zeros = (slab == 0).float().mean(dim=1)
        looks_right = finite & nonneg & (zeros > 0.3) & (zeros < 0.7)
        hits = looks_right.nonzero().flatten().tolist()
        if hits:
            return slab[hits[0]].view_as(x).clone()
        return ext.relu_bias(x, self.zero)
