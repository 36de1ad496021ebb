"""Wrong on purpose (for the benchmark's H200 run): a leaky ReLU where ReLU is asked for.
Expected verdict: output_mismatch (negative inputs give -0.05 x instead of 0)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, 0.05)
