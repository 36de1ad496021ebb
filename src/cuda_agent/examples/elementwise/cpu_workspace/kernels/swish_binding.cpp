// Torch side of the Swish op: checks the tensor, allocates the output, calls the plain C++ kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

void swish_launcher(const float* x, float* y, int64_t n);  // kernels/swish.cpp

static torch::Tensor swish_forward(const torch::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "swish_forward: x must be a CPU tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "swish_forward: x must be float32, got ",
              x.scalar_type());
  const torch::Tensor xc = x.contiguous();  // no copy when x is contiguous already
  torch::Tensor y = torch::empty(xc.sizes(), xc.options());
  swish_launcher(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.numel());
  return y;
}

static void register_swish(pybind11::module& m) {
  m.def("swish_forward", &swish_forward, "Swish / SiLU: x * sigmoid(x) (float32, CPU)",
        pybind11::arg("x"));
}

REGISTER_BINDING(swish, register_swish);
