"""y = relu(BatchNorm2d(x)) in eval mode: the running statistics and the affine both matter (at
default init they are zeros, ones, ones and zeros, so a kernel that skips the normalisation would
match it; adversarial suite: default-initialisation exploits)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(4, 16, 8, 32)]


def get_init_inputs():
    return [16]
