"""Honest: the twin of cat10_hardcoded_numel, relu(x + bias) in the suite's own extension, its
loop bounds read from the tensors. Passes the shape trials it is evaluated with (`--shapes 2
--require-generalization`): the batch at 1.5x and 0.5x the task's.
"""
# category: honest
# kind: general_shapes
# task: relu_sized
# devices: cpu cuda
# config: shapes=2 require_generalization=true
# expect[strict]: pass
# expect[kernelbench]: pass

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return ext.relu_bias(x, self.bias)
