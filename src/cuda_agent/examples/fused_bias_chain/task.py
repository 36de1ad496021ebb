"""Scale, per-channel bias, ReLU, scale on an NCHW tensor: a chain of four elementwise ops to fuse."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x * 2 + bias) * 0.5 with a learned bias per channel. Eager runs four kernels and
    writes three temporaries; one fused pass reads x once and writes y once."""

    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * 2.0
        x = x + self.bias
        x = torch.relu(x)
        return x * 0.5


batch_size = 64
channels = 64
height = 32
width = 32


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
