#include "core/dynlib.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace nmt {

void* Module::symbol(const char* name) const { return handle ? dlsym(handle, name) : nullptr; }

std::string Module::describe(const char* build_info) const {
  if (!handle) return "built, not loadable (" + error + ")";
  std::string info;
  entry<void (*)(std::string*)>(build_info)(&info);
  return info;
}

std::string code_directory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&code_directory), &info) == 0 || !info.dli_fname) return "";
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? "" : file.parent_path().string();
}

Module open_module(const char* env_var, const std::string& file_name, const std::string& built_path,
                   const char* abi_symbol, const std::string& abi, bool global,
                   std::initializer_list<const char*> entries) {
  namespace fs = std::filesystem;
  std::vector<fs::path> paths;
  std::error_code ec;
  if (const char* env = std::getenv(env_var); env && *env) {
    // Absolute: dlopen would search the library path for a bare name.
    const fs::path p = fs::absolute(fs::path(env), ec);
    paths.push_back(ec ? fs::path(env) : p);
  } else {
    // Where a program links libnmt.so: beside it (a build tree) or in its
    // nmt/ (installed). Then beside the binary (a build tree), or where
    // `cmake --install` puts them relative to it (LIBDIR/nmt), so that an
    // installed tree works wherever it is moved.
    if (const std::string code = code_directory(); !code.empty()) {
      paths.push_back(fs::path(code) / file_name);
      paths.push_back(fs::path(code) / "nmt" / file_name);
    }
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      paths.push_back(exe.parent_path() / file_name);
      paths.push_back((exe.parent_path() / NMT_MODULES_FROM_BIN / file_name).lexically_normal());
    }
    paths.emplace_back(built_path);
  }
  Module m;
  const fs::path* found = nullptr;
  for (const fs::path& p : paths)
    if (fs::is_regular_file(p, ec)) {
      found = &p;
      break;
    }
  if (!found) {
    m.error = "no " + file_name + " at";
    for (const fs::path& p : paths) m.error += " " + p.string();
    return m;
  }
  void* h = dlopen(found->c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!h) {
    // dlerror names the file, and the library it needs that is missing if
    // that is why.
    const char* e = dlerror();
    m.error = e ? e : found->string() + ": dlopen failed";
    return m;
  }
  const auto answer = reinterpret_cast<const char* (*)()>(dlsym(h, abi_symbol));
  if (!answer || abi != answer()) {
    m.error = found->string() + ": built from another version of nmt (rebuild it with this one)";
    return m;
  }
  for (const char* name : entries)
    if (!dlsym(h, name)) {
      m.error = found->string() + ": lacks nmt's entry point " + name;
      return m;
    }
  m.handle = h;
  return m;
}

DynLib::DynLib(const char* soname, const char* purpose, const char* package)
    : handle_(dlopen(soname, RTLD_NOW | RTLD_LOCAL)), soname_(soname), purpose_(purpose) {
  if (!handle_) {
    const char* why = dlerror();
    throw Error(purpose_ + " needs " + soname_ + " (Debian package " + package +
                "), which could not be opened: " + (why ? why : "dlopen failed"));
  }
}

void* DynLib::symbol(const char* name) const {
  dlerror();
  void* p = dlsym(handle_, name);
  if (!p) throw Error(purpose_ + ": " + soname_ + " has no function " + name);
  return p;
}

}  // namespace nmt
