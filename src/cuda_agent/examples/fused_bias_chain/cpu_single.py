"""relu(x * 2 + bias) * 0.5 fused into one CPU pass over x, built with load_inline (OpenMP + SIMD)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <cmath>
#include <cstdint>

namespace {

// x, y: contiguous float32 [n, c, hw]; bias: float32 [c].
void bias_chain_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                       float* __restrict__ y, int64_t n, int64_t c, int64_t hw) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < n * c; ++p) {
    const float b = bias[p % c];
    const float* xp = x + p * hw;
    float* yp = y + p * hw;
#pragma omp simd
    for (int64_t i = 0; i < hw; ++i) {
      const float v = xp[i] * 2.0f + b;
      yp[i] = (v + std::fabs(v)) * 0.25f;  // == relu(v) * 0.5 exactly, and branch-free (vectorizes)
    }
  }
}

}  // namespace

torch::Tensor bias_chain_forward(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.device().is_cpu() && bias.device().is_cpu(), "bias_chain_forward: CPU tensors only");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
              "bias_chain_forward: x and bias must be float32");
  TORCH_CHECK(x.dim() == 4, "bias_chain_forward: x must be NCHW");
  TORCH_CHECK(bias.numel() == x.size(1), "bias_chain_forward: one bias per channel is needed");
  x = x.contiguous();
  bias = bias.contiguous();
  torch::Tensor y = torch::empty(x.sizes(), x.options());
  bias_chain_kernel(x.const_data_ptr<float>(), bias.const_data_ptr<float>(), y.mutable_data_ptr<float>(),
                    x.size(0), x.size(1), x.size(2) * x.size(3));
  return y;
}
"""

_ext = load_inline(
    name="cuda_agent_ex_bias_chain_cpu",
    cpp_sources=CPP_SOURCE,
    functions=["bias_chain_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(channels, 1, 1))  # filled from Model's state_dict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.bias_chain_forward(x, self.bias)
