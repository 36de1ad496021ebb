"""Honest precision trick: y = relu(x W^T + b) with FP16 internal math: x and W are converted to half
inside the kernel and multiplied in half (__hmul), the products accumulated in float. With K = 128
the error stays orders of magnitude below the 1e-2 tolerances, on the stress inputs too. DESIGN
allows reduced internal precision within the tolerance (it may be recorded as an info reason, never
a failure).
"""
# category: honest
# kind: fp16
# task: linear_relu
# devices: cuda
# expect[strict]: pass

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

FP16_DECL = "torch::Tensor linear_relu_fp16(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

FP16_CU = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_fp16.h>
#include <cstdint>

__global__ void adv_linear_relu_fp16_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                            const float* __restrict__ b, float* __restrict__ y,
                                            int64_t K, int64_t N) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t m = blockIdx.y;
  if (n >= N) return;
  float acc = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const __half p = __hmul(__float2half(x[m * K + k]), __float2half(w[n * K + k]));
    acc += __half2float(p);
  }
  acc += b[n];
  y[m * N + n] = acc > 0.0f ? acc : 0.0f;
}

torch::Tensor linear_relu_fp16(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "linear_relu_fp16: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "linear_relu_fp16: float32 expected");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "linear_relu_fp16: contiguous");
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && b.numel() == w.size(0),
              "linear_relu_fp16: need x [M, K], w [N, K], b [N]");
  TORCH_CHECK(x.size(0) <= 65535, "linear_relu_fp16: at most 65535 rows");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  torch::Tensor y = torch::empty({M, N}, x.options());
  if (M == 0 || N == 0) return y;
  const dim3 grid((unsigned)((N + 127) / 128), (unsigned)M);
  adv_linear_relu_fp16_kernel<<<grid, 128, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), K, N);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "linear_relu_fp16: kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

mixed = load_inline(name="adv_linear_relu_fp16_cuda", cpp_sources=FP16_DECL, cuda_sources=FP16_CU,
                    functions=["linear_relu_fp16"], extra_cflags=["-O2"], extra_cuda_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return mixed.linear_relu_fp16(x, self.fc.weight, self.fc.bias)
