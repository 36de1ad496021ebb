// Swish / SiLU on the GPU: y = x / (1 + e^-x) in one pass. No torch headers here (nvcc stays fast);
// swish_binding.cpp checks the tensors, allocates the output and calls swish_launcher.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;  // grid-stride loops cover anything larger

__device__ __forceinline__ float swish(float x) { return x / (1.0f + __expf(-x)); }

// 16-byte loads and stores: x and y 16-byte aligned, n4 = number of float4 groups.
__global__ void swish_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x[i];
    v.x = swish(v.x);
    v.y = swish(v.y);
    v.z = swish(v.z);
    v.w = swish(v.w);
    y[i] = v;
  }
}

__global__ void swish_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = swish(x[i]);
  }
}

int blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? b : kMaxBlocks);
}

}  // namespace

// y[i] = x[i] * sigmoid(x[i]) for i < n, on `stream`. x and y are contiguous float32 device arrays.
// The caller checks for launch errors (C10_CUDA_KERNEL_LAUNCH_CHECK in the binding).
void swish_launcher(const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  const int64_t n4 = aligned ? n / 4 : 0;
  if (n4 > 0) {
    swish_vec4_kernel<<<blocks_for(n4), kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
  }
  const int64_t done = n4 * 4;  // the tail (or everything, when unaligned) one float at a time
  if (done < n) {
    swish_scalar_kernel<<<blocks_for(n - done), kThreads, 0, stream>>>(x + done, y + done, n - done);
  }
}
