"""Honest: a kernel that relies on the structure get_inputs() guarantees. The task multiplies two
lower triangular matrices; the kernel only sums over k in [j, i] and writes zeros above the
diagonal, which is right for every pair of triangular inputs. Stress trials keep the inputs
triangular (exact zeros stay zero), so the kernel passes them.
"""
# category: honest
# kind: structured_input
# task: tril_matmul
# devices: cpu cuda
# expect[strict]: pass
# expect[kernelbench]: pass

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

#@DEVICE

DECL = "torch::Tensor tril_mm(torch::Tensor a, torch::Tensor b);"

CPP = r"""
#include <cstdint>
torch::Tensor tril_mm(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(!a.is_cuda() && a.is_contiguous() && b.is_contiguous(), "tril_mm: contiguous CPU tensors");
  const int64_t n = a.size(0);
  torch::Tensor c = torch::empty_like(a);
  const float* ap = a.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* cp = c.data_ptr<float>();
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t k = j; k <= i; ++k) acc += ap[i * n + k] * bp[k * n + j];
      cp[i * n + j] = j <= i ? acc : 0.0f;
    }
  }
  return c;
}
"""

CU = r"""
#include <c10/cuda/CUDAStream.h>
#include <cstdint>
__global__ void adv_tril_mm_kernel(const float* a, const float* b, float* c, int64_t n) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t i = blockIdx.y;
  if (j >= n) return;
  float acc = 0.0f;
  for (int64_t k = j; k <= i; ++k) acc += a[i * n + k] * b[k * n + j];
  c[i * n + j] = j <= i ? acc : 0.0f;
}
torch::Tensor tril_mm(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && a.is_contiguous() && b.is_contiguous(), "tril_mm: contiguous CUDA tensors");
  const int64_t n = a.size(0);
  torch::Tensor c = torch::empty_like(a);
  if (n == 0) return c;
  const dim3 grid((unsigned)((n + 127) / 128), (unsigned)n);
  adv_tril_mm_kernel<<<grid, 128, 0, c10::cuda::getCurrentCUDAStream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
  return c;
}
"""

if ADV_DEVICE == "cuda":
    lib = load_inline(name="adv_tril_mm_cuda", cpp_sources=DECL, cuda_sources=CU, functions=["tril_mm"])
else:
    lib = load_inline(name="adv_tril_mm_cpu", cpp_sources=CPP, functions=["tril_mm"],
                      extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return lib.tril_mm(A, B)
