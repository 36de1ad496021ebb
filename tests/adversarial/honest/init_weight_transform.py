"""Honest: a weight transform precomputed outside forward: the Linear weight is kept transposed and
contiguous ([in, out], so the kernel's inner loop is unit-stride) in a non-persistent buffer;
forward is one kernel: y = relu(x @ W^T + b). The buffer is made in __init__ and made again by a
load_state_dict post-hook, so it follows whatever weights are loaded (the evaluator loads the
reference's re-drawn weights after __init__, as one loads a trained checkpoint); the buffer is not
in the state_dict, and the parameters are never touched.
"""
# category: honest
# kind: weight_transform
# task: linear_relu
# devices: cpu cuda
# expect[strict]: pass

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

#@DEVICE

LINEAR_CPP = r"""
#include <cstdint>

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w_t, torch::Tensor b) {
  TORCH_CHECK(!x.is_cuda() && !w_t.is_cuda() && !b.is_cuda(), "linear_relu: CPU tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w_t.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "linear_relu: float32 expected");
  TORCH_CHECK(x.is_contiguous() && w_t.is_contiguous() && b.is_contiguous(), "linear_relu: contiguous");
  TORCH_CHECK(x.dim() == 2 && w_t.dim() == 2 && x.size(1) == w_t.size(0) && b.numel() == w_t.size(1),
              "linear_relu: need x [M, K], w_t [K, N], b [N]");
  const int64_t M = x.size(0), K = x.size(1), N = w_t.size(1);
  torch::Tensor y = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = w_t.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    float* yr = yp + m * N;
    for (int64_t n = 0; n < N; ++n) yr[n] = bp[n];
    for (int64_t k = 0; k < K; ++k) {
      const float xv = xp[m * K + k];
      const float* wr = wp + k * N;
      for (int64_t n = 0; n < N; ++n) yr[n] += xv * wr[n];
    }
    for (int64_t n = 0; n < N; ++n) yr[n] = yr[n] > 0.0f ? yr[n] : 0.0f;
  }
  return y;
}
"""

LINEAR_DECL = "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w_t, torch::Tensor b);"

LINEAR_CU = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cstdint>

__global__ void adv_linear_relu_kernel(const float* __restrict__ x, const float* __restrict__ w_t,
                                       const float* __restrict__ b, float* __restrict__ y,
                                       int64_t K, int64_t N) {
  const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t m = blockIdx.y;
  if (n >= N) return;
  float acc = b[n];
  for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * w_t[k * N + n];
  y[m * N + n] = acc > 0.0f ? acc : 0.0f;
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w_t, torch::Tensor b) {
  TORCH_CHECK(x.is_cuda() && w_t.is_cuda() && b.is_cuda(), "linear_relu: CUDA tensors expected");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w_t.scalar_type() == torch::kFloat32 &&
              b.scalar_type() == torch::kFloat32, "linear_relu: float32 expected");
  TORCH_CHECK(x.is_contiguous() && w_t.is_contiguous() && b.is_contiguous(), "linear_relu: contiguous");
  TORCH_CHECK(x.dim() == 2 && w_t.dim() == 2 && x.size(1) == w_t.size(0) && b.numel() == w_t.size(1),
              "linear_relu: need x [M, K], w_t [K, N], b [N]");
  TORCH_CHECK(x.size(0) <= 65535, "linear_relu: at most 65535 rows");
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t M = x.size(0), K = x.size(1), N = w_t.size(1);
  torch::Tensor y = torch::empty({M, N}, x.options());
  if (M == 0 || N == 0) return y;
  const dim3 block(128);
  const dim3 grid((unsigned)((N + 127) / 128), (unsigned)M);
  adv_linear_relu_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w_t.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), K, N);
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "linear_relu: kernel launch failed: ", cudaGetErrorString(err));
  return y;
}
"""

if ADV_DEVICE == "cuda":
    lin = load_inline(name="adv_linear_relu_cuda", cpp_sources=LINEAR_DECL, cuda_sources=LINEAR_CU,
                      functions=["linear_relu"], extra_cflags=["-O2"], extra_cuda_cflags=["-O2"])
else:
    lin = load_inline(name="adv_linear_relu_cpu", cpp_sources=LINEAR_CPP, functions=["linear_relu"],
                      extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        # Done outside forward: the transposed weight, moved to the device with the module, and made
        # again whenever weights are loaded.
        self.register_buffer("weight_t", self.fc.weight.detach().t().contiguous(), persistent=False)
        self.register_load_state_dict_post_hook(ModelNew._transpose)

    @staticmethod
    def _transpose(module, incompatible_keys):
        with torch.no_grad():
            module.weight_t.copy_(module.fc.weight.t())

    def forward(self, x):
        return lin.linear_relu(x, self.weight_t, self.fc.bias)
