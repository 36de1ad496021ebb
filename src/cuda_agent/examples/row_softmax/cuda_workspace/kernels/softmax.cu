// Row softmax on the GPU, numerically stable, one block per row:
//   pass 1: each thread keeps a running (max m, sum s of e^(x - m)) over its strided elements; the
//           pairs are merged across the warp with shuffles, then across warps through shared memory;
//   pass 2: y = e^(x - m) / s, the row being re-read from L1/L2.
// float4 loads and stores when the row length allows. No torch headers here.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace {

constexpr int kThreads = 256;  // per block (= per row); a multiple of 32
constexpr int kWarps = kThreads / 32;

// Merge the pair (m2, s2) into (m, s): the smaller maximum's sum is rescaled to the larger one.
// Pairs of empty ranges have m = -inf, s = 0 and merge to themselves.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
  m = mx;
}

__device__ __forceinline__ void add4(float& m, float& s, float4 v) {
  const float mx = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
  if (mx == -INFINITY) return;
  s = s * __expf(m - mx) + ((__expf(v.x - mx) + __expf(v.y - mx)) + (__expf(v.z - mx) + __expf(v.w - mx)));
  m = mx;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    merge(m, s, m2, s2);
  }
}

// kVec4: cols % 4 == 0 and x, y 16-byte aligned. Launched with kThreads threads, one block per row.
template <bool kVec4>
__global__ void __launch_bounds__(kThreads) softmax_kernel(const float* __restrict__ x,
                                                          float* __restrict__ y, int64_t cols) {
  __shared__ float warp_m[kWarps];
  __shared__ float warp_s[kWarps];
  __shared__ float row_m;
  __shared__ float row_inv;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * cols;

  // Pass 1: per-thread running max and sum.
  float m = -INFINITY;
  float s = 0.0f;
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    for (int64_t i = tid; i < cols / 4; i += kThreads) add4(m, s, x4[i]);
  } else {
    for (int64_t i = tid; i < cols; i += kThreads) merge(m, s, xr[i], 1.0f);
  }

  // Block-wide merge: within each warp, then warp 0 merges the warps' results.
  warp_merge(m, s);
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < kWarps ? warp_m[lane] : -INFINITY;
    s = lane < kWarps ? warp_s[lane] : 0.0f;
    warp_merge(m, s);
    if (lane == 0) {
      row_m = m;
      row_inv = 1.0f / s;  // s >= 1: the maximum contributes e^0
    }
  }
  __syncthreads();
  m = row_m;
  const float inv = row_inv;

  // Pass 2: normalised exponentials.
  if constexpr (kVec4) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float4* y4 = reinterpret_cast<float4*>(yr);
    for (int64_t i = tid; i < cols / 4; i += kThreads) {
      float4 v = x4[i];
      v.x = __expf(v.x - m) * inv;
      v.y = __expf(v.y - m) * inv;
      v.z = __expf(v.z - m) * inv;
      v.w = __expf(v.w - m) * inv;
      y4[i] = v;
    }
  } else {
    for (int64_t i = tid; i < cols; i += kThreads) yr[i] = __expf(xr[i] - m) * inv;
  }
}

}  // namespace

// x, y: contiguous float32 device arrays [rows, cols]; softmax along each row, on `stream`.
// Needs 0 < rows <= 2^31 - 1 (one block per row; the binding checks). The caller checks launch errors.
void softmax_launcher(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool vec4 = cols % 4 == 0 &&
                    ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
  const dim3 grid(static_cast<unsigned int>(rows));
  if (vec4) {
    softmax_kernel<true><<<grid, kThreads, 0, stream>>>(x, y, cols);
  } else {
    softmax_kernel<false><<<grid, kThreads, 0, stream>>>(x, y, cols);
  }
}
