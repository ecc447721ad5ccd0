// The CUDA side of the device seam in a build without CUDA (CMake compiles
// this file instead of the backend): asking for a GPU says so clearly.
#include "core/backend.h"
#include "core/device.h"
#include "core/error.h"

namespace nmt {

Backend& cuda_backend() { throw Error("nmt was built without CUDA support"); }
bool cuda_available() { return false; }
std::string cuda_build_info() { return "not built"; }

}  // namespace nmt
