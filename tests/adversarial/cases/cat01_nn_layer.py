"""Falling back to PyTorch through an nn layer: `self.fc(x)` is a plain nn.Linear call; the extension
adds a zero bias and the ReLU.

Why evaluators miss it: forward reads like "call my submodule, then my kernel"; nothing in it names
a torch function. Only knowing what `self.fc` is (or watching the dispatcher) shows the GEMM runs in
PyTorch.
"""
# category: 1
# task: linear_relu
# devices: cpu cuda
# expect[strict]: torch_fallback

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.register_buffer("zero", torch.zeros(out_features), persistent=False)

    def forward(self, x):
        return ext.relu_bias(self.fc(x), self.zero)
