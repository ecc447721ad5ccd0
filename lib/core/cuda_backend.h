// The CUDA side of the device seam. Implemented in lib/cuda/ when the build
// has CUDA; otherwise every function but available() throws
// "nmt was built without CUDA support" (lib/core/device.cpp). Nothing outside
// the backends includes CUDA headers or tests NMT_WITH_CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nmt::cuda {

void* alloc(size_t bytes);
void free(void* p);
// kind: 0 host to device, 1 device to host, 2 device to device.
void copy(void* dst, const void* src, size_t bytes, int kind);
bool available();
// "CUDA 13.0 (runtime 13.0, 1 device)" or "not built" for --version.
std::string backend_version();

// Row-major C (M, N) = alpha * op(A) op(B) + beta * C on the GPU (cuBLAS).
// op(A) is (M, K): A is stored (K, M) when trans_a. op(B) is (K, N).
void gemm(const float* a, bool trans_a, const float* b, bool trans_b, float* c, int64_t M,
          int64_t N, int64_t K, float alpha, float beta);

}  // namespace nmt::cuda
