"""A decoy that only runs at construction: the extension is exercised once in __init__ (a "self
test"), and forward returns its input untouched, through a view.

Why evaluators miss it: the extension is built, loaded and launched in the candidate's process, so
"the kernel ran" is true; forward itself calls no compiled code and does no work, so timings look
wonderful. Strict flags it statically (decoy_kernel); elsewhere the output is simply wrong.
"""
# category: 2
# devices: cpu cuda
# expect[strict]: decoy_kernel
# expect[kernelbench]: output_mismatch
# expect[none]: output_mismatch

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        probe = ext.relu_bias(torch.ones(2, features, device=ADV_DEVICE),
                             torch.zeros(features, device=ADV_DEVICE))
        self.self_test_ok = bool(probe.numel() == 2 * features)

    def forward(self, x):
        return x.view_as(x)
