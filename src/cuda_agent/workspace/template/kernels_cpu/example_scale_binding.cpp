// kernels/example_scale_binding.cpp -- the binding of the example kernel in example_scale.cpp:
// checks the tensors, allocates the output, calls the launcher, registers the op.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>

#include "binding_registry.h"

// Defined in example_scale.cpp.
void example_scale_launch(const float* x, float* y, float alpha, int64_t n);

at::Tensor example_scale_forward(const at::Tensor& x, double alpha) {
  TORCH_CHECK(x.device().is_cpu(), "example_scale_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "example_scale_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "example_scale_forward: x must be contiguous");
  at::Tensor y = x.new_empty(x.sizes());
  example_scale_launch(x.data_ptr<float>(), y.data_ptr<float>(), static_cast<float>(alpha), x.numel());
  return y;
}

static void register_example_scale(pybind11::module& m) {
  m.def("example_scale_forward", &example_scale_forward, "y = x * alpha (example op)",
        pybind11::arg("x"), pybind11::arg("alpha"));
}

REGISTER_BINDING(example_scale, register_example_scale);
