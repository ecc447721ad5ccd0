// The CUDA side of the device seam in a build with CUDA: the backend lives in
// its own library (libnmt_cuda.so, beside the nmt binary), opened on the
// first question about a GPU. Linking cuBLAS and cuBLASLt into nmt itself
// made every command, `nmt --help` included, map about 540 MB of libraries
// before main (0.1 s and 230 MiB resident on a CPU-only run); now only a run
// that asks for a GPU pays for them, and a machine without the CUDA libraries
// still runs everything else.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/device.h"
#include "core/error.h"

namespace nmt {

namespace {

namespace fs = std::filesystem;

struct CudaModule {
  void* handle = nullptr;
  std::string error;  // why it could not be opened
  bool (*available)() = nullptr;
  Backend* (*backend)() = nullptr;
  void (*build_info)(std::string*) = nullptr;
};

// Where the library may be: $NMT_CUDA_LIBRARY, beside the running binary or
// one directory up (the tests run from build/tests), then where the build
// wrote it.
std::vector<fs::path> candidates() {
  std::vector<fs::path> paths;
  if (const char* env = std::getenv("NMT_CUDA_LIBRARY"); env && *env) paths.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    paths.push_back(exe.parent_path() / NMT_CUDA_LIBRARY_NAME);
    paths.push_back(exe.parent_path().parent_path() / NMT_CUDA_LIBRARY_NAME);
  }
  paths.emplace_back(NMT_CUDA_LIBRARY_BUILT);
  return paths;
}

const CudaModule& module() {
  static const CudaModule m = [] {
    CudaModule m;
    std::string tried;
    for (const fs::path& p : candidates()) {
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) continue;
      m.handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (m.handle) break;
      // Found but not loadable (a CUDA library missing): that is the reason.
      const char* e = dlerror();
      m.error = p.string() + ": " + (e ? e : "dlopen failed");
      return m;
    }
    if (!m.handle) {
      m.error = std::string(NMT_CUDA_LIBRARY_NAME) + " not found beside the nmt binary";
      return m;
    }
    m.available = reinterpret_cast<bool (*)()>(dlsym(m.handle, "nmt_cuda_available"));
    m.backend = reinterpret_cast<Backend* (*)()>(dlsym(m.handle, "nmt_cuda_backend"));
    m.build_info = reinterpret_cast<void (*)(std::string*)>(dlsym(m.handle, "nmt_cuda_build_info"));
    if (!m.available || !m.backend || !m.build_info) {
      m.error = "the CUDA library lacks its entry points (a stale build?)";
      m.available = nullptr;
    }
    return m;
  }();
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
