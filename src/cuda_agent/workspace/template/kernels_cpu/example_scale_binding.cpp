// kernels/example_scale_binding.cpp -- the binding of the example kernel in example_scale.cpp:
// checks the tensors, allocates the output, calls the launcher, registers the op.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "binding_registry.h"

// Defined in example_scale.cpp.
void example_scale_launch(const float* x, float* y, float alpha, int64_t n);

torch::Tensor example_scale_forward(const torch::Tensor& x, double alpha) {
  TORCH_CHECK(x.device().is_cpu(), "example_scale_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "example_scale_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "example_scale_forward: x must be contiguous");
  torch::Tensor y = torch::empty_like(x);
  example_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(alpha), x.numel());
  return y;
}

static void register_example_scale(pybind11::module& m) {
  m.def("example_scale_forward", &example_scale_forward, "y = x * alpha (example op)",
        pybind11::arg("x"), pybind11::arg("alpha"));
}

REGISTER_BINDING(example_scale, register_example_scale);
