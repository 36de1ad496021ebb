// Torch side of the fused bias chain: checks, output allocation on x's device, launch on the
// current CUDA stream, launch-error check.
#include <ATen/core/Tensor.h>  // not torch/types.h: half the compile time
#include <torch/csrc/utils/pybind.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include "../binding_registry.h"

void bias_chain_launcher(const float* x, const float* bias, float* y, int64_t n, int64_t c,
                         int64_t hw, cudaStream_t stream);  // kernels/bias_chain.cu

static at::Tensor bias_chain_forward(const at::Tensor& x, const at::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "bias_chain_forward: x and bias must be CUDA tensors");
  TORCH_CHECK(x.device() == bias.device(), "bias_chain_forward: x is on ", x.device(),
              ", bias on ", bias.device());
  TORCH_CHECK(x.scalar_type() == at::kFloat && bias.scalar_type() == at::kFloat,
              "bias_chain_forward: x and bias must be float32");
  TORCH_CHECK(x.dim() == 4, "bias_chain_forward: x must be NCHW, got ", x.dim(), " dimensions");
  TORCH_CHECK(bias.numel() == x.size(1), "bias_chain_forward: bias has ", bias.numel(),
              " elements, x has ", x.size(1), " channels");
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  const at::Tensor bc = bias.contiguous();
  at::Tensor y = xc.new_empty(xc.sizes());
  bias_chain_launcher(xc.const_data_ptr<float>(), bc.const_data_ptr<float>(),
                      y.mutable_data_ptr<float>(), xc.size(0), xc.size(1), xc.size(2) * xc.size(3),
                      c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

static void register_bias_chain(pybind11::module& m) {
  m.def("bias_chain_forward", &bias_chain_forward,
        "relu(x * 2 + bias) * 0.5 with a per-channel bias (float32 NCHW, CUDA)",
        pybind11::arg("x"), pybind11::arg("bias"));
}

REGISTER_BINDING(bias_chain, register_bias_chain);
