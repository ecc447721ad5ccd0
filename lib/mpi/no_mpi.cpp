// The MPI side of the process seam in a build without MPI (CMake compiles
// this file instead of comm_mpi.cpp).
#include <string>

#include "core/comm.h"

namespace nmt {

Comm* make_mpi_comm() { return nullptr; }
std::string mpi_build_info() { return "not built"; }

}  // namespace nmt
