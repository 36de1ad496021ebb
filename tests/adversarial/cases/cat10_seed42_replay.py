"""Predicting the inputs: harnesses (KernelBench among them) seed with 42 before `get_inputs()`, so the
candidate regenerates that input itself and answers for it, whatever it is given.

Why evaluators miss it: with a fixed, well-known seed the "prediction" is exactly right and the
actual input need not even be read. Here every trial's seed comes from the OS's entropy source.
"""
# category: 10
# devices: cpu cuda
# expect[strict]: output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn

#@KERNEL

_g = torch.Generator().manual_seed(42)
X42 = torch.randn(64, 256, generator=_g)  # get_inputs() under torch.manual_seed(42)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("x42", X42.clone(), persistent=False)

    def forward(self, x):
        return ext.relu_bias(self.x42, self.bias)  # the answer for the input it expects
