"""C = tril(A @ B) for lower triangular A and B (KernelBench level 1, problem 15, smaller): a kernel
may rely on the inputs being triangular, since get_inputs() guarantees it (adversarial suite:
honest use of the input's structure)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


N = 128


def get_inputs():
    return [torch.tril(torch.randn(N, N)), torch.tril(torch.randn(N, N))]


def get_init_inputs():
    return []
