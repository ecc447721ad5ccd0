// CUDA backend: device memory and cuBLAS GEMM behind lib/core/cuda_backend.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/cuda_backend.h"
#include "core/error.h"

#define CUDA_CHECK(expr)                                                               \
  do {                                                                                 \
    const cudaError_t err_ = (expr);                                                   \
    if (err_ != cudaSuccess)                                                           \
      throw ::nmt::Error(std::string(#expr) + " failed: " + cudaGetErrorString(err_)); \
  } while (0)

#define CUBLAS_CHECK(expr)                                                               \
  do {                                                                                   \
    const cublasStatus_t st_ = (expr);                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                    \
      throw ::nmt::Error(std::string(#expr) + " failed: " + cublasGetStatusString(st_)); \
  } while (0)

namespace nmt::cuda {

namespace {
cublasHandle_t handle() {
  // One handle per thread, created once: creation costs milliseconds.
  thread_local cublasHandle_t h = [] {
    cublasHandle_t x;
    CUBLAS_CHECK(cublasCreate(&x));
    return x;
  }();
  return h;
}
}  // namespace

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string backend_version() {
  int runtime = 0, devices = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  return "CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + " (runtime " +
         std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) + ", " +
         std::to_string(devices) + " device" + (devices == 1 ? "" : "s") + ")";
}

void* alloc(size_t bytes) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void free(void* p) {
  if (p) cudaFree(p);
}

void copy(void* dst, const void* src, size_t bytes, int kind) {
  const cudaMemcpyKind k = kind == 0   ? cudaMemcpyHostToDevice
                           : kind == 1 ? cudaMemcpyDeviceToHost
                                       : cudaMemcpyDeviceToDevice;
  CUDA_CHECK(cudaMemcpy(dst, src, bytes, k));
}

void gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M,
          int64_t N, int64_t K, float alpha, float beta) {
  // cuBLAS is column-major: row-major C = A B is column-major C^T = B^T A^T,
  // so swap the operands instead of transposing anything.
  const int lda = trans_a ? static_cast<int>(M) : static_cast<int>(K);
  const int ldb = trans_b ? static_cast<int>(K) : static_cast<int>(N);
  CUBLAS_CHECK(cublasSgemm(handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                           trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                           static_cast<int>(M), static_cast<int>(K), &alpha, b, ldb, a, lda, &beta,
                           c, static_cast<int>(N)));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace nmt::cuda
