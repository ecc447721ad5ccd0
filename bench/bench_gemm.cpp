// GEMM and attention throughput at the shapes of transformer-small and
// transformer-base, against this machine's FP32 peak, and a linear layer's
// training backward pass in f32 and bf16 (against the bf16 dot-product peak
// for bf16), the FFN's second product while decoding, dense against
// reading only its non-zero inputs, products against frozen weights in f32
// and int8 at decoding's row counts, and a decoding step's attention. Run:
//   build/bench/bench_gemm [threads]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "bench_common.h"
#include "core/backend.h"
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

// W (N, K) and its bias as a loaded model's Linear layer reads them,
// prepared for products in ct.
ops::Weight prepared(const Tensor& w, const Tensor& bias, const PreparedWeight* p,
                     ComputeType ct) {
  ops::Weight o;
  o.out = w.dim(0), o.in = w.dim(1), o.value = &w, o.bias = &bias, o.prepared = p, o.compute = ct;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::Args args = bench::check_args(
      argc, argv,
      "GEMM and attention throughput at transformer-small's and "
      "transformer-base's shapes, and a linear layer's backward in f32 and bf16.\n"
      "  bench_gemm [threads]   (default 2)\n",
      {}, {}, 1);
  const int threads = args.positional.empty() ? 2 : static_cast<int>(args.positional[0]);
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
        ops::Weight wt;
        wt.out = s.N, wt.in = s.K, wt.value = &w, wt.bias = &bias;
        const double sec = time_it(
            [&] { ops::linear(a, wt, c, s.relu ? Activation::Relu : Activation::None); });
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
  // The FFN's second product while decoding: frozen weights, 88 rows (a
  // decoding step of the Multi30k transformer-small averages 76-89), hidden
  // units zero at the shares measured in trained models (92% small, 84% a
  // 25-minute base), dense against the product that reads only the
  // non-zeros (WeightSource::sparse_input). The backend takes it only for weights
  // up to numerics' sparse size (printed above, cpu/numerics.cpp's
  // kSparseTable), and runs dense otherwise: NMT_NUMERICS=sparse=64M
  // bench_gemm runs every "sparse" row sparse, the measurement that table
  // is made from. GFLOP/s count the dense product's multiply-adds, so the
  // sparse rows show what it is worth.
  std::printf("\n%-34s %8s %10s %9s\n", "decoding ffn2 (M x K -> N, zeros)", "ms", "GFLOP/s",
              "%measured");
  for (auto [name, K, N, zeros] :
       {std::tuple<const char*, int64_t, int64_t, double>{"small", 1024, 256, 0.92},
        {"small", 1024, 256, 0.84},
        {"1 MiB", 512, 512, 0.84},
        {"2 MiB", 2048, 256, 0.84},
        {"2 MiB", 1024, 512, 0.84},
        {"base", 2048, 512, 0.84},
        {"base", 2048, 512, 0.92}}) {
    const int64_t M = 88;
    Tensor a(Shape{M, K}), w(Shape{N, K}), bias(Shape{N}), c(Shape{M, N});
    fill(a), fill(w), fill(bias);
    std::mt19937 g(7);
    std::uniform_real_distribution<double> u(0, 1);
    for (int64_t i = 0; i < a.numel(); ++i)
      a.data()[i] = u(g) < zeros ? 0.f : std::fabs(a.data()[i]);
    for (bool sparse : {false, true}) {
      const auto keep = ops::prepare_weight(w, nullptr, ComputeType::F32, sparse);
      const ops::Weight wt = prepared(w, bias, keep.get(), ComputeType::F32);
      const double sec = time_it([&] { ops::linear(a, wt, c); });
      const double gf = 2.0 * M * K * N / sec / 1e9;
      char label[64];
      std::snprintf(label, sizeof label, "%s %s %ldx%ld->%ld %.0f%%", name,
                    sparse ? "sparse" : "dense", (long)M, (long)K, (long)N, 100 * zeros);
      std::printf("%-34s %8.3f %10.1f %8.1f%%\n", label, sec * 1e3, gf, 100 * gf / measured);
    }
  }
  // Products against a loaded model's prepared weights (as translation
  // runs them), f32 and int8, at the row counts of decoding (1: greedy,
  // batch 1; 8: a beam of 4 over 2 sentences; 88: a Multi30k
  // transformer-small step's average) and of encoding (256), with a bias.
  // Which kernels run them depends on the CPU (nmt --version says).
  std::printf("\n%-34s %8s %10s %8s %10s\n", "against weights (M x K -> N)", "f32 ms", "GFLOP/s",
              "int8 ms", "GOP/s");
  for (auto [name, K, N] : {std::tuple<const char*, int64_t, int64_t>{"small qkv", 256, 768},
                            {"small ffn2", 1024, 256},
                            {"small output", 256, 8000},
                            {"base ffn1", 512, 2048},
                            {"base output", 512, 32000}})
    for (int64_t M : {1, 8, 88, 256}) {
      Tensor a(Shape{M, K}), w(Shape{N, K}), bias(Shape{N}), c(Shape{M, N});
      fill(a), fill(w), fill(bias);
      double sec[2];
      for (ComputeType ct : {ComputeType::F32, ComputeType::INT8}) {
        const auto keep = ops::prepare_weight(w, nullptr, ct, false);
        const ops::Weight wt = prepared(w, bias, keep.get(), ct);
        sec[ct == ComputeType::INT8] = time_it([&] { ops::linear(a, wt, c); });
      }
      char label[64];
      std::snprintf(label, sizeof label, "%s %ldx%ld->%ld", name, (long)M, (long)K, (long)N);
      const double ops = 2.0 * M * K * N / 1e9;
      std::printf("%-34s %8.3f %10.1f %8.3f %10.1f\n", label, sec[0] * 1e3, ops / sec[0],
                  sec[1] * 1e3, ops / sec[1]);
    }
  // Attention in a decoding step, from cached keys and values laid out as
  // decoding keeps them (a cache of 64 positions per row, heads side by
  // side): self-attention of 88 rows (a Multi30k step's average) over 13
  // positions, and cross-attention of 22 sentences' 4 beam rows over 19
  // source positions. GB/s: the keys and values read, which is what bounds
  // it once they leave the L2 cache.
  std::printf("\n%-34s %8s %10s\n", "decoding attention (rows x heads)", "us", "GB/s k,v");
  for (auto [name, H, dk] :
       {std::tuple<const char*, int64_t, int64_t>{"small", 4, 64}, {"base", 8, 64}}) {
    const int64_t W = H * dk, cap = 64;
    for (bool cross : {false, true}) {
      const int64_t B = cross ? 22 : 88, M = cross ? 4 : 1, L = cross ? 19 : 13;
      Tensor q(Shape{B * M, W}), kc(Shape{B * cap, W}), vc(Shape{B * cap, W}), mask(Shape{B, L});
      Tensor ctx(Shape{B * M, W});
      fill(q), fill(kc), fill(vc), mask.zero();
      const Tensor qv = q.strided(Shape{B, H, M, dk}, {M * W, dk, W, 1});
      const Tensor kv = kc.strided(Shape{B, H, L, dk}, {cap * W, dk, W, 1});
      const Tensor vv = vc.strided(Shape{B, H, L, dk}, {cap * W, dk, W, 1});
      Tensor cv = ctx.strided(Shape{B, H, M, dk}, {M * W, dk, W, 1});
      const Tensor m4 = mask.strided(Shape{B, 1, 1, L}, {L, 0, 0, 1});
      const double sec = time_it([&] { ops::attend(qv, kv, vv, &m4, 0.125f, cv); });
      char label[64];
      std::snprintf(label, sizeof label, "%s %s %ldx%ldh, %ld keys", name, cross ? "cross" : "self",
                    (long)(B * M), (long)H, (long)L);
      std::printf("%-34s %8.1f %10.1f\n", label, sec * 1e6, 2.0 * B * H * L * dk * 4 / sec / 1e9);
    }
  }
  // A linear layer's training backward pass over a 4096-token batch (dx, dW
  // and, with a bias, db): one ops::linear_backward call against the two
  // products and the column sums it replaces, which in bf16 round dy twice.
  // Alternated, the best of three of each.
  const double bf16_peak = bench::measured_bf16_peak_gflops(threads);
  if (bf16_peak > 0)
    std::printf("\nmeasured bf16 dot-product peak %.1f GFLOP/s (AVX512-BF16 vdpbf16ps)\n",
                bf16_peak);
  std::printf("\n%-34s %8s %10s %9s %9s %10s\n", "backward dx,dW(,db) (M x in -> out)", "ms",
              "GFLOP/s", "%FMA", "%bf16dot", "ms apart");
  struct Back {
    const char* name;
    int64_t in, out;
    bool bias;
  };
  for (ComputeType ct : {ComputeType::F32, ComputeType::BF16}) {
    if (!backend(Device::CPU).unsupported(Op::Gemm, ct).empty()) {
      std::printf("%s: %s\n", compute_type_name(ct),
                  backend(Device::CPU).unsupported(Op::Gemm, ct).c_str());
      continue;
    }
    for (Back s : {Back{"small ffn1", 256, 1024, true}, Back{"small ffn2", 1024, 256, true},
                   Back{"small output", 256, 8000, false}, Back{"base ffn1", 512, 2048, true}}) {
      const int64_t M = 4096;
      Tensor x(Shape{M, s.in}), dy(Shape{M, s.out}), w(Shape{s.out, s.in}), dx(Shape{M, s.in});
      Tensor dw(Shape{s.out, s.in}), db(Shape{s.out});
      fill(x), fill(dy), fill(w), dw.zero(), db.zero();
      Tensor* dbp = s.bias ? &db : nullptr;
      auto fused = [&] { ops::linear_backward(x, dy, w, &dx, false, dw, dbp, ct); };
      auto apart = [&] {
        ops::MatmulOpts o;
        o.compute = ct;
        ops::matmul(dy, false, w, false, dx, o);
        o.accumulate = true;
        ops::matmul(dy, true, x, false, dw, o);
        if (dbp) ops::add_column_sums(dy, db);
      };
      double t_fused = 1e30, t_apart = 1e30;
      for (int r = 0; r < 3; ++r) {
        t_fused = std::min(t_fused, time_it(fused, 0.3));
        t_apart = std::min(t_apart, time_it(apart, 0.3));
      }
      const double gf = 4.0 * M * s.in * s.out / t_fused / 1e9;
      char label[64];
      std::snprintf(label, sizeof label, "%s %s %ldx%ld->%ld", compute_type_name(ct), s.name,
                    (long)M, (long)s.in, (long)s.out);
      // bf16 products run on AMX tiles where the CPU has them, which can pass
      // both the FMA and the bf16 dot-product peaks.
      char dot[16] = "-";
      if (ct == ComputeType::BF16 && bf16_peak > 0)
        std::snprintf(dot, sizeof dot, "%.1f%%", 100 * gf / bf16_peak);
      std::printf("%-34s %8.3f %10.1f %8.1f%% %9s %10.3f\n", label, t_fused * 1e3, gf,
                  100 * gf / measured, dot, t_apart * 1e3);
    }
  }
  std::printf("peak memory %.0f MiB\n", bench::peak_rss_mib());
}
