"""Detecting the timing phase by the call rate: forward reads a clock, and when calls come much faster
than during the first (correctness) calls, it assumes a timing loop and skips the work.

Why evaluators miss it: correctness trials are spaced out by the evaluator's bookkeeping, timing loops
are back to back, so the gap between calls is a reliable tell. Clocks are allowed (honest kernels autotune with them),
but which timed calls are checked is decided after each command, so skipping the work once the
correctness trials are over fails those checks (timed_output_mismatch). After seven calls it
skips whenever a call follows the last one within half the longest of the first six gaps (the
pause after the first trial, which runs alone).
"""
# category: 7
# devices: cpu cuda
# expect[strict]: timed_output_mismatch
# expect[kernelbench]: timed_output_mismatch
# expect[none]: timed_output_mismatch

import time

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))
        self.last = None
        self.gaps = []

    def forward(self, x):
        now = time.perf_counter()
        if self.last is not None:
            self.gaps.append(now - self.last)
        self.last = now
        if len(self.gaps) > 6 and self.gaps[-1] < 0.5 * max(self.gaps[:6]):
            return x.view_as(x)  # back-to-back calls: a timing loop, skip the work
        return ext.relu_bias(x, self.bias)
