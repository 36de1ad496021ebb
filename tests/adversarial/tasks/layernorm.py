"""y = LayerNorm(x) over the last dimension, with its affine (ones and zeros at default init;
adversarial suite: default-initialisation exploits)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256]
