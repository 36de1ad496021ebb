"""A small dump in the AI CUDA Engineer archive's shape (its columns, its functional form and its
CUDA extensions exporting forward()), written here, to run `bench --solutions` over it on a GPU:
an honest ReLU (level 1 problem 19), an honest fused GEMM (level 2 problem 12) whose parameters
are named otherwise than the task's, and a ReLU that skips half the tensor but claims correct.

    python make_ai_cuda_engineer_sample.py KERNELBENCH_DIR OUT.parquet
"""
import sys
from pathlib import Path

from cuda_agent.parquet import write_rows

RELU_FN = '''import torch
import torch.nn as nn


def module_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, fn=module_fn):
        return fn(x)


batch_size = 4096
dim = 393216


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
'''

RELU_CU = r'''#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float4* __restrict__ x, float4* __restrict__ y, long n4, long LIMIT) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n4 && i < LIMIT; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}

torch::Tensor forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32 && x.numel() % 4 == 0);
    auto y = torch::empty_like(x);
    long n4 = x.numel() / 4;
    relu_kernel<<<132 * 16, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4, LIMIT_EXPR);
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &forward, "ReLU (CUDA)");
}
'''

GEMM_FN = '''import torch
import torch.nn as nn
import torch.nn.functional as F


def module_fn(x, weight, bias, multiplier: float, negative_slope: float):
    x = F.linear(x, weight, bias)
    x = x * multiplier
    return F.leaky_relu(x, negative_slope)


class Model(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super(Model, self).__init__()
        gemm = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(gemm.weight.clone())
        self.bias = nn.Parameter(gemm.bias.clone())
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x, fn=module_fn):
        return fn(x, self.weight, self.bias, self.multiplier, self.negative_slope)


batch_size = 1024
in_features  = 8192
out_features = 8192
multiplier = 2.0
negative_slope = 0.1


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, multiplier, negative_slope]
'''

GEMM_CU = r'''#include <torch/extension.h>
#include <cuda_runtime.h>
#include <ATen/cuda/CUDAContext.h>

#define TILE 32

// y[m, n] = leaky_relu((sum_k x[m, k] * w[n, k] + b[n]) * mult): x @ w.T in shared-memory tiles
__global__ void gemm_mul_leaky(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y, int M, int N, int K, float mult, float slope) {
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ws[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y;  // m
    int col = blockIdx.x * TILE + threadIdx.x;  // n
    float acc = 0.f;
    for (int t = 0; t < K; t += TILE) {
        int kx = t + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? x[(long)row * K + kx] : 0.f;
        int wn = blockIdx.x * TILE + threadIdx.y;
        ws[threadIdx.y][threadIdx.x] = (wn < N && kx < K) ? w[(long)wn * K + kx] : 0.f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = (acc + b[col]) * mult;
        y[(long)row * N + col] = v > 0.f ? v : v * slope;
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double multiplier, double negative_slope) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && weight.is_contiguous());
    int M = x.size(0), K = x.size(1), N = weight.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_mul_leaky<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
        M, N, K, (float)multiplier, (float)negative_slope);
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &forward, "Gemm * multiplier, LeakyReLU (CUDA)");
}
'''


def main(kb: Path, out: Path) -> None:
    relu = (kb / "level1" / "19_ReLU.py").read_text()
    gemm = (kb / "level2" / "12_Gemm_Multiply_LeakyReLU.py").read_text()
    common = {"CUDA_Runtime": None, "PyTorch_Native_Runtime": None, "PyTorch_Compile_Runtime": None,
              "Max_Diff": 0.0, "Error": None, "NCU_Profile": None, "Torch_Profile": None, "Clang_Tidy": None}
    rows = [
        {"Op_Name": "19_ReLU", "Level_ID": 1, "Task_ID": 19, "Kernel_Name": "19_relu_float4_base",
         "CUDA_Code": RELU_CU.replace("LIMIT_EXPR", "n4"), "PyTorch_Code_Module": relu,
         "PyTorch_Code_Functional": RELU_FN, "Correct": True, "CUDA_Speedup_Native": 1.02,
         "CUDA_Speedup_Compile": 1.01, **common},
        {"Op_Name": "19_ReLU", "Level_ID": 1, "Task_ID": 19, "Kernel_Name": "19_relu_half_done",
         "CUDA_Code": RELU_CU.replace("LIMIT_EXPR", "n4 / 2"), "PyTorch_Code_Module": relu,
         "PyTorch_Code_Functional": RELU_FN, "Correct": True, "CUDA_Speedup_Native": 2.0,
         "CUDA_Speedup_Compile": 2.0, **common},
        {"Op_Name": "12_Gemm_Multiply_LeakyReLU", "Level_ID": 2, "Task_ID": 12,
         "Kernel_Name": "12_gemm_tiled_fused_base", "CUDA_Code": GEMM_CU, "PyTorch_Code_Module": gemm,
         "PyTorch_Code_Functional": GEMM_FN, "Correct": True, "CUDA_Speedup_Native": 0.3,
         "CUDA_Speedup_Compile": 0.3, **common},
    ]
    write_rows(out, rows)
    print(f"{out}: {len(rows)} rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
