// The MPI communicator behind core/comm.h: non-blocking sums for the
// gradient buckets, small blocking collectives for the run's control.
#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/error.h"

namespace nmt {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(std::string(what) + " failed: " + std::string(msg, len));
}

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int provided = 0;
    // Only the main thread calls MPI; OpenMP threads never do.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "MPI (" + mpi_build_info() + "), " + std::to_string(size_) + " ranks";
  }

  int start_sum(float* data, int64_t n) override {
    MPI_Request r;
    check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD, &r),
          "MPI_Iallreduce");
    pending_.push_back(r);
    return static_cast<int>(pending_.size());
  }
  void progress() override {
    if (pending_.empty()) return;
    int done = 0;
    check(
        MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
  }
  void wait_all() override {
    if (pending_.empty()) return;
    check(MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
    pending_.clear();
  }
  void sum(double* data, int n) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
  void max(int64_t* data, int n) override {
    check(MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
  void broadcast(std::string& bytes, int root) override {
    int64_t n = static_cast<int64_t>(bytes.size());
    check(MPI_Bcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
    bytes.resize(static_cast<size_t>(n));
    check(MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD),
          "MPI_Bcast");
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);  // MPI_Abort does not return; this keeps the promise if it did
  }

 private:
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> pending_;
};

}  // namespace

Comm* make_mpi_comm() {
  // Destroyed at exit, which finalises MPI.
  static MpiComm comm;
  return &comm;
}

bool mpi_built() { return true; }

std::string mpi_build_info() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, len);
  const auto cut = s.find_first_of(",\n");
  return cut == std::string::npos ? s : s.substr(0, cut);
}

}  // namespace nmt
