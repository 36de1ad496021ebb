"""Falling back to PyTorch through an operator: the GEMM is `x @ w.t()`, only the cheap bias + ReLU
epilogue runs in the candidate's kernel.

Why evaluators miss it: a custom kernel is compiled and launched on every call, so "does forward use
the extension?" says yes, and a grep for `torch.` in forward finds nothing: the expensive part hides
in the `@` operator (aten::mm).
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

    def forward(self, x):
        return ext.relu_bias(x @ self.fc.weight.t(), self.fc.bias)
