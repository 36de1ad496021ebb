// C = A @ B in float32 through cuBLAS (cublasSgemm), called directly. No torch headers here.
//
// cuBLAS is column-major. A row-major [m, k] matrix is, byte for byte, its transpose stored
// column-major with leading dimension k. So for row-major A [m, k], B [k, n], C [m, n]:
//   C = A B   <=>   C^T = B^T A^T,
// and C^T (column-major [n, m], ld n) is exactly the row-major C we want. The call is therefore
// sgemm(N, N, rows = n, cols = m, inner = k, B with ld n, A with ld k, C with ld n): no copies.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <mutex>

namespace {

constexpr int kMaxDevices = 64;

std::mutex handle_mutex;
cublasHandle_t handles[kMaxDevices] = {};  // one per device, created on first use and kept for the
                                           // life of the process (destroying handles at exit can
                                           // run after the CUDA context is gone)

}  // namespace

// Row-major c[m, n] = a[m, k] @ b[k, n] on `stream` (float32, contiguous, device memory); m, n,
// k > 0. Returns a cublasStatus_t as int (0 = CUBLAS_STATUS_SUCCESS); a CUDA error from
// cudaGetDevice is reported as CUBLAS_STATUS_INTERNAL_ERROR.
int gemm_launcher(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    return static_cast<int>(CUBLAS_STATUS_INTERNAL_ERROR);
  }
  // The lock covers handle creation and the (stream, gemm) pair: a handle is not thread-safe.
  std::lock_guard<std::mutex> lock(handle_mutex);
  cublasHandle_t& handle = handles[device];
  if (handle == nullptr) {
    const cublasStatus_t created = cublasCreate(&handle);
    if (created != CUBLAS_STATUS_SUCCESS) {
      handle = nullptr;
      return static_cast<int>(created);
    }
  }
  cublasStatus_t status = cublasSetStream(handle, stream);
  if (status != CUBLAS_STATUS_SUCCESS) return static_cast<int>(status);
  const float alpha = 1.0f;
  const float beta = 0.0f;
  status = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, n, a, k, &beta, c, n);
  return static_cast<int>(status);
}

// Human-readable name of a status returned by gemm_launcher.
const char* gemm_status_string(int status) {
  return cublasGetStatusString(static_cast<cublasStatus_t>(status));
}
