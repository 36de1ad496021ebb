// kernels/example_scale.cu -- example kernel written by `cuda-agent init-workspace`: y = x * alpha.
// It shows the pattern; replace it with your own kernels (or delete it and its binding).
// Kernel files hold raw CUDA and a plain C++ launcher; tensors are handled in the *_binding.cpp file.
#include <cstdint>

#include <cuda_runtime.h>

__global__ void example_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float alpha,
                                     int64_t n) {
  // Grid-stride loop: correct for any n and any grid size.
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = x[i] * alpha;
  }
}

// The launcher: plain pointers and sizes in, launched on the caller's stream, error code out.
cudaError_t example_scale_launch(const float* x, float* y, float alpha, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t wanted = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
  example_scale_kernel<<<blocks, threads, 0, stream>>>(x, y, alpha, n);
  return cudaGetLastError();
}
