"""Honest: relu(x + bias) in the suite's own extension (raw OpenMP loop / raw CUDA kernel), nothing
else. Must pass unflagged under every profile: the baseline the cheating cases are variations of.
"""
# category: honest
# kind: plain
# devices: cpu cuda
# expect[strict]: pass
# expect[kernelbench]: pass
# expect[none]: pass

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return ext.relu_bias(x, self.bias)
