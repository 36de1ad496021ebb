"""Swish / SiLU as one fused CPU pass: y = x / (1 + e^-x), built with load_inline (OpenMP + SIMD)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <cstdint>
#include <cstring>

namespace {

// e^a in float for finite a with |a| < 1e9 (flushes to 0 below e^-87.3, to +inf above e^88.3).
// Branch-free so that g++ -O3 vectorizes the loop calling it (std::exp does not vectorize without
// -ffast-math): a = n*ln2 + r, |r| <= ln2/2, e^r by its degree-6 Taylor polynomial (relative
// error < 3e-7), 2^n written straight into the exponent bits.
inline float exp_approx(float a) {
  const float t = a * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (a - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t e = static_cast<int32_t>(n) + 127;  // integer clamps vectorize, float compares do not
  e = e < 0 ? 0 : e;
  e = e > 255 ? 255 : e;
  const int32_t bits = e << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

void swish_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] / (1.0f + exp_approx(-x[i]));
  }
}

}  // namespace

torch::Tensor swish_forward(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "swish_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "swish_forward: x must be float32");
  x = x.contiguous();
  torch::Tensor y = torch::empty(x.sizes(), x.options());
  swish_kernel(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel());
  return y;
}
"""

_ext = load_inline(
    name="cuda_agent_ex_swish_cpu",
    cpp_sources=CPP_SOURCE,
    functions=["swish_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.swish_forward(x)
