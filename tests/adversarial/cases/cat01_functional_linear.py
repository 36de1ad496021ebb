"""Falling back to PyTorch through torch.nn.functional: `F.linear` does the GEMM, the extension only
the epilogue.

Why evaluators miss it: the extension is called on every forward, the output is right, and the
speedup over eager is real (one fused epilogue instead of two ops). Profile `kernelbench` allows
torch ops in forward, so there the same file is judged correct: that line pins the profile's meaning.
"""
# category: 1
# task: linear_relu
# devices: cpu cuda
# expect[strict]: torch_fallback
# expect[kernelbench]: pass

import torch
import torch.nn as nn
import torch.nn.functional as F

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.relu_bias(F.linear(x, self.fc.weight), self.fc.bias)
