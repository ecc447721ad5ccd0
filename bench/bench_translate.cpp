// Translation speed under a fixed protocol, so figures compare with other
// engines on this machine: random weights, a vocabulary of 8000, sources of
// 20-30 random tokens, outputs forced to exactly 30 tokens (</s> suppressed
// until then), greedy and beam 4, batch 1 and 32. Run:
//   build/bench/bench_translate [threads] [sentences]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "core/cpu_kernels.h"
#include "decode/search.h"
#include "model/config.h"
#include "model/transformer.h"

using namespace nmt;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int n = argc > 2 ? std::atoi(argv[2]) : 64;
  cpu::set_num_threads(threads);
  double nominal, measured;
  bench::print_peak(threads, &nominal, &measured);
  std::mt19937 g(1);
  std::uniform_int_distribution<int> len(20, 30), tok(4, 7999);
  std::vector<std::vector<int32_t>> src(n);
  for (auto& s : src) {
    s.resize(len(g));
    for (auto& t : s) t = tok(g);
  }
  const int out_len = 30;
  std::printf("%-18s %5s %6s %10s %12s %10s %8s\n", "model", "beam", "batch", "sent/s", "tgt tok/s",
              "GFLOP/s", "%peak");
  for (const char* name : {"transformer-small", "transformer-base"}) {
    ModelConfig cfg = load_config(find_config(name));
    cfg.vocab_size = 8000;
    Transformer model(cfg);
    model.init(1);
    const double flops_per_tok = model.flops_per_token(25, out_len);
    for (int beam : {1, 4}) {
      for (int batch : {1, 32}) {
        SearchOptions opts;
        opts.beam = beam;
        opts.force_length = out_len;
        DecodeState st;
        // Warm-up on one batch so that primitives exist, as in a long run.
        search(model, {src.begin(), src.begin() + batch}, opts, st);
        const int count = batch == 1 ? std::min(n, beam == 1 ? 32 : 16) : n;
        std::vector<double> lat;
        const double t0 = bench::now();
        for (int i = 0; i < count; i += batch) {
          const double s0 = bench::now();
          search(model, {src.begin() + i, src.begin() + std::min(count, i + batch)}, opts, st);
          lat.push_back(bench::now() - s0);
        }
        const double sec = bench::now() - t0;
        // Work per sentence: out_len target positions per hypothesis (beam
        // hypotheses each), counted with the forward FLOPs per token.
        const double gflops = flops_per_tok * out_len * beam * count / sec / 1e9;
        std::printf("%-18s %5d %6d %10.2f %12.1f %10.1f %7.1f%%\n", name, beam, batch, count / sec,
                    count * out_len / sec, gflops, 100 * gflops / measured);
        if (batch == 1 && std::string(name) == "transformer-small") {
          std::sort(lat.begin(), lat.end());
          std::printf("%-18s %5d %6s latency p50 %.1f ms, p90 %.1f ms\n", name, beam, "1",
                      1e3 * lat[lat.size() / 2], 1e3 * lat[lat.size() * 9 / 10]);
        }
      }
    }
  }
  std::printf("peak memory %.0f MiB\n", bench::peak_rss_mib());
}
