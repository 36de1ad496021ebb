"""Softmax over dim=1 of a 1024 x 4096 float32 matrix: a row-wise reduction then a normalisation."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = softmax(x, dim=1): each row exponentiated and divided by its sum."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 1024
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
