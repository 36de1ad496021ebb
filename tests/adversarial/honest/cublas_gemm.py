"""Honest: a GEMM through cublasSgemm called directly from C++ on PyTorch's cuBLAS handle (and the
current stream), linked with -lcublas: DESIGN allows cuBLAS for GEMMs when called directly. FP32 math
(the handle's default math mode: no TF32).
"""
# category: honest
# kind: cublas
# task: gemm
# devices: cuda
# expect[strict]: pass

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

GEMM_DECL = "torch::Tensor gemm(torch::Tensor A, torch::Tensor B);"

# Row-major C = A B is column-major C^T = B^T A^T: swap the operands and the m / n extents.
GEMM_CU = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cublas_v2.h>

torch::Tensor gemm(torch::Tensor A, torch::Tensor B) {
  TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.device() == B.device(), "gemm: CUDA tensors on one device");
  TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "gemm: float32");
  TORCH_CHECK(A.is_contiguous() && B.is_contiguous(), "gemm: contiguous inputs expected");
  TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "gemm: need A [M, K], B [K, N]");
  const int m = (int)A.size(0), k = (int)A.size(1), n = (int)B.size(1);
  const c10::cuda::CUDAGuard guard(A.device());
  torch::Tensor C = torch::empty({A.size(0), B.size(1)}, A.options());
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  TORCH_CHECK(cublasSetStream(handle, c10::cuda::getCurrentCUDAStream().stream()) == CUBLAS_STATUS_SUCCESS,
              "gemm: cublasSetStream failed");
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
                                        B.data_ptr<float>(), n, A.data_ptr<float>(), k, &beta,
                                        C.data_ptr<float>(), n);
  TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "gemm: cublasSgemm failed with status ", (int)st);
  return C;
}
"""

blas = load_inline(name="adv_cublas_gemm_cuda", cpp_sources=GEMM_DECL, cuda_sources=GEMM_CU,
                   functions=["gemm"], extra_cflags=["-O2"], extra_cuda_cflags=["-O2"],
                   extra_ldflags=["-lcublas"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return blas.gemm(A, B)
