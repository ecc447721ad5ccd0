#include "core/comm.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace nmt {

namespace {

class SingleProcess final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }
  int start_sum(float*, int64_t) override { return 0; }
  void progress() override {}
  void wait_all() override {}
  void sum(double*, int) override {}
  void max(int64_t*, int) override {}
  void broadcast(std::string&, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

Comm* g_world = nullptr;  // set once world() has made it

// The rank and size a launcher gave this process, from its environment:
// Open MPI's mpirun, PMI (MPICH, Intel MPI, Slurm's PMI) or srun itself (the
// tasks of its job step: a batch script's own environment names the whole
// allocation and must not count).
bool launched_as(int* rank, int* size) {
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}};
  for (auto& p : pairs) {
    const char* r = std::getenv(p[0]);
    const char* s = std::getenv(p[1]);
    if (r && s) {
      *rank = std::atoi(r);
      *size = std::atoi(s);
      return true;
    }
  }
  return false;
}

}  // namespace

// Defined in lib/mpi: the MPI communicator, or lib/mpi/no_mpi.cpp's null.
Comm* make_mpi_comm();

Comm& world() {
  static Comm* comm = [] {
    int rank = 0, size = 1;
    if (!launched_as(&rank, &size) || size <= 1) return static_cast<Comm*>(new SingleProcess);
    Comm* c = make_mpi_comm();
    if (!c)
      throw Error(
          "this nmt was built without MPI, so it cannot train distributed (started as "
          "rank " +
          std::to_string(rank) + " of " + std::to_string(size) +
          "); rebuild with -DNMT_MPI=ON, or run one process");
    return c;
  }();
  g_world = comm;
  return *comm;
}

void abort_if_distributed(int code) {
  if (g_world && g_world->size() > 1) g_world->abort(code);
}

}  // namespace nmt
