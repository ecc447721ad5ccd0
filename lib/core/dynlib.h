// Libraries that only some runs use, opened when first needed instead of at
// start-up, so that the others neither map nor relocate them:
// - system libraries with a C API, called through a table of their
//   functions (NMT_DYNLIB_TABLE, typed by the library's own header, so a
//   mismatch is a compile error as with linking): cairo (pictures), libzip
//   (Marian's .npz), MeCab (-tok ja-mecab);
// - nmt's own modules, which link what their code needs: libnmt_cuda.so
//   (cuBLAS, cuBLASLt), libnmt_mpi.so (Open MPI).
// Linked into nmt, these and what they pull in (X11, fontconfig, freetype,
// pixman, libcrypto, Open MPI's runtime) were mapped by every run, `nmt
// translate` included.
#pragma once

#include <initializer_list>
#include <string>

namespace nmt {

// One of nmt's own modules (libnmt_cuda.so, libnmt_mpi.so: code that links
// large libraries only some runs need), opened: its handle, or why it could
// not be.
struct Module {
  void* handle = nullptr;
  std::string error;  // empty when handle is set
  // An entry point that open_module checked is there.
  template <typename F>
  F entry(const char* name) const {
    return reinterpret_cast<F>(symbol(name));
  }
  // For --version: what the entry point build_info (void(std::string*))
  // writes, or "built, not loadable (why)".
  std::string describe(const char* build_info) const;

 private:
  void* symbol(const char* name) const;
};
// The directory of the file that holds nmt's code: the binary, or libnmt.so
// in a program that links it (empty if it cannot be told).
std::string code_directory();

// Looks for file_name in the file $env_var names, alone, when it is set (a
// wrong one is reported, not passed over); else beside the code's file
// (libnmt.so, in a program that links it), beside the running binary, in
// ../lib from it (an installed layout), then at built_path (where the
// build wrote it, for the test and bench binaries). The module's abi_symbol,
// a function returning a C string, must return abi: a module built from
// another version of nmt would call the wrong virtual functions. global:
// RTLD_GLOBAL, for libraries whose own plugins look up their symbols
// globally (Open MPI's). entries: the functions the caller will take; a
// module without one of them is refused, naming it.
Module open_module(const char* env_var, const std::string& file_name, const std::string& built_path,
                   const char* abi_symbol, const std::string& abi, bool global,
                   std::initializer_list<const char*> entries);

class DynLib {
 public:
  // soname: the file dlopen finds ("libcairo.so.2"); purpose: what needs it,
  // for the error ("pictures", "-tok ja-mecab"); package: where it comes from.
  // Throws Error, naming all three and dlerror's reason, if it cannot be opened.
  DynLib(const char* soname, const char* purpose, const char* package);
  DynLib(const DynLib&) = delete;
  DynLib& operator=(const DynLib&) = delete;
  // The library stays mapped to the end of the process (its functions may be
  // running in other threads' static destructors), so there is no dlclose.

  // The address of a function; throws Error naming it if the library lacks it.
  void* symbol(const char* name) const;

 private:
  void* handle_;
  std::string soname_, purpose_;
};

// The table Api (NMT_DYNLIB_TABLE) of the library soname, opened and bound
// on the first call, once for the process.
template <typename Api>
const Api& open_library(const char* soname, const char* purpose, const char* package) {
  static const DynLib lib(soname, purpose, package);
  static const Api api(lib);
  return api;
}

}  // namespace nmt

// A table of C functions from one library: X(name) for each, declared in the
// library's header. NMT_DYNLIB_TABLE(Api, LIST) defines struct Api with a
// pointer per function, typed from the header's declaration and named as the
// function, filled from a DynLib.
#define NMT_DYNLIB_DECLARE_(f) decltype(&::f) f = nullptr;
#define NMT_DYNLIB_BIND_(f) f = reinterpret_cast<decltype(&::f)>(lib.symbol(#f));
#define NMT_DYNLIB_TABLE(Api, LIST)                                   \
  struct Api {                                                        \
    LIST(NMT_DYNLIB_DECLARE_)                                         \
    explicit Api(const ::nmt::DynLib& lib) { LIST(NMT_DYNLIB_BIND_) } \
  }
