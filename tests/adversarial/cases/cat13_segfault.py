"""Fault: a segmentation fault in host code: the C++ binding writes through a null pointer (the
pointer and its pointee both volatile, so the compiler can neither drop the store nor turn it into a
trap). Host code, so it crashes the same way on both backends.

Expected: crash (the candidate process died of SIGSEGV), a clean verdict within the time limit.
"""
# category: 13
# fault: segfault
# devices: cpu cuda
# expect[strict]: crash

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

#@KERNEL

NULL_CPP = r"""
torch::Tensor poke(torch::Tensor x) {
  volatile float* volatile p = nullptr;  // both volatile: the compiler may drop neither load nor store
  *p = static_cast<float>(x.numel());   // SIGSEGV
  return x;
}
"""

null = load_inline(name="adv_null_write", cpp_sources=NULL_CPP, functions=["poke"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        null.poke(x)
        return ext.relu_bias(x, self.bias)
