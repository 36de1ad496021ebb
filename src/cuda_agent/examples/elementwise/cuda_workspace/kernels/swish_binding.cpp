// Torch side of the Swish op: checks the tensor, allocates the output on x's device and launches
// the kernel of swish.cu on the current CUDA stream.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

void swish_launcher(const float* x, float* y, int64_t n, cudaStream_t stream);  // kernels/swish.cu

static at::Tensor swish_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "swish_forward: x must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat, "swish_forward: x must be float32, got ",
              x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  at::Tensor y = xc.new_empty(xc.sizes());
  swish_launcher(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel(),
                 c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

static void register_swish(pybind11::module& m) {
  m.def("swish_forward", &swish_forward, "Swish / SiLU: x * sigmoid(x) (float32, CUDA)",
        pybind11::arg("x"));
}

REGISTER_BINDING(swish, register_swish);
