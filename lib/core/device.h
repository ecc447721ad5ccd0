// Where a tensor lives. Only the backends know whether CUDA was built in: in
// a build without it, asking for the CUDA backend throws "nmt was built
// without CUDA support", and cuda_available() is false.
#pragma once

#include <string>

namespace nmt {

enum class Device { CPU, CUDA };

const char* device_name(Device d);
// "cpu", "cuda" or "cuda:N" (N is accepted and must be 0 for now).
Device parse_device(const std::string& name);

// True when the build has CUDA and a GPU is present.
bool cuda_available();

// The backends compiled in, with versions: "cpu: oneDNN 2.6.3 (...); cuda: ...".
std::string backends_info();

}  // namespace nmt
