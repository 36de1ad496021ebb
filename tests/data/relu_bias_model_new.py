import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """A correct candidate for relu_bias_task.py, in plain PyTorch."""

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x + self.bias)
