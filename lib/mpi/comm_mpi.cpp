// The MPI communicator behind core/comm.h: non-blocking sums for the
// gradient buckets, small blocking collectives for the run's control. Built
// as a module of its own, libnmt_mpi.so, which lib/mpi/mpi_loader.cpp opens
// when a run is started as one of several ranks (or --version asks): linked
// into nmt, Open MPI and its runtime (open-rte, open-pal, hwloc, libevent,
// udev) were mapped by every run, a single translation included.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
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

// MPI counts bytes in ints: what one call moves stays below 2 GiB.
int checked_count(size_t n) {
  if (n > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw Error("cannot send " + std::to_string(n) +
                " bytes between ranks in one message (at most 2 GiB)");
  return static_cast<int>(n);
}

// Waits for a request without spinning: Open MPI's blocking calls poll at
// full speed, so a rank waiting for rank 0 (reading a slow pipe, or
// translating a longer window) would burn a core that its neighbours on the
// node could use. A few fast polls first, then sleeps of 100 us: a round
// waits a millisecond at most longer, against seconds of translation.
void wait_politely(MPI_Request& r, const char* what) {
  for (int polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(&r, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// "Open MPI v4.1.4": the first line of MPI's own description, to its first comma.
std::string library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, len);
  const auto cut = s.find_first_of(",\n");
  return cut == std::string::npos ? s : s.substr(0, cut);
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
    return "MPI (" + library_version() + "), " + std::to_string(size_) + " ranks";
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
  std::string scatter(const std::vector<std::string>& parts, int root) override {
    std::vector<int> counts, offsets;
    std::string all;
    if (rank_ == root) {
      if (static_cast<int>(parts.size()) != size_) throw Error("scatter: one part per rank");
      for (const auto& p : parts) {
        offsets.push_back(static_cast<int>(all.size()));
        counts.push_back(checked_count(p.size()));
        all += p;
        checked_count(all.size());
      }
    }
    int n = 0;
    MPI_Request r;
    check(MPI_Iscatter(counts.data(), 1, MPI_INT, &n, 1, MPI_INT, root, MPI_COMM_WORLD, &r),
          "MPI_Iscatter");
    wait_politely(r, "MPI_Iscatter");
    std::string mine(static_cast<size_t>(n), '\0');
    check(MPI_Iscatterv(all.data(), counts.data(), offsets.data(), MPI_BYTE, mine.data(), n,
                        MPI_BYTE, root, MPI_COMM_WORLD, &r),
          "MPI_Iscatterv");
    wait_politely(r, "MPI_Iscatterv");
    return mine;
  }
  std::vector<std::string> gather(const std::string& mine, int root) override {
    int n = checked_count(mine.size());
    std::vector<int> counts(rank_ == root ? size_ : 0), offsets;
    MPI_Request r;
    check(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD, &r),
          "MPI_Igather");
    wait_politely(r, "MPI_Igather");
    int64_t total = 0;
    for (int c : counts) {
      offsets.push_back(static_cast<int>(total));
      total += c;
    }
    std::string all(static_cast<size_t>(checked_count(static_cast<size_t>(total))), '\0');
    check(MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), offsets.data(), MPI_BYTE,
                      root, MPI_COMM_WORLD),
          "MPI_Gatherv");
    std::vector<std::string> out;
    for (size_t k = 0; k < counts.size(); ++k) out.push_back(all.substr(offsets[k], counts[k]));
    return out;
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

}  // namespace nmt

// The module's entry points (lib/mpi/mpi_loader.cpp opens it and finds them).
extern "C" __attribute__((visibility("default"))) const char* nmt_mpi_abi() { return NMT_COMM_ABI; }

extern "C" __attribute__((visibility("default"))) nmt::Comm* nmt_mpi_comm() {
  // Destroyed at exit, which finalises MPI.
  static nmt::MpiComm comm;
  return &comm;
}

extern "C" __attribute__((visibility("default"))) void nmt_mpi_build_info(std::string* out) {
  *out = nmt::library_version();
}
