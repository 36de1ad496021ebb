// Swish / SiLU on the CPU: y = x / (1 + e^-x), one pass over memory, OpenMP threads x SIMD lanes.
// Plain C++ (no torch headers); swish_binding.cpp converts the tensors and calls swish_launcher.
#include <cstdint>
#include <cstring>

// The evaluator builds with -O3 but no -march flag, so plain code targets baseline x86-64 (SSE2,
// 4 floats per instruction). With GCC on x86-64, target_clones also compiles an x86-64-v3 version
// (AVX2 + FMA, 8 floats) of the marked function, and the loader picks it when the CPU has them.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define SWISH_CPU_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SWISH_CPU_CLONES
#endif

namespace {

// e^a in float for finite a with |a| < 1e9 (flushes to 0 below e^-87.3, to +inf above e^88.3).
// Branch-free, so that g++ -O3 vectorizes the loops that call it (std::exp does not vectorize
// without -ffast-math). a = n*ln2 + r with n = round(a/ln2) and |r| <= ln2/2; e^r is its degree-6
// Taylor polynomial (relative error < 3e-7), 2^n is written straight into the exponent bits.
inline float exp_approx(float a) {
  const float t = a * 1.44269504088896341f;                        // a / ln2
  const float n = (t + 12582912.0f) - 12582912.0f;                 // round to nearest (1.5 * 2^23)
  const float r = (a - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 = hi + lo
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t e = static_cast<int32_t>(n) + 127;  // biased exponent; integer clamps vectorize,
  e = e < 0 ? 0 : e;                          // float compares do not (-ftrapping-math)
  e = e > 255 ? 255 : e;                      // 0 -> 2^n taken as 0, 255 -> +inf
  const int32_t bits = e << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

SWISH_CPU_CLONES
void swish_chunk(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] / (1.0f + exp_approx(-x[i]));
  }
}

}  // namespace

// y[i] = x[i] * sigmoid(x[i]) for i < n. x and y are contiguous float32 arrays that do not overlap.
void swish_launcher(const float* x, float* y, int64_t n) {
  constexpr int64_t kChunk = 1 << 14;  // elements per OpenMP work item (64 KiB of input)
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk;
    const int64_t len = n - begin < kChunk ? n - begin : kChunk;
    swish_chunk(x + begin, y + begin, len);
  }
}
