// CPU allocation, and the CUDA cases of the device seam when the build has no
// CUDA (the CUDA build defines them in lib/cuda/).
#include "core/device.h"

#include <cstdlib>
#include <cstring>

#include "core/cpu_kernels.h"
#include "core/cuda_backend.h"
#include "core/error.h"

namespace nmt {

const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

#ifndef NMT_WITH_CUDA
namespace cuda {
[[noreturn]] static void no_cuda() { throw Error("nmt was built without CUDA support"); }
void* alloc(size_t) { no_cuda(); }
void free(void*) {}
void copy(void*, const void*, size_t, int) { no_cuda(); }
bool available() { return false; }
std::string backend_version() { return "not built"; }
void gemm(const float*, bool, const float*, bool, float*, int64_t, int64_t, int64_t, float, float) {
  no_cuda();
}
}  // namespace cuda
#endif

void* device_alloc(Device d, size_t bytes) {
  if (bytes == 0) bytes = 64;
  if (d == Device::CUDA) return cuda::alloc(bytes);
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void device_free(Device d, void* p) {
  if (d == Device::CUDA)
    cuda::free(p);
  else
    std::free(p);
}

void device_copy(Device dst_dev, void* dst, Device src_dev, const void* src, size_t bytes) {
  if (dst_dev == Device::CPU && src_dev == Device::CPU) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // 0: host to device, 1: device to host, 2: device to device.
  const int kind = src_dev == Device::CPU ? 0 : dst_dev == Device::CPU ? 1 : 2;
  cuda::copy(dst, src, bytes, kind);
}

bool cuda_available() { return cuda::available(); }

std::string backends_info() {
  return "cpu: " + cpu::backend_version() + "; cuda: " + cuda::backend_version() +
         "; mpi: not built";
}

}  // namespace nmt
