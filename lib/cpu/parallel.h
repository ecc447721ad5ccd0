// OpenMP teams only where more than one thread runs them. libgomp ends
// every parallel region, a team of one included (an `if` clause that fails
// still makes one), with a futex wake system call: about 1.4 us in a
// paravirtualised guest, and a one-thread translation worker opens tens of
// thousands of regions over a file (45K for an int8 translation of
// test_2016_flickr: layer norms, residuals, activation quantisation and
// attention on a decoding step's few rows).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace nmt::cpu {

// Whether a loop is worth a team here: big enough, and threads to share it.
inline bool team_pays(bool big) { return big && omp_get_max_threads() > 1; }

// f(i) for i in [0, n): statically shared across a team where
// team_pays(big), else in order on the calling thread.
template <typename F>
void parallel_for(int64_t n, bool big, F&& f) {
  if (team_pays(big)) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

// f(begin, end) over [0, n) cut into one contiguous part per thread where
// team_pays(big), else f(0, n): for elementwise loops, which vectorise
// inside f.
template <typename F>
void parallel_range(int64_t n, bool big, F&& f) {
  if (!team_pays(big)) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads();
    const int64_t part = (n + T - 1) / T;
    f(std::min(n, t * part), std::min(n, (t + 1) * part));
  }
}

}  // namespace nmt::cpu
