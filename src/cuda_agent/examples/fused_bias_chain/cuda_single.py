"""relu(x * 2 + bias) * 0.5 as one CUDA kernel (one block per NCHW plane), built with load_inline."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_DECL = "torch::Tensor bias_chain_forward(torch::Tensor x, torch::Tensor bias);"

CUDA_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;

__device__ __forceinline__ float chain(float v, float b) {
  return fmaxf(fmaf(v, 2.0f, b), 0.0f) * 0.5f;  // v * 2 is exact, so the fma rounds like eager
}

// One block per (n, c) plane (grid-stride beyond kMaxBlocks); kVec4 when hw % 4 == 0 and aligned.
template <bool kVec4>
__global__ void bias_chain_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                  float* __restrict__ y, int64_t planes, int64_t c, int64_t hw) {
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float b = __ldg(bias + p % c);
    const int64_t base = p * hw;
    if constexpr (kVec4) {
      const float4* xp = reinterpret_cast<const float4*>(x + base);
      float4* yp = reinterpret_cast<float4*>(y + base);
      for (int64_t i = threadIdx.x; i < hw / 4; i += blockDim.x) {
        float4 v = xp[i];
        v.x = chain(v.x, b);
        v.y = chain(v.y, b);
        v.z = chain(v.z, b);
        v.w = chain(v.w, b);
        yp[i] = v;
      }
    } else {
      for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) {
        y[base + i] = chain(x[base + i], b);
      }
    }
  }
}

}  // namespace

torch::Tensor bias_chain_forward(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda() && x.device() == bias.device(),
              "bias_chain_forward: x and bias must be CUDA tensors on one device");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
              "bias_chain_forward: x and bias must be float32");
  TORCH_CHECK(x.dim() == 4, "bias_chain_forward: x must be NCHW");
  TORCH_CHECK(bias.numel() == x.size(1), "bias_chain_forward: one bias per channel is needed");
  const c10::cuda::CUDAGuard guard(x.device());
  x = x.contiguous();
  bias = bias.contiguous();
  torch::Tensor y = torch::empty(x.sizes(), x.options());
  const int64_t planes = x.size(0) * x.size(1);
  const int64_t hw = x.size(2) * x.size(3);
  if (planes == 0 || hw == 0) return y;
  const float* xp = x.const_data_ptr<float>();
  float* yp = y.mutable_data_ptr<float>();
  const bool vec4 = hw % 4 == 0 &&
                    ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
  const int64_t per_plane = vec4 ? hw / 4 : hw;
  int64_t threads = (per_plane + 31) / 32 * 32;  // whole warps, enough for one plane, at most 256
  threads = threads < kMaxThreads ? threads : kMaxThreads;
  const int blocks = static_cast<int>(planes < kMaxBlocks ? planes : kMaxBlocks);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (vec4) {
    bias_chain_kernel<true><<<blocks, static_cast<int>(threads), 0, stream>>>(
        xp, bias.const_data_ptr<float>(), yp, planes, x.size(1), hw);
  } else {
    bias_chain_kernel<false><<<blocks, static_cast<int>(threads), 0, stream>>>(
        xp, bias.const_data_ptr<float>(), yp, planes, x.size(1), hw);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

_ext = load_inline(
    name="cuda_agent_ex_bias_chain_cuda",
    cpp_sources=CPP_DECL,
    cuda_sources=CUDA_SOURCE,
    functions=["bias_chain_forward"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bias = nn.Parameter(torch.empty(channels, 1, 1))  # filled from Model's state_dict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.bias_chain_forward(x, self.bias)
