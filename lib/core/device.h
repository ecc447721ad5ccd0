// Where a tensor lives, and the allocation seam between the backends. Only
// the backend files know whether CUDA was built in: in a build without it,
// the CUDA cases throw "built without CUDA support".
#pragma once

#include <cstddef>
#include <string>

namespace nmt {

enum class Device { CPU, CUDA };

const char* device_name(Device d);

// 64-byte aligned on the CPU (one cache line, and AVX-512 loads).
void* device_alloc(Device d, size_t bytes);
void device_free(Device d, void* p);
void device_copy(Device dst_dev, void* dst, Device src_dev, const void* src, size_t bytes);

// True when the build has CUDA and a GPU is present.
bool cuda_available();

// The backends compiled in, with versions: "cpu: oneDNN 2.6.3 (...); cuda: ...".
std::string backends_info();

}  // namespace nmt
