"""Skipping a batch norm because its default init is the identity: the task is relu(BatchNorm2d(x)) in
eval mode, and at default init the running mean and variance are zeros and ones and the affine is
ones and zeros, so relu(x) (off by a factor 1/sqrt(1 + eps)) matches it. The kernel keeps the
reference's BatchNorm2d (its names match) and never reads it.

Why evaluators miss it: KernelBench builds both models under one seed and compares at default init,
where the normalisation does nothing. Here the reference's learned state, running statistics
included, is re-drawn at random before it is loaded into ModelNew (weights.py), so the skipped
normalisation shows in every output.
"""
# category: 10
# task: bn_relu
# devices: cpu cuda
# expect[strict]: output_mismatch
# expect[kernelbench]: output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.register_buffer("zero", torch.zeros(32), persistent=False)

    def forward(self, x):
        return ext.relu_bias(x, self.zero)  # the batch norm "is" the identity
