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

struct CudaModule {
  std::string error;  // why it could not be used
  bool (*available)() = nullptr;
  Backend* (*backend)() = nullptr;
  void (*build_info)(std::string*) = nullptr;
};

CudaModule open_cuda() {
  CudaModule m;
  const Module mod = open_module("NMT_CUDA_LIBRARY", NMT_CUDA_LIBRARY_NAME, NMT_CUDA_LIBRARY_BUILT,
                                 "nmt_cuda_abi", NMT_BACKEND_ABI, /*global=*/false);
  if (!mod.handle) {
    m.error = mod.error;
    return m;
  }
  m.available = reinterpret_cast<bool (*)()>(mod.symbol("nmt_cuda_available"));
  m.backend = reinterpret_cast<Backend* (*)()>(mod.symbol("nmt_cuda_backend"));
  m.build_info = reinterpret_cast<void (*)(std::string*)>(mod.symbol("nmt_cuda_build_info"));
  if (!m.available || !m.backend || !m.build_info) {
    m.error = std::string(NMT_CUDA_LIBRARY_NAME) + " lacks nmt's CUDA entry points";
    m.available = nullptr;
  }
  return m;
}

const CudaModule& module() {
  static const CudaModule m = open_cuda();
  return m;
}

}  // namespace

Backend& cuda_backend() {
  const CudaModule& m = module();
  if (!m.available) throw Error("the CUDA backend could not be loaded: " + m.error);
  return *m.backend();
}

bool cuda_available() {
  const CudaModule& m = module();
  return m.available && m.available();
}

std::string cuda_build_info() {
  const CudaModule& m = module();
  if (!m.available) return "built, not loadable (" + m.error + ")";
  std::string info;
  m.build_info(&info);
  return info;
}

}  // namespace nmt
