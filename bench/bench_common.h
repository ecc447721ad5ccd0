// Shared by the benchmarks: this machine's FP32 peak, timing and memory.
#pragma once

#include <immintrin.h>
#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"

namespace nmt::bench {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Peak resident memory of this process, in MiB.
inline double peak_rss_mib() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// GFLOP/s of `chains(iters)` run on every thread, the best of three:
// chains runs independent dependency chains (enough to cover the
// instruction's latency) for iters rounds of flops_per_round each and
// returns a value that keeps them alive.
template <class Chains>
double best_gflops(int threads, double flops_per_round, Chains chains) {
  const long iters = 20'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += chains(iters);
    const double sec = now() - t0;
    if (sink == 12345.f) std::printf(" ");  // keep the loop alive
    best = std::max(best, flops_per_round * iters * threads / sec / 1e9);
  }
  return best;
}

// Measured FP32 FMA throughput: 12 FMA chains on every thread. This is the
// ceiling any f32 GEMM can reach here, whatever the vendor's nominal figure.
inline double measured_peak_gflops(int threads) {
#if defined(__AVX512F__)
  return best_gflops(threads, 2.0 * 16 * 12, [](long iters) {
    __m512 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.f + i * 1e-3f);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (long k = 0; k < iters; ++k)
      for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    float sink = 0;
    for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(a[i]);
    return sink;
  });
#elif defined(__AVX2__) && defined(__FMA__)
  return best_gflops(threads, 2.0 * 8 * 12, [](long iters) {
    __m256 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.f + i * 1e-3f);
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    for (long k = 0; k < iters; ++k)
      for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
    alignas(32) float out[8];
    float sink = 0;
    for (int i = 0; i < 12; ++i) {
      _mm256_store_ps(out, a[i]);
      for (float x : out) sink += x;
    }
    return sink;
  });
#else
  // A portable build (NMT_NATIVE=OFF) has no vector FMA to name: scalar
  // chains, a floor rather than the machine's peak.
  return best_gflops(threads, 2.0 * 12, [](long iters) {
    float a[12];
    for (int i = 0; i < 12; ++i) a[i] = 1.f + i * 1e-3f;
    for (long k = 0; k < iters; ++k)
      for (int i = 0; i < 12; ++i) a[i] = std::fma(a[i], 0.999999f, 1e-7f);
    float sink = 0;
    for (float x : a) sink += x;
    return sink;
  });
#endif
}

// Measured bf16 dot-product throughput (AVX512-BF16's vdpbf16ps: 32 bf16
// products summed into 16 f32 lanes, 64 flops an instruction), 12 chains on
// every thread; 0 where this build or CPU has no AVX512-BF16. On an AMX Xeon
// it measured about half the FMA peak: bf16 products run on the tiles there.
inline double measured_bf16_peak_gflops(int threads) {
#if defined(__AVX512BF16__)
  return best_gflops(threads, 64.0 * 12, [](long iters) {
    __m512 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.f + i * 1e-3f);
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    for (long k = 0; k < iters; ++k)
      for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, x);
    float sink = 0;
    for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(a[i]);
    return sink;
  });
#else
  (void)threads;
  return 0;
#endif
}

// The guide's nominal figure for this machine class: 32 FP32 flops per cycle
// per core (AVX2, two FMA pipes) at the clock the kernel reports.
inline double nominal_peak_gflops(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  double mhz = 0;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) {
      mhz = std::stod(line.substr(line.find(':') + 1));
      break;
    }
  return threads * 32.0 * mhz / 1e3;
}

inline void print_peak(int threads, double* nominal, double* measured) {
  *nominal = nominal_peak_gflops(threads);
  *measured = measured_peak_gflops(threads);
  std::printf(
      "machine: %d threads; nominal FP32 peak %.1f GFLOP/s (32 flops/cycle/core x /proc/cpuinfo "
      "clock); "
      "measured FMA peak %.1f GFLOP/s (%s)\n",
      threads, *nominal, *measured,
#if defined(__AVX512F__)
      "AVX-512"
#else
      "AVX2"
#endif
  );
  std::printf("numerics: %s\n", nmt::backend(nmt::Device::CPU).numerics().c_str());
}

// A benchmark's command line, read once (CLI11, as nmt's own).
struct Args {
  std::vector<long> positional;
  std::map<std::string, std::string> values;  // the options given
  std::string value(const std::string& name, const std::string& fallback) const {
    const auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
};

// The command line against what a benchmark takes: -h or --help prints
// `usage` (the file's header) and exits 0; an option not in `options` (each
// takes a value), an option without its value, a value of one of `numbers`
// that is not a number, or a positional argument that is not a positive
// integer (`positional` of them at most) is a one-line error, exit 2, before
// any measurement runs.
inline Args check_args(int argc, char** argv, const char* usage,
                       std::initializer_list<const char*> options,
                       std::initializer_list<const char*> numbers, int positional) {
  CLI::App app;
  app.set_help_flag();  // the benchmark's own usage instead of CLI11's
  bool help = false;
  app.add_flag("-h,--help", help);
  std::vector<std::string> given(options.size());
  std::vector<CLI::Option*> opts;
  for (const char* o : options) {
    CLI::Option* opt = app.add_option(o, given[opts.size()]);
    for (const char* n : numbers)
      if (std::string(n) == o) opt->check(CLI::Number);
    opts.push_back(opt);
  }
  Args args;
  if (positional > 0)
    app.add_option("positional", args.positional)
        ->expected(0, positional)
        ->check(CLI::Validator(
            [](std::string& v) {
              char* end = nullptr;
              const long n = std::strtol(v.c_str(), &end, 10);
              return *end == '\0' && n > 0 ? std::string()
                                           : "expected a positive integer, got " + v;
            },
            "POSITIVE INTEGER"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (--help lists the arguments)\n", argv[0], e.what());
    std::exit(2);
  }
  if (help) {
    std::fputs(usage, stdout);
    std::exit(0);
  }
  for (size_t i = 0; i < opts.size(); ++i)
    if (opts[i]->count() > 0) args.values[opts[i]->get_name()] = given[i];
  return args;
}

}  // namespace nmt::bench
