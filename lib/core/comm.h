// The seam to the processes of a distributed run: rank, size and the few
// collectives synchronous data-parallel training needs. lib/mpi implements
// it over MPI (only there is mpi.h included); a run started alone, or a
// build without MPI, gets the single-process communicator, whose collectives
// do nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace nmt {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "MPI (Open MPI 4.1.4), 2 ranks" or "single process".
  virtual std::string describe() const = 0;

  // Sum of a float buffer over all ranks, in place. Non-blocking: start()
  // returns a handle that wait_all() completes; progress() lets the library
  // move started reductions along while computation goes on.
  virtual int start_sum(float* data, int64_t n) = 0;
  virtual void progress() = 0;
  virtual void wait_all() = 0;
  // Blocking sums and maxima of a few numbers.
  virtual void sum(double* data, int n) = 0;
  virtual void max(int64_t* data, int n) = 0;
  virtual void broadcast(std::string& bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every process of the run with this exit status.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The communicator of this process: MPI's when it was started by mpirun or
// srun with more than one rank (MPI_Init on first use), else a single
// process. A build without MPI started as one of several ranks throws,
// naming the rank, rather than train alone.
Comm& world();
// After an error in a distributed run: ends the other processes too, so
// none waits forever in a collective. Does nothing in a single process.
void abort_if_distributed(int code);
// True when the build has MPI.
bool mpi_built();
// "not built" or the MPI library's version, for --version.
std::string mpi_build_info();

}  // namespace nmt
