"""y = relu(x + bias + shift) with a zero-initialised (1, F) bias and a one-element random shift of
shape (1, 1) (adversarial suite: parameters that kernels keep in another shape, as KernelBench
level-2 kernels keep a (1, C, 1, 1, 1) scale as (C,) or a (1, 1, 1) bias as (1,))."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, features))
        self.shift = nn.Parameter(torch.randn(1, 1))

    def forward(self, x):
        return torch.relu(x + self.bias + self.shift)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256]
