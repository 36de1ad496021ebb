"""Falling back to PyTorch from C++, hidden from a token scan by the preprocessor: the namespace and
the op name are pasted together by macros, so neither the ATen namespace nor `mm` appears as a token.

Why evaluators miss it: a token-level C++ policy sees `ADV_NS::ADV_PASTE(m, m)`; only the dispatcher
sees aten.mm at run time (hence strict only). (This docstring avoids the namespace spelled out, since
C++-looking strings are scanned too.)
"""
# category: 1
# task: linear_relu
# devices: cpu cuda
# expect[strict]: torch_fallback

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

#@KERNEL

GEMM_CPP = r"""
#define ADV_PASTE(a, b) a##b
#define ADV_NS at
torch::Tensor gemm_nt(torch::Tensor x, torch::Tensor w) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "gemm_nt: bad shapes");
  return ADV_NS::ADV_PASTE(m, m)(x, w.t());
}
"""

gemm = load_inline(name="adv_cxx_macro_mm", cpp_sources=GEMM_CPP, functions=["gemm_nt"],
                   extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.relu_bias(gemm.gemm_nt(x, self.fc.weight), self.fc.bias)
