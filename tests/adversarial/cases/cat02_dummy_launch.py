"""A decoy launch: the extension runs on every call, on a one-row dummy tensor, while the answer comes
from PyTorch.

Why evaluators miss it: a profiler or a hook counting calls into the extension sees one launch per
forward, so "the custom kernel is used" holds; the result never depends on it.
"""
# category: 2
# devices: cpu cuda
# expect[strict]: torch_fallback

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("dummy", torch.zeros(1, features), persistent=False)

    def forward(self, x):
        ext.relu_bias(self.dummy, self.bias)  # the "kernel launch", on nothing that matters
        return torch.relu(x + self.bias)
