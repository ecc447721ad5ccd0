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

const Module& mpi_module() {
  // Global: Open MPI opens its own components (transports, launchers),
  // which find MPI's functions in the global scope.
  static const Module m =
      open_module("NMT_MPI_LIBRARY", NMT_MPI_LIBRARY_NAME, NMT_MPI_LIBRARY_BUILT, "nmt_mpi_abi",
                  NMT_COMM_ABI, /*global=*/true, {"nmt_mpi_comm", "nmt_mpi_build_info"});
  return m;
}

}  // namespace

Comm* make_mpi_comm() {
  const Module& m = mpi_module();
  if (!m.handle) throw Error("MPI could not be loaded: " + m.error);
  return m.entry<Comm* (*)()>("nmt_mpi_comm")();
}

std::string mpi_build_info() { return mpi_module().describe("nmt_mpi_build_info"); }

}  // namespace nmt
