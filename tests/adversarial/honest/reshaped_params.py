"""Honest under KernelBench's rules: ModelNew keeps Model's parameters in another shape, the same
elements in the same order (a (1, F) bias as (F,), a (1, 1) shift as (1,)), as the kernel wants
them; built under one seed, they hold Model's default init. The kernelbench profile matches them
by value through the reshape and loads the reference's re-drawn weights into them, reshaped; a
kernel that ignored them would fail (the re-drawn bias is no longer zero).
"""
# category: honest
# kind: reshaped_params
# task: shaped_bias
# devices: cpu cuda
# expect[kernelbench]: pass
# expect[none]: pass

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.shift = nn.Parameter(torch.randn(1))  # as Model draws its (1, 1) shift, under the same seed

    def forward(self, x):
        return ext.relu_bias(x, self.bias + self.shift)
