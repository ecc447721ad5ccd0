// The MPI side of the process seam in a build with MPI: the communicator
// lives in libnmt_mpi.so (lib/mpi/comm_mpi.cpp), opened when a launcher
// started this process as one of several ranks, or when --version asks
// which MPI it has.
#include <string>

#include "core/comm.h"
#include "core/dynlib.h"
#include "core/error.h"

namespace nmt {

namespace {

struct MpiModule {
  std::string error;  // why it could not be used
  Comm* (*comm)() = nullptr;
  void (*build_info)(std::string*) = nullptr;
};

const MpiModule& mpi_module() {
  static const MpiModule m = [] {
    MpiModule m;
    // Global: Open MPI opens its own components (transports, launchers),
    // which find MPI's functions in the global scope.
    const Module mod = open_module("NMT_MPI_LIBRARY", NMT_MPI_LIBRARY_NAME, NMT_MPI_LIBRARY_BUILT,
                                   "nmt_mpi_abi", NMT_COMM_ABI, /*global=*/true);
    if (!mod.handle) {
      m.error = mod.error;
      return m;
    }
    m.comm = reinterpret_cast<Comm* (*)()>(mod.symbol("nmt_mpi_comm"));
    m.build_info = reinterpret_cast<void (*)(std::string*)>(mod.symbol("nmt_mpi_build_info"));
    if (!m.comm || !m.build_info) {
      m.error = std::string(NMT_MPI_LIBRARY_NAME) + " lacks nmt's MPI entry points";
      m.comm = nullptr;
    }
    return m;
  }();
  return m;
}

}  // namespace

Comm* make_mpi_comm() {
  const MpiModule& m = mpi_module();
  if (!m.comm) throw Error("MPI could not be loaded: " + m.error);
  return m.comm();
}

bool mpi_built() { return true; }

std::string mpi_build_info() {
  const MpiModule& m = mpi_module();
  if (!m.comm) return "built, not loadable (" + m.error + ")";
  std::string info;
  m.build_info(&info);
  return info;
}

}  // namespace nmt
