"""Honest solution for KernelBench level1/88_MinGPTNewGelu: the tanh-GELU chain fused in one pass
(eager launches about eight kernels and round-trips memory each time)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float new_gelu(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    float inner = k * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
}

__global__ void gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = new_gelu(v.x); v.y = new_gelu(v.y); v.z = new_gelu(v.z); v.w = new_gelu(v.w);
        y[i] = v;
    }
}

__global__ void gelu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = new_gelu(x[i]);
}

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long n = xc.numel(), n4 = n / 4, done = 0;
    auto stream = c10::cuda::getCurrentCUDAStream().stream();
    bool aligned = (reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) % 16 == 0) &&
                   (reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0);
    if (aligned && n4 > 0) {
        long blocks = std::min<long>((n4 + 255) / 256, 132L * 32);
        gelu_vec4<<<blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(xc.data_ptr<float>()),
                                              reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        done = n4 * 4;
    }
    if (done < n) {
        long rest = n - done;
        gelu_tail<<<(rest + 255) / 256, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

ext = load_inline(
    name="kb_l1_88_new_gelu",
    cpp_sources="torch::Tensor gelu_forward(torch::Tensor x);",
    cuda_sources=CUDA_SRC,
    functions=["gelu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.gelu_forward(x)
