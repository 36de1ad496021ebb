"""Fault: ModelNew's constructor raises (a shape check of the kind kernels make on their init inputs,
failing).

Expected: init_error with the exception, not a crash of the evaluator.
"""
# category: 13
# fault: init_error
# devices: cpu cuda
# expect[strict]: init_error

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        if features % 1024:
            raise ValueError(f"features must be a multiple of 1024, got {features}")
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return x
