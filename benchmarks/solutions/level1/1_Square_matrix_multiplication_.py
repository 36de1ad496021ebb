"""Honest solution for KernelBench level1/1_Square_matrix_multiplication_: cuBLAS called directly,
with TF32 tensor-core math (a precision trick the rules allow within the tolerance)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
#include <cublas_v2.h>

static cublasHandle_t handle() {
    static cublasHandle_t h = [] {
        cublasHandle_t x;
        TORCH_CHECK(cublasCreate(&x) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
        TORCH_CHECK(cublasSetMathMode(x, CUBLAS_TF32_TENSOR_OP_MATH) == CUBLAS_STATUS_SUCCESS,
                    "cublasSetMathMode failed");
        return x;
    }();
    return h;
}

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.scalar_type() == torch::kFloat32 &&
                B.scalar_type() == torch::kFloat32 && A.dim() == 2 && B.dim() == 2 &&
                A.size(1) == B.size(0), "A (M,K) and B (K,N) must be float32 CUDA matrices");
    auto a = A.contiguous(), b = B.contiguous();
    long M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = torch::empty({M, N}, a.options());
    cublasHandle_t h = handle();
    TORCH_CHECK(cublasSetStream(h, c10::cuda::getCurrentCUDAStream().stream()) == CUBLAS_STATUS_SUCCESS);
    const float one = 1.f, zero = 0.f;
    // Row-major C = A B is column-major C^T = B^T A^T.
    auto st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one,
                          b.data_ptr<float>(), (int)N, a.data_ptr<float>(), (int)K, &zero,
                          c.data_ptr<float>(), (int)N);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed: ", (int)st);
    return c;
}
"""

ext = load_inline(
    name="kb_l1_1_matmul_cublas",
    cpp_sources="torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);",
    cuda_sources=CUDA_SRC,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return ext.matmul_forward(A, B)
