# --- adversarial suite: kernel block (cpu) -------------------------------------------------------
# Replaces the line `#@KERNEL` of a case. An honest relu(x + bias) extension, the same text in every
# case (so torch's extension cache builds it once), bound to `ext`:
#   ext.relu_bias(x, bias) -> a new tensor;  ext.relu_bias_out(x, bias, out) -> out, written in place.
# Raw OpenMP loops only: no ATen compute.
from torch.utils.cpp_extension import load_inline as _adv_load_inline

ADV_DEVICE = "cpu"

_ADV_CPP = r"""
#include <cstdint>

static void adv_relu_bias_loop(const float* x, const float* b, float* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = xr[c] + b[c];
      yr[c] = v > 0.0f ? v : 0.0f;
    }
  }
}

torch::Tensor relu_bias_out(torch::Tensor x, torch::Tensor bias, torch::Tensor out) {
  TORCH_CHECK(!x.is_cuda() && !bias.is_cuda() && !out.is_cuda(), "relu_bias: CPU tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32 &&
              out.scalar_type() == torch::kFloat32, "relu_bias: float32 tensors expected");
  TORCH_CHECK(x.is_contiguous() && bias.is_contiguous() && out.is_contiguous(),
              "relu_bias: contiguous tensors expected");
  TORCH_CHECK(bias.dim() == 1 && x.dim() >= 1 && x.size(-1) == bias.size(0),
              "relu_bias: bias must match the last dimension of x");
  TORCH_CHECK(out.numel() == x.numel(), "relu_bias: out must have as many elements as x");
  const int64_t cols = bias.size(0);
  const int64_t rows = cols > 0 ? x.numel() / cols : 0;
  adv_relu_bias_loop(x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
  return out;
}

torch::Tensor relu_bias(torch::Tensor x, torch::Tensor bias) {
  return relu_bias_out(x, bias, torch::empty_like(x));
}
"""

# (the bundled CPU examples' flags: one precompiled torch header serves both in a test run; the
# honest cases that use OpenMP take the same, and those that do not, `-O2` alone)
ext = _adv_load_inline(
    name="adv_relu_bias_cpu",
    cpp_sources=_ADV_CPP,
    functions=["relu_bias", "relu_bias_out"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)
# --- end of kernel block -------------------------------------------------------------------------
