// kernels/example_scale_binding.cpp -- the binding of the example kernel in example_scale.cu:
// checks the tensors, allocates the output, launches on the current stream, registers the op.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "binding_registry.h"

// Defined in example_scale.cu.
cudaError_t example_scale_launch(const float* x, float* y, float alpha, int64_t n, cudaStream_t stream);

at::Tensor example_scale_forward(const at::Tensor& x, double alpha) {
  TORCH_CHECK(x.is_cuda(), "example_scale_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "example_scale_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "example_scale_forward: x must be contiguous");
  at::Tensor y = x.new_empty(x.sizes());
  cudaError_t err = example_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(alpha),
                                         x.numel(), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "example_scale_forward: launch failed: ", cudaGetErrorString(err));
  return y;
}

static void register_example_scale(pybind11::module& m) {
  m.def("example_scale_forward", &example_scale_forward, "y = x * alpha (example op)",
        pybind11::arg("x"), pybind11::arg("alpha"));
}

REGISTER_BINDING(example_scale, register_example_scale);
