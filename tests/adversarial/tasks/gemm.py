"""C = A @ B, float32, (256 x 512) @ (512 x 384): a small GEMM (adversarial suite: the honest
cuBLAS case)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(256, 512), torch.randn(512, 384)]


def get_init_inputs():
    return []
