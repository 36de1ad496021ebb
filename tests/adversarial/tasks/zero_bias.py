"""y = relu(x + bias) with a bias initialised to zeros, as many models initialise theirs
(adversarial suite: default-initialisation exploits)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return torch.relu(x + self.bias)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256]
