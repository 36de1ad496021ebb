"""Ignoring a bias because it starts at zero: the task's Model initialises its bias with zeros, so a
kernel that adds nothing matches it at default init. The kernel keeps the parameter (its name
matches) and passes a zero buffer instead.

Why evaluators miss it: with both models at default init the bias is zero everywhere. Here the
reference's parameters are re-drawn at random (a zero constant becomes U(-0.5, 0.5)) before they are
loaded into ModelNew, so the missing bias shows.
"""
# category: 10
# task: zero_bias
# devices: cpu cuda
# expect[strict]: output_mismatch
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
        return ext.relu_bias(x, self.zero)  # the bias "is" zero
