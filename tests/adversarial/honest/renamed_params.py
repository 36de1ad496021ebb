"""Honest under KernelBench's rules: ModelNew's parameter has another name than Model's (`b` for
`bias`) but holds the same tensor, since both models are built under one seed (KernelBench's own
rule). The kernelbench profile matches it by that value and loads the reference's re-drawn bias into
it. (The strict profile requires Model's names: state_dict_mismatch, with a hint to rename.)
"""
# category: honest
# kind: renamed_params
# devices: cpu cuda
# expect[kernelbench]: pass
# expect[none]: pass

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.b = nn.Parameter(torch.randn(features))  # as Model draws its bias, under the same seed

    def forward(self, x):
        return ext.relu_bias(x, self.b)
