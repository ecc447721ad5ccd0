// GEMM and attention throughput at the shapes of transformer-small and
// transformer-base, against this machine's FP32 peak. Run:
//   build/bench/bench_gemm [threads]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "bench_common.h"
#include "core/tensor.h"
#include "ops/ops.h"

using namespace nmt;

namespace {

double time_it(const std::function<void()>& f, double min_sec = 0.5) {
  f();  // warm-up: builds the primitive
  int reps = 0;
  const double t0 = bench::now();
  double t = t0;
  while (t - t0 < min_sec || reps < 3) {
    f();
    ++reps;
    t = bench::now();
  }
  return (t - t0) / reps;
}

void fill(Tensor& t) {
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.f, 0.1f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = d(g);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ops::set_num_threads(threads);
  double nominal, measured;
  bench::print_peak(threads, &nominal, &measured);
  std::printf("%-34s %8s %10s %9s %9s\n", "op (M x K -> N)", "ms", "GFLOP/s", "%nominal",
              "%measured");
  struct Model {
    const char* name;
    int64_t D, F, H, V;
  };
  for (Model m : {Model{"small", 256, 1024, 4, 8000}, Model{"base", 512, 2048, 8, 32000}}) {
    for (int64_t M :
         {960, 4096}) {  // 32 x 30 tokens (translation batch); a 4096-token training batch
      struct Shape3 {
        const char* op;
        int64_t K, N;
        bool relu;
      };
      for (Shape3 s : {Shape3{"qkv", m.D, 3 * m.D, false}, Shape3{"ffn1+bias+relu", m.D, m.F, true},
                       Shape3{"ffn2", m.F, m.D, false}, Shape3{"output", m.D, m.V, false}}) {
        Tensor a(Shape{M, s.K}), w(Shape{s.N, s.K}), bias(Shape{s.N}), c(Shape{M, s.N});
        fill(a);
        fill(w);
        const double sec = time_it(
            [&] { ops::linear(a, w, &bias, c, s.relu ? Activation::Relu : Activation::None); });
        const double gf = 2.0 * M * s.K * s.N / sec / 1e9;
        char label[64];
        std::snprintf(label, sizeof label, "%s %s %ldx%ld->%ld", m.name, s.op, (long)M, (long)s.K,
                      (long)s.N);
        std::printf("%-34s %8.3f %10.1f %8.1f%% %8.1f%%\n", label, sec * 1e3, gf,
                    100 * gf / nominal, 100 * gf / measured);
      }
    }
    // Attention over batch x heads: QK^T then PV, 32 sentences of 30 tokens.
    const int64_t B = 32, T = 30, dk = m.D / m.H, D = m.D;
    Tensor q(Shape{B * T, 3 * D}), p(Shape{B, m.H, T, T}), ctx(Shape{B * T, D});
    fill(q);
    const double sec = time_it([&] {
      ops::bmm(ops::heads(q, B, T, m.H, dk, 0), ops::transposed(ops::heads(q, B, T, m.H, dk, D)), p,
               1.f / std::sqrt(float(dk)));
      ops::softmax(p, p);
      Tensor c4 = ops::heads(ctx, B, T, m.H, dk, 0);
      ops::bmm(p, ops::heads(q, B, T, m.H, dk, 2 * D), c4);
    });
    const double gf = 2.0 * 2 * B * m.H * T * T * dk / sec / 1e9;
    char label[64];
    std::snprintf(label, sizeof label, "%s attention %ldx%ldh T=%ld", m.name, (long)B, (long)m.H,
                  (long)T);
    std::printf("%-34s %8.3f %10.1f %8.1f%% %8.1f%%\n", label, sec * 1e3, gf, 100 * gf / nominal,
                100 * gf / measured);
  }
  std::printf("peak memory %.0f MiB\n", bench::peak_rss_mib());
}
