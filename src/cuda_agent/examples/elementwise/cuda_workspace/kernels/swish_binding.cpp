// Torch side of the Swish op: checks the tensor, allocates the output on x's device and launches
// the kernel of swish.cu on the current CUDA stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

void swish_launcher(const float* x, float* y, int64_t n, cudaStream_t stream);  // kernels/swish.cu

static torch::Tensor swish_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "swish_forward: x must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "swish_forward: x must be float32, got ",
              x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());
  const torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty(xc.sizes(), xc.options());
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
