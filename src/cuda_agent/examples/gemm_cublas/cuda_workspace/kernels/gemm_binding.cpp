// Torch side of the cuBLAS GEMM: checks, output allocation, call on the current CUDA stream.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <limits>

#include "../binding_registry.h"

// kernels/gemm.cu
int gemm_launcher(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream);
const char* gemm_status_string(int status);

static at::Tensor gemm_forward(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "gemm_forward: A and B must be CUDA tensors");
  TORCH_CHECK(a.device() == b.device(), "gemm_forward: A is on ", a.device(), ", B on ", b.device());
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
              "gemm_forward: A and B must be float32");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "gemm_forward: A and B must be 2-D matrices");
  TORCH_CHECK(a.size(1) == b.size(0), "gemm_forward: inner dimensions differ: A is ", a.sizes(),
              ", B is ", b.sizes());
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  TORCH_CHECK(m <= kIntMax && n <= kIntMax && k <= kIntMax, "gemm_forward: dimensions must fit in int");
  const c10::cuda::CUDAGuard guard(a.device());
  const at::Tensor ac = a.contiguous();
  const at::Tensor bc = b.contiguous();
  if (k == 0) return ac.new_zeros({m, n});  // an empty sum (cuBLAS wants ld >= 1)
  at::Tensor c = ac.new_empty({m, n});
  if (m == 0 || n == 0) return c;
  const int status = gemm_launcher(ac.const_data_ptr<float>(), bc.const_data_ptr<float>(),
                                   c.mutable_data_ptr<float>(), static_cast<int>(m),
                                   static_cast<int>(n), static_cast<int>(k),
                                   c10::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(status == 0, "gemm_forward: cuBLAS failed: ", gemm_status_string(status));
  return c;
}

static void register_gemm(pybind11::module& m) {
  m.def("gemm_forward", &gemm_forward, "C = A @ B for float32 matrices, through cublasSgemm",
        pybind11::arg("A"), pybind11::arg("B"));
}

REGISTER_BINDING(gemm, register_gemm);
