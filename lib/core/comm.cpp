#include "core/comm.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

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
  std::string scatter(const std::vector<std::string>& parts, int) override {
    return parts.empty() ? std::string() : parts[0];
  }
  std::vector<std::string> gather(const std::string& mine, int) override { return {mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
};

Comm* g_world = nullptr;  // set once world() has made it
// Rank 0's error that on_root_then_share told the other ranks of: they end
// by themselves, so abort_if_distributed need not (and must not, or MPI's
// abort banner follows the one message).
bool g_failure_shared = false;

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

bool launched_distributed() {
  int rank = 0, size = 1;
  return launched_as(&rank, &size) && size > 1;
}

void on_root_then_share(Comm& comm, const std::function<void()>& check) {
  if (comm.size() == 1) return check();
  std::string code;  // empty: rank 0 goes on; else its exit status
  if (comm.rank() == 0) {
    std::exception_ptr failure;
    try {
      check();
    } catch (const UsageError&) {
      code = "2";
      failure = std::current_exception();
    } catch (...) {
      code = "1";
      failure = std::current_exception();
    }
    comm.broadcast(code, 0);
    if (failure) {
      g_failure_shared = true;
      std::rethrow_exception(failure);
    }
    return;
  }
  comm.broadcast(code, 0);
  if (!code.empty()) throw RankStopped{std::stoi(code)};
}

Comm& world() {
  static Comm* comm = [] {
    int rank = 0, size = 1;
    if (!launched_as(&rank, &size) || size <= 1) return static_cast<Comm*>(new SingleProcess);
    Comm* c = make_mpi_comm();
    if (!c)
      throw Error(
          "this nmt was built without MPI, so it cannot run distributed (started as "
          "rank " +
          std::to_string(rank) + " of " + std::to_string(size) +
          "); rebuild with -DNMT_MPI=ON, or run one process");
    return c;
  }();
  g_world = comm;
  return *comm;
}

int cores_per_rank() {
  const int online = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  CPU_ZERO(&set);
  int mine = online;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    mine = std::min(online, CPU_COUNT(&set));
  // Ranks a launcher put on this node may share one mask (unbound, or bound
  // to a socket that holds several of them): each takes its share at most.
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 1)
      return std::max(1, std::min(mine, online / std::atoi(v)));
  return mine;
}

void abort_if_distributed(int code) {
  if (g_world && g_world->size() > 1 && !g_failure_shared) g_world->abort(code);
}

}  // namespace nmt
