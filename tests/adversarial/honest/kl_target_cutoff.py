"""Honest: a KL divergence that drops the terms whose target is below 1e-8 (the usual guard for
0 * log 0), summed in the kernel. The inputs are rows of a softmax over 4096 entries, each near
1/4096, and they stay distributions in the stress trials (sharper or flatter, still summing to 1),
so no target comes near the cutoff. Stress trials that only raised the entries to the 4th power
made every target ~1e-17 and rejected this kernel.

From a Qwen kernel of the real-world corpus (level 1, problem 98) that KernelBench judged correct.
"""
# category: honest
# kind: structured_input
# task: kl_div
# devices: cpu cuda
# expect[strict]: pass
# expect[kernelbench]: pass

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

#@DEVICE

DECL = "torch::Tensor kl_batchmean(torch::Tensor p, torch::Tensor t);"

CPP = r"""
#include <cmath>
#include <cstdint>
torch::Tensor kl_batchmean(torch::Tensor p, torch::Tensor t) {
  TORCH_CHECK(!p.is_cuda() && p.is_contiguous() && t.is_contiguous(), "kl: contiguous CPU tensors");
  const int64_t n = p.numel();
  const float* pp = p.data_ptr<float>();
  const float* tp = t.data_ptr<float>();
  double acc = 0.0;
#pragma omp parallel for reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i)
    if (tp[i] > 1e-8f) acc += tp[i] * (std::log(tp[i]) - std::log(pp[i]));
  torch::Tensor out = torch::empty({}, p.options());
  *out.data_ptr<float>() = (float)(acc / p.size(0));
  return out;
}
"""

CU = r"""
#include <c10/cuda/CUDAStream.h>
#include <cstdint>
__global__ void adv_kl_zero(float* out) { *out = 0.0f; }
__global__ void adv_kl_kernel(const float* p, const float* t, float* out, int64_t n, float inv_batch) {
  __shared__ float part[256];
  float acc = 0.0f;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    if (t[i] > 1e-8f) acc += t[i] * (logf(t[i]) - logf(p[i]));
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0] * inv_batch);
}
torch::Tensor kl_batchmean(torch::Tensor p, torch::Tensor t) {
  TORCH_CHECK(p.is_cuda() && p.is_contiguous() && t.is_contiguous(), "kl: contiguous CUDA tensors");
  torch::Tensor out = torch::empty({}, p.options());
  const auto stream = c10::cuda::getCurrentCUDAStream();
  adv_kl_zero<<<1, 1, 0, stream>>>(out.data_ptr<float>());
  adv_kl_kernel<<<256, 256, 0, stream>>>(p.data_ptr<float>(), t.data_ptr<float>(), out.data_ptr<float>(),
                                         p.numel(), 1.0f / (float)p.size(0));
  return out;
}
"""

if ADV_DEVICE == "cuda":
    lib = load_inline(name="adv_kl_cutoff_cuda", cpp_sources=DECL, cuda_sources=CU, functions=["kl_batchmean"])
else:
    lib = load_inline(name="adv_kl_cutoff_cpu", cpp_sources=CPP, functions=["kl_batchmean"],
                      extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return lib.kl_batchmean(predictions, targets)
