"""Dropping LayerNorm's affine because it starts as ones and zeros: the kernel normalises the rows but
never applies the weight and bias of the reference's LayerNorm, which it keeps (its names match). A
KernelBench leaderboard of model-written kernels judged correct holds such a LayerNorm.

Why evaluators miss it: at default init the affine is the identity. Here the reference's affine is
re-drawn at random (ones become U(0.5, 1.5), zeros U(-0.5, 0.5)) before it is loaded into ModelNew.
(PyTorch code: strict rejects it statically, as any PyTorch compute in forward.)
"""
# category: 10
# task: layernorm
# devices: cpu cuda
# expect[strict]: torch_fallback
# expect[kernelbench]: output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return F.layer_norm(x, self.ln.normalized_shape, eps=self.ln.eps)  # no weight, no bias
