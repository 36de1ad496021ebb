// Torch side of the Swish op: checks the tensor, allocates the output, calls the plain C++ kernel.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

void swish_launcher(const float* x, float* y, int64_t n);  // kernels/swish.cpp

static at::Tensor swish_forward(const at::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "swish_forward: x must be a CPU tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat, "swish_forward: x must be float32, got ",
              x.scalar_type());
  const at::Tensor xc = x.contiguous();  // no copy when x is contiguous already
  at::Tensor y = xc.new_empty(xc.sizes());
  swish_launcher(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel());
  return y;
}

static void register_swish(pybind11::module& m) {
  m.def("swish_forward", &swish_forward, "Swish / SiLU: x * sigmoid(x) (float32, CPU)",
        pybind11::arg("x"));
}

REGISTER_BINDING(swish, register_swish);
