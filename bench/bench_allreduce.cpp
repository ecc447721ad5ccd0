// Time of summing a model's gradients across processes, the communication
// term of the scaling model in bench/SCALING.md. Run under mpirun:
//   mpirun -np 2 build/bench/bench_allreduce [floats ...]
// (default: 7.6M and 60.5M floats, transformer-small's and -base's
// parameters). Prints the mean time of a blocking sum of the whole buffer
// and of the same buffer cut into per-layer buckets, and the bus bandwidth
// a ring allreduce would need for it: 2 (N-1)/N x bytes / time.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_common.h"
#include "core/comm.h"

using namespace nmt;

int main(int argc, char** argv) {
  Comm& comm = world();
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {7'583'232, 60'514'304};
  const int n = comm.size();
  if (comm.rank() == 0)
    std::printf("%s\n%12s %8s %12s %12s %14s\n", comm.describe().c_str(), "floats", "buckets", "ms",
                "GB/s (bus)", "MB per rank");
  for (int64_t floats : sizes)
    for (int64_t buckets : {int64_t{1}, int64_t{8}}) {
      std::vector<float> buf(floats, 1.f);
      const int64_t per = (floats + buckets - 1) / buckets;
      auto run = [&] {
        for (int64_t b = 0; b < floats; b += per)
          comm.start_sum(buf.data() + b, std::min(per, floats - b));
        comm.wait_all();
      };
      run();  // warm-up: connections, buffers
      comm.barrier();
      const int reps = 10;
      const double t0 = bench::now();
      for (int r = 0; r < reps; ++r) run();
      const double sec = (bench::now() - t0) / reps;
      const double bytes = 4.0 * floats;
      if (comm.rank() == 0)
        std::printf("%12lld %8lld %12.2f %12.2f %14.1f\n", static_cast<long long>(floats),
                    static_cast<long long>(buckets), sec * 1e3,
                    n > 1 ? 2.0 * (n - 1) / n * bytes / sec / 1e9 : 0.0, bytes / 1e6);
    }
  return 0;
}
