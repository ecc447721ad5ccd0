// The seam to the processes of a distributed run: rank, size and the few
// collectives that synchronous data-parallel training (sums) and
// distributed translation (rank 0 scattering windows and gathering their
// translations) need. lib/mpi implements
// it over MPI (only there is mpi.h included); a run started alone, or a
// build without MPI, gets the single-process communicator, whose collectives
// do nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
  // parts[k] (read on root only, one per rank) to rank k; returns this
  // rank's part. Every rank calls it.
  virtual std::string scatter(const std::vector<std::string>& parts, int root) = 0;
  // Every rank's bytes to root, in rank order; elsewhere an empty list.
  virtual std::vector<std::string> gather(const std::string& mine, int root) = 0;
  virtual void barrier() = 0;
  // Ends every process of the run with this exit status.
  [[noreturn]] virtual void abort(int code) = 0;
};

// The communicator of this process: MPI's when it was started by mpirun or
// srun with more than one rank (MPI_Init on first use), else a single
// process. A build without MPI started as one of several ranks throws,
// naming the rank, rather than run alone beside copies of itself.
Comm& world();
// True when a launcher (mpirun, srun) started this process as one of
// several, whether or not the build has MPI.
bool launched_distributed();
// What a rank other than 0 throws when rank 0 refused the run and said why:
// it ends with the same exit status, silently.
struct RankStopped {
  int code;
};
// Runs check() on rank 0 only and tells every rank how it went: the other
// ranks throw RankStopped with rank 0's exit status (2 for a UsageError, 1
// for another error) when it threw, so that none waits for a rank 0 that
// has gone. In a single process, just check().
void on_root_then_share(Comm& comm, const std::function<void()>& check);
// After an error in a distributed run: ends the other processes too, so
// none waits forever in a collective. Does nothing in a single process.
void abort_if_distributed(int code);
// The cores this process may use: those its affinity mask allows (taskset,
// a cpuset, a launcher's binding), and at most the node's share of each of
// the ranks a launcher (Open MPI, MPICH) started there, so that ranks left
// unbound or bound together to one socket do not each take all its cores.
int cores_per_rank();
// "not built" or the MPI library's version, for --version.
std::string mpi_build_info();

}  // namespace nmt
