"""y = relu(x + bias), its sizes stated as module-level constants as KernelBench states them
(adversarial suite: shape trials, EvalConfig.shapes). `features` builds the model; `batch_size`
is the inputs' alone, so shape trials scale it."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x + self.bias)


batch_size = 16
features = 256


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
