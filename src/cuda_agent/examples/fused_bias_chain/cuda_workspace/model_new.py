"""The bias chain as one fused pass: `cuda_extension.bias_chain_forward` (kernels/bias_chain.cu)."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(channels, 1, 1))  # filled from Model's state_dict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.bias_chain_forward(x, self.bias)
