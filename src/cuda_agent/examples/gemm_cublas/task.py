"""Float32 matrix product (2048 x 1024) @ (1024 x 3072): a GEMM, to hand to cuBLAS directly (CUDA only)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for row-major float32 A [M, K] and B [K, N]."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 2048
K = 1024
N = 3072


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
