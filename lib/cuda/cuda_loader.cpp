// The CUDA side of the device seam in a build with CUDA: the backend lives in
// its own library (libnmt_cuda.so, beside the nmt binary), opened on the
// first question about a GPU. Linking cuBLAS and cuBLASLt into nmt itself
// made every command, `nmt --help` included, map about 540 MB of libraries
// before main (0.1 s and 230 MiB resident on a CPU-only run); now only a run
// that asks for a GPU pays for them, and a machine without the CUDA libraries
// still runs everything else.
#include <string>

#include "core/backend.h"
#include "core/device.h"
#include "core/dynlib.h"
#include "core/error.h"

namespace nmt {

namespace {

// The entry points taken once: backend() runs for every op on the GPU.
struct CudaModule {
  Module module;
  bool (*available)() = nullptr;
  Backend* (*backend)() = nullptr;
};

const CudaModule& cuda_module() {
  static const CudaModule m = [] {
    CudaModule c;
    c.module = open_module("NMT_CUDA_LIBRARY", NMT_CUDA_LIBRARY_NAME, NMT_CUDA_LIBRARY_BUILT,
                           "nmt_cuda_abi", NMT_BACKEND_ABI, /*global=*/false,
                           {"nmt_cuda_available", "nmt_cuda_backend", "nmt_cuda_build_info"});
    if (c.module.handle) {
      c.available = c.module.entry<bool (*)()>("nmt_cuda_available");
      c.backend = c.module.entry<Backend* (*)()>("nmt_cuda_backend");
    }
    return c;
  }();
  return m;
}

}  // namespace

Backend& cuda_backend() {
  const CudaModule& m = cuda_module();
  if (!m.backend) throw Error("the CUDA backend could not be loaded: " + m.module.error);
  return *m.backend();
}

bool cuda_available() {
  const CudaModule& m = cuda_module();
  return m.available && m.available();
}

std::string cuda_build_info() { return cuda_module().module.describe("nmt_cuda_build_info"); }

}  // namespace nmt
