"""Cheating on purpose: reads the clock inside the candidate to detect the timer.
Expected verdict: timing_probe (static policy, before anything runs)."""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = time.perf_counter()
        return torch.relu(x)
