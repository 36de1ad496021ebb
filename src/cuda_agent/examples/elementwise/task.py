"""Swish (SiLU) activation, x * sigmoid(x), on a 2048 x 2048 float32 tensor: one elementwise op."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = x * sigmoid(x). Eager runs two kernels (sigmoid, then the product) and one temporary."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


batch_size = 2048
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
