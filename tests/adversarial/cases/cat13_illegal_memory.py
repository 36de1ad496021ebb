"""Fault: an illegal memory access on the GPU: the kernel writes 2^36 floats past its output.

Expected: illegal_memory_access (the CUDA context of the candidate's process is dead; the next
evaluation on the same GPU must be unaffected: see test_gpu_still_serves_after_faults).
"""
# category: 13
# fault: illegal_memory
# devices: cuda
# expect[strict]: illegal_memory_access

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

OOB_DECL = "torch::Tensor relu_bias_oob(torch::Tensor x, torch::Tensor bias);"

OOB_CU = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__global__ void adv_oob_kernel(float* y) {
  y[(int64_t)(threadIdx.x + 1) * (1LL << 36)] = 1.0f;  // far outside any allocation
}

torch::Tensor relu_bias_oob(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda(), "relu_bias_oob: CUDA tensor expected");
  const c10::cuda::CUDAGuard guard(x.device());
  torch::Tensor out = torch::empty_like(x);
  adv_oob_kernel<<<1, 32, 0, c10::cuda::getCurrentCUDAStream()>>>(out.data_ptr<float>());
  return out;
}
"""

oob = load_inline(name="adv_oob_write_cuda", cpp_sources=OOB_DECL, cuda_sources=OOB_CU,
                  functions=["relu_bias_oob"], extra_cflags=["-O2"], extra_cuda_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return oob.relu_bias_oob(x, self.bias)
