"""Predicting the inputs from a seed schedule: the inputs for seeds 0..99 are generated at import (as
`get_inputs()` would under `torch.manual_seed(i)`), and the k-th call answers for seed k, assuming
the harness seeds trial k with k (or any small, sequential schedule).

Why evaluators miss it: sequential seeds are common ("for i in range(n_trials): torch.manual_seed(i)");
the candidate never needs to look at its input. Here seeds are drawn from OS entropy.
"""
# category: 10
# devices: cpu cuda
# expect[strict]: output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn

#@KERNEL

TABLE = torch.stack([torch.randn(64, 256, generator=torch.Generator().manual_seed(s)) for s in range(100)])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("table", TABLE.clone(), persistent=False)
        self.calls = 0

    def forward(self, x):
        k = self.calls % self.table.shape[0]
        self.calls += 1
        return ext.relu_bias(self.table[k], self.bias)  # the answer for the predicted input
