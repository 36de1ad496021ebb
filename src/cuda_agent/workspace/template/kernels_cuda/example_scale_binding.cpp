// kernels/example_scale_binding.cpp -- the binding of the example kernel in example_scale.cu:
// checks the tensors, allocates the output, launches on the current stream, registers the op.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "binding_registry.h"

// Defined in example_scale.cu.
cudaError_t example_scale_launch(const float* x, float* y, float alpha, int64_t n, cudaStream_t stream);

torch::Tensor example_scale_forward(const torch::Tensor& x, double alpha) {
  TORCH_CHECK(x.is_cuda(), "example_scale_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "example_scale_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "example_scale_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
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
