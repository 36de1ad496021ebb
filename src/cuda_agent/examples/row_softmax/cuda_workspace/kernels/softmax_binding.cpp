// Torch side of the row softmax: checks, output allocation on x's device, launch on the current
// CUDA stream, launch-error check.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <limits>

#include "../binding_registry.h"

void softmax_launcher(const float* x, float* y, int64_t rows, int64_t cols,
                      cudaStream_t stream);  // kernels/softmax.cu

static at::Tensor softmax_forward(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat, "softmax_forward: x must be float32, got ",
              x.scalar_type());
  TORCH_CHECK(x.dim() == 2, "softmax_forward: x must be 2-D [rows, cols], got ", x.dim(),
              " dimensions");
  TORCH_CHECK(x.size(0) <= std::numeric_limits<int32_t>::max(),
              "softmax_forward: at most 2^31 - 1 rows (one block each), got ", x.size(0));
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  at::Tensor y = xc.new_empty(xc.sizes());
  if (xc.numel() == 0) return y;
  softmax_launcher(xc.const_data_ptr<float>(), y.mutable_data_ptr<float>(), xc.size(0), xc.size(1),
                   c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

static void register_softmax(pybind11::module& m) {
  m.def("softmax_forward", &softmax_forward, "softmax over dim 1 of a 2-D float32 tensor (CUDA)",
        pybind11::arg("x"));
}

REGISTER_BINDING(softmax, register_softmax);
