"""Honest solution for KernelBench level1/23_Softmax: one block per row, two passes over the row
(an online max/sum pass, then a normalising write), float4 loads, warp-shuffle reductions."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int THREADS = 1024;

__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    // merge two (max, sum of exp(x - max)) pairs
    float mn = fmaxf(m, m2);
    s = (m == -INFINITY ? 0.f : s * __expf(m - mn)) + (m2 == -INFINITY ? 0.f : s2 * __expf(m2 - mn));
    m = mn;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, long cols) {
    const float* row = x + blockIdx.x * cols;
    float* out = y + blockIdx.x * cols;
    float m = -INFINITY, s = 0.f;
    bool vec = (cols % 4 == 0) && (reinterpret_cast<uintptr_t>(row) % 16 == 0);
    if (vec) {
        const float4* r4 = reinterpret_cast<const float4*>(row);
        for (long i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = r4[i];
            float lm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
            float ls = __expf(v.x - lm) + __expf(v.y - lm) + __expf(v.z - lm) + __expf(v.w - lm);
            combine(m, s, lm, ls);
        }
    } else {
        for (long i = threadIdx.x; i < cols; i += THREADS) combine(m, s, row[i], 1.f);
    }
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, off);
        float s2 = __shfl_xor_sync(0xffffffff, s, off);
        combine(m, s, m2, s2);
    }
    __shared__ float sm[32], ss[32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < THREADS / 32 ? sm[lane] : -INFINITY;
        s = lane < THREADS / 32 ? ss[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffff, m, off);
            float s2 = __shfl_xor_sync(0xffffffff, s, off);
            combine(m, s, m2, s2);
        }
        if (lane == 0) { sm[0] = m; ss[0] = s; }
    }
    __syncthreads();
    float rmax = sm[0], rinv = 1.f / ss[0];
    if (vec) {
        const float4* r4 = reinterpret_cast<const float4*>(row);
        float4* o4 = reinterpret_cast<float4*>(out);
        for (long i = threadIdx.x; i < cols / 4; i += THREADS) {
            float4 v = r4[i];
            v.x = __expf(v.x - rmax) * rinv; v.y = __expf(v.y - rmax) * rinv;
            v.z = __expf(v.z - rmax) * rinv; v.w = __expf(v.w - rmax) * rinv;
            o4[i] = v;
        }
    } else {
        for (long i = threadIdx.x; i < cols; i += THREADS) out[i] = __expf(row[i] - rmax) * rinv;
    }
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2,
                "x must be a 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    long rows = xc.size(0), cols = xc.size(1);
    if (rows == 0 || cols == 0) return y;
    softmax_rows<<<rows, THREADS, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(
    name="kb_l1_23_softmax",
    cpp_sources="torch::Tensor softmax_forward(torch::Tensor x);",
    cuda_sources=CUDA_SRC,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_forward(x)
