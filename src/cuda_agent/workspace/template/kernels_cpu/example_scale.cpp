// kernels/example_scale.cpp -- example kernel written by `cuda-agent init-workspace`: y = x * alpha.
// It shows the pattern; replace it with your own kernels (or delete it and its binding).
// Kernel files hold plain C++ (OpenMP allowed) behind a launcher; tensors are handled in the
// *_binding.cpp file.
#include <cstdint>

// The launcher: plain pointers and sizes in; all work is finished when it returns.
void example_scale_launch(const float* x, float* y, float alpha, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] * alpha;
  }
}
