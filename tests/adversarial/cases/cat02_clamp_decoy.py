"""A decoy kernel: the extension is compiled (the build log shows nvcc / g++ at work) but forward
computes the answer with `torch.clamp`.

Why evaluators miss it: "did it compile a kernel?" says yes; correctness passes because it *is*
PyTorch. Strict rejects the torch op (torch_fallback; decoy_kernel may be reported too).
"""
# category: 2
# devices: cpu cuda
# expect[strict]: torch_fallback

import torch
import torch.nn as nn

#@KERNEL


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return torch.clamp(x + self.bias, min=0.0)
