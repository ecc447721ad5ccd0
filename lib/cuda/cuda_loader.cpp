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
  std::string error;  // why it could not be used
  bool (*available)() = nullptr;
  Backend* (*backend)() = nullptr;
  void (*build_info)(std::string*) = nullptr;
};

// Where the library may be: $NMT_CUDA_LIBRARY alone when it is set (a wrong
// one is reported, not passed over); else beside the running binary, in
// ../lib from it (an installed layout), then where the build wrote it (the
// test and bench binaries in build/tests and build/bench).
std::vector<fs::path> candidates() {
  std::error_code ec;
  if (const char* env = std::getenv("NMT_CUDA_LIBRARY"); env && *env) {
    // Absolute: dlopen would search the library path for a bare name.
    const fs::path p = fs::absolute(fs::path(env), ec);
    return {ec ? fs::path(env) : p};
  }
  std::vector<fs::path> paths;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    paths.push_back(exe.parent_path() / NMT_CUDA_LIBRARY_NAME);
    paths.push_back(exe.parent_path().parent_path() / "lib" / NMT_CUDA_LIBRARY_NAME);
  }
  paths.emplace_back(NMT_CUDA_LIBRARY_BUILT);
  return paths;
}

template <typename F>
F symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

CudaModule open_module() {
  CudaModule m;
  const std::vector<fs::path> paths = candidates();
  const fs::path* found = nullptr;
  for (const fs::path& p : paths) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) {
      found = &p;
      break;
    }
  }
  if (!found) {
    m.error = "no " + std::string(NMT_CUDA_LIBRARY_NAME) + " at";
    for (const fs::path& p : paths) m.error += " " + p.string();
    return m;
  }
  m.handle = dlopen(found->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m.handle) {
    // dlerror names the file, and the CUDA library that is missing if that
    // is why.
    const char* e = dlerror();
    m.error = e ? e : found->string() + ": dlopen failed";
    return m;
  }
  const auto abi = symbol<const char* (*)()>(m.handle, "nmt_cuda_abi");
  if (!abi || std::string(abi()) != NMT_BACKEND_ABI) {
    m.error = found->string() + ": built from another version of nmt (rebuild it with this one)";
    return m;
  }
  m.available = symbol<bool (*)()>(m.handle, "nmt_cuda_available");
  m.backend = symbol<Backend* (*)()>(m.handle, "nmt_cuda_backend");
  m.build_info = symbol<void (*)(std::string*)>(m.handle, "nmt_cuda_build_info");
  if (!m.available || !m.backend || !m.build_info) {
    m.error = found->string() + ": lacks nmt's CUDA entry points";
    m.available = nullptr;
  }
  return m;
}

const CudaModule& module() {
  static const CudaModule m = open_module();
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
