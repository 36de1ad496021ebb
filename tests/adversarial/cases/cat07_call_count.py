"""Detecting the timing phase by counting calls: the first 10 calls (more than the 5 + 2 correctness
trials) compute honestly; from then on forward returns its input through a view, doing no work.

Why evaluators miss it: correctness is checked on the first calls and only times are taken from the
later ones. Here the output of every timed call is checked as well (timed_output_mismatch).
"""
# category: 7
# devices: cpu cuda
# expect[strict]: timed_output_mismatch
# expect[none]: timed_output_mismatch

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 10:
            return x.view_as(x)  # "the timer is running": no work at all
        return ext.relu_bias(x, self.bias)
