# --- adversarial suite: kernel block (cuda) ------------------------------------------------------
# Replaces the line `#@KERNEL` of a case. An honest relu(x + bias) extension, the same text in every
# case (so torch's extension cache builds it once), bound to `ext`:
#   ext.relu_bias(x, bias) -> a new tensor;  ext.relu_bias_out(x, bias, out) -> out, written in place.
# One raw CUDA kernel on the current stream: no ATen compute.
from torch.utils.cpp_extension import load_inline as _adv_load_inline

ADV_DEVICE = "cuda"

_ADV_DECL = r"""
torch::Tensor relu_bias(torch::Tensor x, torch::Tensor bias);
torch::Tensor relu_bias_out(torch::Tensor x, torch::Tensor bias, torch::Tensor out);
"""

_ADV_CU = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

__global__ void adv_relu_bias_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                     float* __restrict__ y, int64_t n, int64_t cols) {
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const float v = x[i] + b[i % cols];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

torch::Tensor relu_bias_out(torch::Tensor x, torch::Tensor bias, torch::Tensor out) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda() && out.is_cuda(), "relu_bias: CUDA tensors expected");
  TORCH_CHECK(x.device() == bias.device() && x.device() == out.device(),
              "relu_bias: tensors on one device expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32 &&
              out.scalar_type() == torch::kFloat32, "relu_bias: float32 tensors expected");
  TORCH_CHECK(x.is_contiguous() && bias.is_contiguous() && out.is_contiguous(),
              "relu_bias: contiguous tensors expected");
  TORCH_CHECK(bias.dim() == 1 && x.dim() >= 1 && x.size(-1) == bias.size(0),
              "relu_bias: bias must match the last dimension of x");
  TORCH_CHECK(out.numel() == x.numel(), "relu_bias: out must have as many elements as x");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t n = x.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 4096);
  adv_relu_bias_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, bias.size(0));
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "relu_bias: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

torch::Tensor relu_bias(torch::Tensor x, torch::Tensor bias) {
  return relu_bias_out(x, bias, torch::empty_like(x));
}
"""

ext = _adv_load_inline(
    name="adv_relu_bias_cuda",
    cpp_sources=_ADV_DECL,
    cuda_sources=_ADV_CU,
    functions=["relu_bias", "relu_bias_out"],
    extra_cflags=["-O2"],
    extra_cuda_cflags=["-O2"],
)
# --- end of kernel block -------------------------------------------------------------------------
