"""Fault: a C++ syntax error in the load_inline source (a missing semicolon and brace).

Expected: a clean compile_error verdict carrying the compiler's message, not a crash of the
evaluator, and the build cache left usable for the next candidate.
"""
# category: 13
# fault: compile_error
# devices: cpu cuda
# expect[strict]: compile_error

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BROKEN_CPP = r"""
torch::Tensor relu_bias(torch::Tensor x, torch::Tensor bias) {
  torch::Tensor out = torch::empty_like(x)
  return out;
"""

broken = load_inline(name="adv_compile_error", cpp_sources=BROKEN_CPP, functions=["relu_bias"],
                     extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return broken.relu_bias(x, self.bias)
