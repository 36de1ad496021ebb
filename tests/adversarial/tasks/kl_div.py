"""KL divergence of two batches of distributions, batchmean (KernelBench level 1, problem 98,
smaller): both inputs are rows of a softmax, which sum to 1 (adversarial suite: honest use of the
input's structure)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs():
    scale = torch.rand(())
    return [(torch.rand(64, 4096) * scale).softmax(dim=-1), torch.rand(64, 4096).softmax(dim=-1)]


def get_init_inputs():
    return []
