// Torch side of the row softmax: checks, output allocation, call into the kernel.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>

#include "../binding_registry.h"

void softmax_launcher(const float* x, float* y, int64_t rows, int64_t cols);  // kernels/softmax.cpp

static at::Tensor softmax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "softmax_forward: x must be a CPU tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat, "softmax_forward: x must be float32, got ",
              x.scalar_type());
  TORCH_CHECK(x.dim() == 2, "softmax_forward: x must be 2-D [rows, cols], got ", x.dim(),
              " dimensions");
  const at::Tensor xc = x.contiguous();
  at::Tensor y = xc.new_empty(xc.sizes());
  if (xc.size(1) > 0) {
    softmax_launcher(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.size(0),
                     xc.size(1));
  }
  return y;
}

static void register_softmax(pybind11::module& m) {
  m.def("softmax_forward", &softmax_forward, "softmax over dim 1 of a 2-D float32 tensor (CPU)",
        pybind11::arg("x"));
}

REGISTER_BINDING(softmax, register_softmax);
