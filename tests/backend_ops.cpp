// The backend parity harness, after ggml's test-backend-ops: every op of the
// ops tier, at several shapes (edge cases included), on one device, against
// naive reference loops in double precision, forward and backward, with a
// tolerance per dtype. The device is the first argument:
//
//   nmt_backend_ops cpu   (always)
//   nmt_backend_ops cuda  (exits 77, which ctest reports as skipped, where
//                          the build has no CUDA or the machine no GPU)
//
// Cases in a reduced compute type are tagged [bf16] or [int8] and run apart,
// "nmt_backend_ops DEVICE --needs bf16 [bf16]", which exits 77 where the
// device cannot compute in that type (see capability.h); ctest runs each
// device's other cases with "~[bf16]~[int8]".
//
// Inputs live on the host; each op runs on copies placed on the device, and
// its results come back to the host for comparison. A backend added later
// runs the same cases unchanged.
#define CATCH_CONFIG_RUNNER
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "capability.h"
#include "core/backend.h"
#include "core/device.h"
#include "core/memory.h"
#include "core/rng.h"
#include "ops/ops.h"

using namespace nmt;
using nmt::test::require_compute;

namespace {

Device g_device = Device::CPU;

// Relative tolerance of an op's result, by dtype: f32 arithmetic against a
// double reference.
double tolerance(DType t) {
  switch (t) {
    case DType::F32:
      return 2e-5;
    case DType::BF16:
      return 1e-2;
    case DType::F16:
      return 2e-3;
    default:
      return 0;
  }
}
// The dtypes every op is checked in today; reduced precisions join here.
const std::vector<DType> kDtypes = {DType::F32};

std::vector<float> randv(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// A device tensor holding host values (f32 or i32).
Tensor dev(const std::vector<float>& v, Shape s) {
  Tensor t(s, g_device);
  ops::upload(v.data(), t);
  return t;
}

// W (N, K) prepared for products in ct (as a loaded model's Linear layers
// are), with its bias: the weight ops::linear reads. `keep` owns the
// prepared form.
ops::Weight prepared(const Tensor& w, const Tensor* bias, std::shared_ptr<PreparedWeight>& keep,
                     ComputeType ct = ComputeType::F32, const Tensor* scales = nullptr,
                     bool sparse_input = false) {
  keep = ops::prepare_weight(w, scales, ct, sparse_input, std::move(keep));
  ops::Weight o;
  o.out = w.dim(0), o.in = w.dim(1);
  o.value = &w, o.scales = scales, o.bias = bias;
  o.prepared = keep.get();
  o.compute = ct;
  return o;
}
Tensor dev_ids(const std::vector<int32_t>& v, Shape s) {
  Tensor t(s, g_device, DType::I32);
  ops::upload(v.data(), t);
  return t;
}
std::vector<float> host(const Tensor& t) {
  std::vector<float> v(t.numel());
  backend(t.device()).to_host(v.data(), t.raw(), t.bytes());
  return v;
}

// ||a - ref|| / ||ref|| (where ref is all zeros: ||a - ref||), which NaN
// never passes.
void expect_close(const std::vector<float>& a, const std::vector<double>& ref, double tol,
                  const std::string& what) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    diff += (a[i] - ref[i]) * (a[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  const double rel = std::sqrt(diff) / (norm > 0 ? std::sqrt(norm) : 1.0);
  INFO(what << ": relative error " << rel << " (tolerance " << tol << ")");
  CHECK(rel <= tol);
}

// Whether the device runs these ops (in ct): the capability query. One it
// lacks is reported as not supported, and the case runs nothing more,
// instead of failing on the backend's "no kernel" error.
bool runs(std::initializer_list<Op> ops, ComputeType ct = ComputeType::F32) {
  bool all = true;
  for (Op op : ops) {
    const std::string why = backend(g_device).unsupported(op, ct);
    if (why.empty()) continue;
    WARN("not supported on " << device_name(g_device) << ": " << op_name(op) << " in "
                             << compute_type_name(ct) << " (" << why << ")");
    all = false;
  }
  return all;
}

struct Mm {
  int64_t M, K, N;
};

// A (rows, cols) row-major matrix as op() needs it stored: transposed, (cols, rows).
std::vector<float> stored(const std::vector<float>& x, int64_t rows, int64_t cols, bool trans) {
  if (!trans) return x;
  std::vector<float> t(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = x[i * cols + j];
  return t;
}

// The activations as their definitions say, in double.
double act_reference(Activation a, double x) {
  switch (a) {
    case Activation::Relu:
      return x > 0 ? x : 0;
    case Activation::Swish:
      return x / (1 + std::exp(-x));
    case Activation::Gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Activation::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::None:
      break;
  }
  return x;
}

constexpr Activation kActivations[] = {Activation::Relu, Activation::Swish, Activation::Gelu,
                                       Activation::GeluTanh};

// act(alpha A B (+ bias)) (+ C0), in double.
std::vector<double> gemm_reference(const std::vector<float>& A, const std::vector<float>& B,
                                   const std::vector<float>& bias, const std::vector<float>& C0,
                                   Mm s, float alpha, bool with_bias, Activation act, bool acc) {
  std::vector<double> ref(s.M * s.N);
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double r = 0;
      for (int64_t k = 0; k < s.K; ++k) r += double(A[i * s.K + k]) * B[k * s.N + j];
      r *= alpha;
      if (with_bias) r += bias[j];
      r = act_reference(act, r);
      if (acc) r += C0[i * s.N + j];
      ref[i * s.N + j] = r;
    }
  return ref;
}

}  // namespace

TEST_CASE("matmul: plain, transposed, bias, activations, alpha, accumulate, constant weights",
          "[ops][gemm]") {
  if (!runs({Op::Gemm})) return;
  for (DType dt : kDtypes)
    for (Mm s : {Mm{1, 1, 1}, Mm{7, 5, 3}, Mm{33, 64, 17}, Mm{128, 96, 200}, Mm{1, 256, 512}})
      for (int variant = 0; variant < 11; ++variant) {
        // 6: the weights prepared once (a loaded model's), b transposed. 4, 7-9: each activation
        // epilogue, 7-9 after a bias. 10: a bias and an activation on a
        // product that is added to what c holds (the epilogue applies to the
        // product only; alpha stays 1 with a bias).
        const bool ta = variant == 1, tb = variant == 2 || variant == 6,
                   bias = variant == 3 || variant >= 7, acc = variant == 5 || variant == 10,
                   constant = variant == 6;
        const Activation act = variant == 4                    ? Activation::Relu
                               : variant >= 7 && variant <= 9 ? kActivations[variant - 6]
                               : variant == 10                ? Activation::Relu
                                                              : Activation::None;
        const float alpha = variant == 5 ? 0.5f : 1.f;
        auto A = randv(s.M * s.K, 1), Bm = randv(s.K * s.N, 2), bv = randv(s.N, 3),
             C0 = randv(s.M * s.N, 4);
        Tensor a = dev(stored(A, s.M, s.K, ta), ta ? Shape{s.K, s.M} : Shape{s.M, s.K});
        Tensor b = dev(stored(Bm, s.K, s.N, tb), tb ? Shape{s.N, s.K} : Shape{s.K, s.N});
        Tensor bt = dev(bv, Shape{s.N});
        Tensor c = dev(C0, Shape{s.M, s.N});
        ops::MatmulOpts o;
        o.alpha = alpha;
        o.bias = bias ? &bt : nullptr;
        o.act = act;
        o.accumulate = acc;
        if (constant) {
          std::shared_ptr<PreparedWeight> keep;
          ops::linear(a, prepared(b, nullptr, keep), c, act);
        } else {
          ops::matmul(a, ta, b, tb, c, o);
        }
        const auto ref = gemm_reference(A, Bm, bv, C0, s, alpha, bias, act, acc);
        expect_close(host(c), ref, tolerance(dt),
                     "matmul " + std::to_string(s.M) + "x" + std::to_string(s.K) + "x" +
                         std::to_string(s.N) + " variant " + std::to_string(variant));
      }
}

namespace {

// The weights path splits rows into pieces (256-row chunks and tails) and
// may pick a packed layout per shape: each row count exercises another mix.
void check_weights_matmul(ComputeType ct, int64_t K = 96, int64_t N = 80) {
  require_compute(g_device, ct);
  auto W = randv(N * K, 2), bv = randv(N, 3);
  Tensor w = dev(W, Shape{N, K}), bt = dev(bv, Shape{N});
  // bf16 keeps 8 mantissa bits of each operand; int8 quantises the weights
  // per output channel and the activations per call.
  const double tol = ct == ComputeType::F32    ? tolerance(DType::F32)
                     : ct == ComputeType::BF16 ? 1e-2
                                               : 2e-2;
  std::shared_ptr<PreparedWeight> keep;
  const ops::Weight pw = prepared(w, &bt, keep, ct);
  ops::Weight plain = pw;
  plain.bias = nullptr;
  for (int64_t M : {1, 5, 17, 33, 40, 300, 600})
    for (int variant = 0; variant < 6; ++variant) {
      // 0 plain, 1 bias, 2-5 bias and each activation.
      const bool bias = variant >= 1;
      const Activation act = variant >= 2 ? kActivations[variant - 2] : Activation::None;
      auto A = randv(M * K, 10 + M);
      Tensor a = dev(A, Shape{M, K}), c(Shape{M, N}, g_device);
      ops::linear(a, bias ? pw : plain, c, act);
      const auto ref =
          gemm_reference(A, stored(W, N, K, true), bv, {}, Mm{M, K, N}, 1.f, bias, act, false);
      expect_close(host(c), ref, tol,
                   std::string(compute_type_name(ct)) + " M=" + std::to_string(M) + " variant " +
                       std::to_string(variant));
    }
}

}  // namespace

TEST_CASE("matmul with constant weights in f32, over row counts", "[ops][gemm]") {
  if (!runs({Op::Gemm})) return;
  check_weights_matmul(ComputeType::F32);
}
TEST_CASE("matmul with constant weights in bf16, over row counts", "[ops][gemm][bf16]") {
  check_weights_matmul(ComputeType::BF16);
}
TEST_CASE("matmul with constant weights in int8, over row counts", "[ops][gemm][int8]") {
  check_weights_matmul(ComputeType::INT8);
  // Columns past a block of 64 and a depth that is no multiple of 4: the
  // CPU packs s8 weights itself around oneDNN's reorder, and sums each
  // column's compensation (weights_gemm.cpp, reorder_s8).
  check_weights_matmul(ComputeType::INT8, 90, 200);
}

TEST_CASE("matmul with constant weights on mostly-zero rows (a ReLU's output), f32",
          "[ops][gemm]") {
  if (!runs({Op::Gemm})) return;
  // WeightSource::sparse_input: rows with a tenth of their elements non-zero, plus
  // an all-zero row and a dense one, against the double reference. Widths
  // cover a whole 256-column block, 16-column pieces and single columns;
  // K both a multiple of 16 and not.
  for (auto [K, N] : {std::array<int64_t, 2>{1024, 256}, {100, 80}, {64, 300}})
    for (int variant = 0; variant < 3; ++variant) {  // plain, bias, bias and ReLU
      const int64_t M = 80;  // 80 x 1024 x 256 is threaded (weights_gemm.cpp)
      auto W = randv(N * K, 31), bv = randv(N, 32);
      auto A = randv(M * K, 33);
      std::mt19937 g(34);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k)
          if (i == 0 || (i != 1 && g() % 10 != 0)) A[i * K + k] = 0.f;  // row 1 stays dense
      Tensor w = dev(W, Shape{N, K}), bt = dev(bv, Shape{N});
      std::shared_ptr<PreparedWeight> keep;
      const ops::Weight pw = prepared(w, variant >= 1 ? &bt : nullptr, keep, ComputeType::F32,
                                      nullptr, /*sparse_input=*/true);
      const Activation act = variant == 2 ? Activation::Relu : Activation::None;
      Tensor a = dev(A, Shape{M, K}), c(Shape{M, N}, g_device);
      ops::linear(a, pw, c, act);
      const auto ref = gemm_reference(A, stored(W, N, K, true), bv, {}, Mm{M, K, N}, 1.f,
                                      pw.bias != nullptr, act, false);
      const auto all = host(c);
      expect_close(all, ref, tolerance(DType::F32),
                   "K=" + std::to_string(K) + " N=" + std::to_string(N) + " variant " +
                       std::to_string(variant));
      if (g_device == Device::CPU) {
        // The CPU multiplies row by row: the same numbers for rows 5-8
        // alone and on one thread as in the batch of 80 (on every thread
        // for the first shape, whose product is large enough to split).
        const int before = ops::num_threads();
        ops::set_num_threads(1);
        Tensor part = dev(std::vector<float>(A.begin() + 5 * K, A.begin() + 9 * K), Shape{4, K});
        Tensor cp(Shape{4, N}, g_device);
        ops::linear(part, pw, cp, act);
        ops::set_num_threads(before);
        const auto h = host(cp);
        for (int64_t i = 0; i < 4 * N; ++i) REQUIRE(h[i] == all[5 * N + i]);
      }
    }
}

TEST_CASE("f32 products against weights: a row's result is the same in any batch",
          "[ops][gemm][rows]") {
  if (!runs({Op::Gemm})) return;
  // Translations and scores must not depend on what shares a sentence's
  // batch: each row of 40, multiplied alone and inside batches of other
  // sizes and at other places (tails of 1-5 rows, blocks of 6, several
  // column tasks), bit for bit, with a bias and ReLU. Depths and widths
  // off the kernels' blocks; 40 x 512 x 512 is threaded on 2 threads.
  // (oneDNN's AVX2 gemm failed this at every shape: its kernels for 1, 2-3
  // and 4 or more rows sum in different orders.)
  const int before = ops::num_threads();
  for (auto [K, N] : {std::array<int64_t, 2>{32, 300}, {37, 45}, {130, 200}, {512, 512}})
    for (int threads : {1, 2}) {
      ops::set_num_threads(threads);
      const int64_t R = 40;
      auto W = randv(N * K, 41), A = randv(R * K, 42), bv = randv(N, 43);
      Tensor w = dev(W, Shape{N, K}), bt = dev(bv, Shape{N});
      std::shared_ptr<PreparedWeight> keep;
      const ops::Weight pw = prepared(w, &bt, keep);
      auto product = [&](int64_t first, int64_t rows) {
        Tensor a = dev(std::vector<float>(A.begin() + first * K, A.begin() + (first + rows) * K),
                       Shape{rows, K});
        Tensor c(Shape{rows, N}, g_device);
        ops::linear(a, pw, c, Activation::Relu);
        return host(c);
      };
      std::vector<std::vector<float>> alone(R);
      for (int64_t i = 0; i < R; ++i) alone[i] = product(i, 1);
      // (first row, rows) of each batch
      const int64_t batches[][2] = {{0, 40}, {0, 2},   {1, 3},  {3, 5}, {5, 6},
                                    {7, 7},  {11, 13}, {2, 31}, {9, 17}};
      for (const auto& [first, rows] : batches) {
        const auto got = product(first, rows);
        for (int64_t i = 0; i < rows; ++i) {
          INFO("K=" << K << " N=" << N << " threads " << threads << ": row " << first + i
                    << " as row " << i << " of " << rows);
          REQUIRE(std::memcmp(got.data() + i * N, alone[first + i].data(), N * sizeof(float)) == 0);
        }
      }
    }
  ops::set_num_threads(before);
}

// Resident bytes of this process (/proc/self/statm), or -1 where unreadable.
int64_t resident_now() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, pages = -1;
  const int got = std::fscanf(f, "%ld %ld", &size, &pages);
  std::fclose(f);
  return got == 2 ? static_cast<int64_t>(pages) * sysconf(_SC_PAGESIZE) : -1;
}

// [cpu]: cases about the CPU's own memory, left out of the other devices'
// runs (tests/CMakeLists.txt); run on another device they fail.
TEST_CASE("prepared weights give their memory back when they are dropped", "[ops][gemm][cpu]") {
  // A shortlisted translation prepares each batch's output weights anew and
  // drops the last batch's. Weight after weight of 16 MB must not leave
  // the copies' pages resident (from the heap, once glibc had raised its
  // mmap threshold past their size, they stayed).
  REQUIRE(g_device == Device::CPU);
  REQUIRE(resident_now() >= 0);  // read from /proc
  const int64_t K = 1024, N = 4096, M = 8;
  Tensor w = dev(randv(N * K, 41), Shape{N, K}), a = dev(randv(M * K, 42), Shape{M, K});
  Tensor c(Shape{M, N}, g_device);
  int64_t base = 0;
  std::shared_ptr<PreparedWeight> keep;
  for (int round = 0; round < 4; ++round) {
    keep.reset();  // dropped, not reused
    ops::linear(a, prepared(w, nullptr, keep), c);
    if (round == 0) base = resident_now();
  }
  const int64_t grown = resident_now() - base;
  INFO("resident memory grew by " << grown << " bytes over three more 16 MB weights");
  CHECK(grown < (int64_t{8} << 20));
}

TEST_CASE("a tensor that grows keeps the pages it had", "[ops][memory][cpu]") {
  // A decoding state's caches grow as a file's batches widen. On the CPU a
  // block of a megabyte and more moves its pages into the larger block
  // (mremap), where a new allocation would fault every page in again.
  REQUIRE(g_device == Device::CPU);
  REQUIRE(resident_bytes(&g_device, 1) >= 0);  // mincore
  const int64_t n = int64_t{1} << 20;  // 4 MB of floats
  Tensor t(Shape{n}, Device::CPU);
  t.zero();  // every page touched (a new block reads as zeros untouched)
  const size_t had = static_cast<size_t>(n) * sizeof(float);
  REQUIRE(resident_bytes(t.raw(), had) == static_cast<int64_t>(had));
  t.resize(Shape{3 * n});  // past its capacity: a larger block
  CHECK(resident_bytes(t.raw(), had) == static_cast<int64_t>(had));
  CHECK(resident_bytes(static_cast<char*>(t.raw()) + had, 2 * had) == 0);
}

namespace {

// /proc/self/smaps's THPeligible for the mapping holding p: 1 or 0, or -1
// where it cannot be read.
int thp_eligible(const void* p) {
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  const auto a = reinterpret_cast<uintptr_t>(p);
  char line[512];
  bool inside = false;
  int result = -1;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, ':') != line) {
      inside = a >= lo && a < hi;
      continue;
    }
    int v = 0;
    if (inside && std::sscanf(line, "THPeligible: %d", &v) == 1) {
      result = v;
      break;
    }
  }
  std::fclose(f);
  return result;
}

}  // namespace

// [thp]: its own ctest entry, run with --needs thp (skipped elsewhere).
TEST_CASE("a tensor made zeroed of 2 MB and more may take huge pages; a grown one may not",
          "[ops][memory][cpu][thp]") {
  // A model's parameters are made zeroed and then filled whole: huge pages
  // there fault once per 2 MB. A decoding cache grows as it is used: huge
  // pages there would hold memory never touched.
  REQUIRE(g_device == Device::CPU);
  REQUIRE(nmt::test::thp_mode() == "madvise");
  REQUIRE(thp_eligible(&g_device) >= 0);               // smaps
  Tensor whole(Shape{int64_t{1} << 20}, Device::CPU);  // 4 MB, zeroed
  CHECK(thp_eligible(whole.raw()) == 1);
  Tensor grown;
  grown.resize(Shape{int64_t{1} << 20}, Device::CPU);  // never zeroed whole
  grown.resize(Shape{int64_t{3} << 20});
  CHECK(thp_eligible(grown.raw()) == 0);
}

TEST_CASE("a prepared weight that reuses the last one's memory reads as a new one",
          "[ops][gemm]") {
  if (!runs({Op::Gemm})) return;
  // A shortlist's rows are prepared anew for every batch, in the memory of
  // the last batch's (weights_pack.cpp). The next weights must not see the
  // last ones' values where their layout pads: the last weights here are
  // NaN, so any byte of them read into the product shows.
  const int64_t K = 301, N = 1003, M = 37;  // 1.2 MB of f32, padded both ways
  auto W = randv(N * K, 51), A = randv(M * K, 52);
  std::vector<float> nan_w(N * K, NAN);
  Tensor a = dev(A, Shape{M, K}), c(Shape{M, N}, g_device);
  for (ComputeType ct : {ComputeType::F32, ComputeType::BF16, ComputeType::INT8}) {
    if (!backend(g_device).unsupported(Op::Gemm, ct).empty()) continue;
    std::shared_ptr<PreparedWeight> keep;
    for (int round = 0; round < 3; ++round) {
      Tensor w = dev(round == 1 ? W : nan_w, Shape{N, K});
      ops::linear(a, prepared(w, nullptr, keep, ct), c);
      if (round != 1) continue;
      const auto ref = gemm_reference(A, stored(W, N, K, true), {}, {}, Mm{M, K, N}, 1.f, false,
                                      Activation::None, false);
      expect_close(host(c), ref, ct == ComputeType::F32 ? tolerance(DType::F32) : 3e-2,
                   std::string("after NaN weights, ") + compute_type_name(ct));
    }
  }
}

TEST_CASE("one prepared weight read by several threads at once, while each prepares its own",
          "[ops][gemm][cpu]") {
  // Translation workers share the model's prepared weights, and each
  // prepares its batch's output weights anew while the others run. Here
  // four threads multiply by one shared weight at four row counts, and each
  // prepares a weight of its own twelve times over: every product equals
  // the same product made alone.
  REQUIRE(g_device == Device::CPU);
  const int64_t K = 256, N = 384;
  const std::vector<int64_t> rows = {3, 8, 17, 40};
  for (ComputeType ct : {ComputeType::F32, ComputeType::INT8}) {
    const auto W = randv(N * K, 61);
    const int threads_before = ops::num_threads();
    ops::set_num_threads(1);  // as each worker runs
    Tensor shared = dev(W, Shape{N, K});
    std::shared_ptr<PreparedWeight> shared_keep;
    const ops::Weight sw = prepared(shared, nullptr, shared_keep, ct);
    std::vector<std::vector<float>> A, ref;
    for (size_t i = 0; i < rows.size(); ++i) {
      A.push_back(randv(rows[i] * K, 62 + static_cast<uint32_t>(i)));
      Tensor a = dev(A[i], Shape{rows[i], K}), c(Shape{rows[i], N}, g_device);
      ops::linear(a, sw, c);
      ref.push_back(host(c));
    }
    std::atomic<int> wrong{0}, failed{0};
    std::vector<std::thread> workers;
    for (size_t i = 0; i < rows.size(); ++i)
      workers.emplace_back([&, i] {
        try {
          ops::set_num_threads(1);
          Tensor a = dev(A[i], Shape{rows[i], K}), own = dev(W, Shape{N, K});
          Tensor c(Shape{rows[i], N}, g_device);
          std::shared_ptr<PreparedWeight> keep;
          for (int round = 0; round < 12; ++round) {
            ops::linear(a, sw, c);
            wrong += host(c) != ref[i];
            ops::linear(a, prepared(own, nullptr, keep, ct), c);
            wrong += host(c) != ref[i];
          }
        } catch (const std::exception&) {
          ++failed;
        }
      });
    for (auto& t : workers) t.join();
    ops::set_num_threads(threads_before);
    INFO(compute_type_name(ct));
    CHECK(failed == 0);
    CHECK(wrong == 0);
  }
}

TEST_CASE("int8 products of a row do not depend on the other rows of the batch",
          "[ops][gemm][int8]") {
  require_compute(g_device, ComputeType::INT8);
  // Each row gets its own activation scale: a row a hundred times larger
  // joining the batch changes nothing in the others (s32 sums are exact).
  // On AMX, rows are cut at multiples of 16, so the batches of 17 and 33
  // rows are cut elsewhere with the extra rows.
  const int64_t K = 64, N = 48, more = 7;
  auto W = randv(N * K, 7), bv = randv(N, 8);
  Tensor w = dev(W, Shape{N, K}), bt = dev(bv, Shape{N});
  std::shared_ptr<PreparedWeight> keep;
  const ops::Weight pw = prepared(w, &bt, keep, ComputeType::INT8);
  for (int64_t n : {5, 17, 33}) {
    auto A = randv((n + more) * K, 9 + n);
    for (int64_t k = 0; k < K; ++k) A[(n + more - 1) * K + k] *= 100.f;
    Tensor alone = dev(std::vector<float>(A.begin(), A.begin() + n * K), Shape{n, K});
    Tensor with = dev(A, Shape{n + more, K}), c(Shape{n, N}, g_device),
           cw(Shape{n + more, N}, g_device);
    ops::linear(alone, pw, c, Activation::Relu);
    ops::linear(with, pw, cw, Activation::Relu);
    const auto h = host(c), hw = host(cw);
    for (int64_t i = 0; i < n * N; ++i) REQUIRE(h[i] == hw[i]);
  }
}

TEST_CASE("int8 products against weights sum the 8-bit weights and activations exactly",
          "[ops][gemm][int8][rows]") {
  require_compute(g_device, ComputeType::INT8);
  // s8 weights with their scales, and activations that are s8 values times
  // a row scale, so that quantising a row gives back its values: every
  // product must be row scale x column scale x the exact integer sum. The
  // values sit near +-127 with runs of one sign, where u8 x s8 pairs
  // (vpmaddubsw without VNNI) saturate 16 bits; weights cut to 7 bits to
  // avoid that are off by up to a 127th of a weight.
  const int64_t M = 7, K = 67, N = 40;
  std::mt19937 g(51);
  std::vector<int8_t> Wq(N * K);
  std::vector<int32_t> Aq(M * K);
  for (auto& v : Wq)
    v = static_cast<int8_t>((g() % 2 ? 1 : -1) * (100 + static_cast<int>(g() % 28)));
  for (int64_t n = 0; n < N; ++n) Wq[n * K] = 127;  // each row's maximum is 127
  for (int64_t k = 0; k < K; ++k) Wq[k] = static_cast<int8_t>(k % 3 ? 127 : -127);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      Aq[i * K + k] = k == 0 ? 127 : static_cast<int32_t>(g() % 255) - 127;
  std::vector<float> ws(N), rs(M), A(M * K), bv = randv(N, 52);
  for (int64_t n = 0; n < N; ++n) ws[n] = 0.001f * static_cast<float>(1 + n % 5);
  for (int64_t i = 0; i < M; ++i) {
    rs[i] = 0.25f * static_cast<float>(1 + i);  // powers of two and their small multiples
    for (int64_t k = 0; k < K; ++k)
      A[i * K + k] = static_cast<float>(Aq[i * K + k]) * rs[i];  // exact
  }
  Tensor w(Shape{N, K}, g_device, DType::S8), scales = dev(ws, Shape{N}), bt = dev(bv, Shape{N});
  ops::upload(Wq.data(), w);
  Tensor a = dev(A, Shape{M, K}), c(Shape{M, N}, g_device);
  std::shared_ptr<PreparedWeight> keep;
  ops::linear(a, prepared(w, &bt, keep, ComputeType::INT8, &scales), c);
  const auto got = host(c);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      int64_t sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += int64_t{Aq[i * K + k]} * Wq[n * K + k];
      // The row's scale as quantised: its maximum, 127 rs, over 127, is rs.
      const double want = static_cast<double>(rs[i]) * ws[n] * static_cast<double>(sum) + bv[n];
      INFO("row " << i << " column " << n << ": exact " << want << ", got " << got[i * N + n]);
      REQUIRE(std::fabs(got[i * N + n] - want) <= 1e-5 * (std::fabs(want) + 1));
    }
}

TEST_CASE("int8 products against weights are the same on one thread and on several",
          "[ops][gemm][int8]") {
  require_compute(g_device, ComputeType::INT8);
  // Small products run on the calling thread alone, large ones on all of
  // them (weights_gemm.cpp): either way each sum is exact, and the caller's
  // thread count is as it was after the call. 4 x 512 x 512 is below the
  // cut (on 2 threads it runs alone, as on 1), 64 x 512 x 1024 above it.
  const int before = ops::num_threads();
  for (auto [M, K, N] : {std::array<int64_t, 3>{4, 512, 512}, {64, 512, 1024}}) {
    auto W = randv(N * K, 21), A = randv(M * K, 22), bv = randv(N, 23);
    Tensor w = dev(W, Shape{N, K}), a = dev(A, Shape{M, K}), bt = dev(bv, Shape{N});
    std::shared_ptr<PreparedWeight> keep;
    const ops::Weight pw = prepared(w, &bt, keep, ComputeType::INT8);
    std::vector<std::vector<float>> out;
    for (int threads : {1, 2}) {
      ops::set_num_threads(threads);
      Tensor c(Shape{M, N}, g_device);
      ops::linear(a, pw, c);
      CHECK(ops::num_threads() == threads);
      out.push_back(host(c));
    }
    ops::set_num_threads(before);
    REQUIRE(out[0] == out[1]);
  }
}

TEST_CASE("matmul in bf16 on changing operands (mixed-precision training)", "[ops][gemm][bf16]") {
  require_compute(g_device, ComputeType::BF16);
  // 1100 rows: pieces of 1024 and 76 (64 + 12) rows; a sum over 1100 rows
  // padded to 1152.
  for (Mm s : {Mm{1, 7, 3}, Mm{33, 64, 17}, Mm{128, 96, 200}, Mm{300, 40, 1}, Mm{1100, 1100, 24}})
    for (int variant = 0; variant < 6; ++variant) {
      // 0 plain, 1 a transposed (dY^T X), 2 b transposed (x W^T), 3 bias and
      // ReLU, 4 accumulate with alpha, 5 both transposed.
      const bool ta = variant == 1 || variant == 5, tb = variant == 2 || variant == 5;
      const bool bias = variant == 3, acc = variant == 4;
      const Activation act = variant == 3 ? Activation::Relu : Activation::None;
      const float alpha = acc ? 0.5f : 1.f;
      auto A = randv(s.M * s.K, 1), Bm = randv(s.K * s.N, 2), bv = randv(s.N, 3),
           C0 = randv(s.M * s.N, 4);
      Tensor a = dev(stored(A, s.M, s.K, ta), ta ? Shape{s.K, s.M} : Shape{s.M, s.K});
      Tensor b = dev(stored(Bm, s.K, s.N, tb), tb ? Shape{s.N, s.K} : Shape{s.K, s.N});
      Tensor bt = dev(bv, Shape{s.N}), c = dev(C0, Shape{s.M, s.N});
      ops::MatmulOpts o;
      o.alpha = alpha;
      o.bias = bias ? &bt : nullptr;
      o.act = act;
      o.accumulate = acc;
      o.compute = ComputeType::BF16;
      ops::matmul(a, ta, b, tb, c, o);
      const auto ref = gemm_reference(A, Bm, bv, C0, s, alpha, bias, act, acc);
      expect_close(host(c), ref, 1e-2,
                   "bf16 " + std::to_string(s.M) + "x" + std::to_string(s.K) + "x" +
                       std::to_string(s.N) + " variant " + std::to_string(variant));
    }
}

namespace {

// A linear layer's backward pass (ops::linear_backward) against double
// loops: dx = dy W (or += it), dW += dy^T x, db += dy's column sums; over
// shapes on both sides of the parallel threshold and of a 64-column block.
// In bf16 it must also equal, bit for bit, the separate products and column
// sums it replaces (dy rounded once instead of once per product).
void check_linear_backward(ComputeType ct) {
  require_compute(g_device, ct);
  struct Lb {
    int64_t rows, in, out;
  };
  for (Lb s : {Lb{1, 5, 3}, Lb{7, 16, 70}, Lb{300, 96, 200}, Lb{520, 64, 130}, Lb{1100, 24, 40}})
    for (int variant = 0; variant < 4; ++variant) {
      // 0 dx and bias, 1 dx accumulated, no bias, 2 no dx, bias, 3 3-D x/dy.
      const bool with_dx = variant != 2, acc_dx = variant == 1, bias = variant != 1;
      auto X = randv(s.rows * s.in, 1), DY = randv(s.rows * s.out, 2), W = randv(s.out * s.in, 3),
           DX0 = randv(s.rows * s.in, 4), DW0 = randv(s.out * s.in, 5), DB0 = randv(s.out, 6);
      const bool three_d = variant == 3 && s.rows % 2 == 0 && s.rows > 1;
      Tensor x = dev(X, three_d ? Shape{2, s.rows / 2, s.in} : Shape{s.rows, s.in});
      Tensor dy = dev(DY, three_d ? Shape{2, s.rows / 2, s.out} : Shape{s.rows, s.out});
      Tensor w = dev(W, Shape{s.out, s.in}), dx = dev(DX0, Shape{s.rows, s.in});
      Tensor dw = dev(DW0, Shape{s.out, s.in}), db = dev(DB0, Shape{s.out});
      ops::linear_backward(x, dy, w, with_dx ? &dx : nullptr, acc_dx, dw, bias ? &db : nullptr, ct);
      std::vector<double> rdx(s.rows * s.in), rdw(s.out * s.in), rdb(s.out);
      for (int64_t i = 0; i < s.rows; ++i)
        for (int64_t k = 0; k < s.in; ++k) {
          double r = acc_dx ? DX0[i * s.in + k] : 0.;
          for (int64_t o = 0; o < s.out; ++o) r += double(DY[i * s.out + o]) * W[o * s.in + k];
          rdx[i * s.in + k] = r;
        }
      for (int64_t o = 0; o < s.out; ++o) {
        for (int64_t k = 0; k < s.in; ++k) {
          double r = DW0[o * s.in + k];
          for (int64_t i = 0; i < s.rows; ++i) r += double(DY[i * s.out + o]) * X[i * s.in + k];
          rdw[o * s.in + k] = r;
        }
        double r = DB0[o];
        for (int64_t i = 0; i < s.rows; ++i) r += DY[i * s.out + o];
        rdb[o] = r;
      }
      const double tol = ct == ComputeType::F32 ? tolerance(DType::F32) : 1e-2;
      const std::string what = std::string(compute_type_name(ct)) + " " + std::to_string(s.rows) +
                               "x" + std::to_string(s.in) + "->" + std::to_string(s.out) +
                               " variant " + std::to_string(variant);
      if (with_dx) expect_close(host(dx), rdx, tol, what + " dx");
      else CHECK(host(dx) == DX0);
      expect_close(host(dw), rdw, tol, what + " dW");
      // The bias gradient adds f32 values in either compute type.
      if (bias) expect_close(host(db), rdb, tolerance(DType::F32), what + " db");
      else CHECK(host(db) == DB0);

      // The same through separate products and column sums.
      Tensor x2 = dev(X, Shape{s.rows, s.in}), dy2 = dev(DY, Shape{s.rows, s.out});
      Tensor dx2 = dev(DX0, Shape{s.rows, s.in}), dw2 = dev(DW0, Shape{s.out, s.in}),
             db2 = dev(DB0, Shape{s.out});
      ops::MatmulOpts o;
      o.compute = ct;
      o.accumulate = acc_dx;
      if (with_dx) ops::matmul(dy2, false, w, false, dx2, o);
      o.accumulate = true;
      ops::matmul(dy2, true, x2, false, dw2, o);
      if (bias) ops::add_column_sums(dy2, db2);
      CHECK(host(dx) == host(dx2));
      CHECK(host(dw) == host(dw2));
      CHECK(host(db) == host(db2));
    }
}

}  // namespace

// bf16 storage: round to nearest even, and back.
uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

TEST_CASE("matmul of bf16 operands into an f32 result (a GPU's bf16 activations)",
          "[ops][gemm]") {
  if (!runs({Op::GemmBf16Operands})) {
    // Refused by name, never misread as f32.
    Tensor a(Shape{2, 3}, g_device, DType::BF16), b(Shape{3, 4}, g_device, DType::BF16), c;
    CHECK_THROWS_WITH(ops::matmul(a, false, b, false, c, ops::MatmulOpts()),
                      Catch::Contains("bf16 operands on " + std::string(device_name(g_device))));
    return;
  }
  for (Mm s : {Mm{1, 1, 1}, Mm{5, 7, 3}, Mm{33, 64, 48}})
    for (int variant = 0; variant < 3; ++variant) {
      const bool tb = variant == 1, acc = variant == 2;
      INFO("M " << s.M << " K " << s.K << " N " << s.N << " variant " << variant);
      auto A = randv(s.M * s.K, 41), B = randv(s.K * s.N, 42), C0 = randv(s.M * s.N, 43);
      for (auto& x : A) x = from_bf16(to_bf16(x));  // the values bf16 holds
      for (auto& x : B) x = from_bf16(to_bf16(x));
      auto bits = [](const std::vector<float>& v) {
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) h[i] = to_bf16(v[i]);
        return h;
      };
      const auto Bs = stored(B, s.K, s.N, tb);
      Tensor a(Shape{s.M, s.K}, g_device, DType::BF16),
          b(tb ? Shape{s.N, s.K} : Shape{s.K, s.N}, g_device, DType::BF16);
      ops::upload(bits(A).data(), a);
      ops::upload(bits(Bs).data(), b);
      Tensor c = dev(C0, Shape{s.M, s.N});
      ops::MatmulOpts o;
      o.accumulate = acc;
      ops::matmul(a, false, b, tb, c, o);
      // Products of bf16 values are exact in f32: only the sums round.
      expect_close(host(c), gemm_reference(A, B, {}, C0, s, 1.f, false, Activation::None, acc),
                   tolerance(DType::F32), "bf16 operands");
    }
}

TEST_CASE("matmul in bf16 rounds f32 operands to nearest even, and a NaN stays a NaN",
          "[ops][gemm][bf16]") {
  require_compute(g_device, ComputeType::BF16);
  // K = 1: every result is one product of two bf16 values, exact in f32, so
  // it shows how each element of b (a row of 70: two blocks of 32 and a
  // tail) was rounded: ties to even, a NaN stays a NaN. Subnormals are left
  // out: x86's bf16 products (AMX tiles, vdpbf16ps) take them as zero.
  const int64_t N = 70;
  std::vector<float> B(N);
  for (int64_t j = 0; j < N; ++j) {
    const float tie = 1.f + std::ldexp(1.f, -8) * static_cast<float>(j % 4);   // 1, 1+2^-8, ..
    B[j] = j % 5 == 0 ? std::ldexp(1.f + static_cast<float>(j) / 256.f, -134)  // subnormal
           : j % 2    ? -tie + std::ldexp(1.f, -20)                            // not a tie
                      : tie;
  }
  B[41] = std::numeric_limits<float>::quiet_NaN();
  B[69] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> A = {1.f, std::ldexp(1.f, 100)};
  Tensor a = dev(A, Shape{2, 1}), b = dev(B, Shape{1, N}), c(Shape{2, N}, g_device);
  ops::MatmulOpts o;
  o.compute = ComputeType::BF16;
  ops::matmul(a, false, b, false, c, o);
  const auto got = host(c);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < N; ++j) {
      INFO("row " << i << " element " << j << " of b: " << B[j]);
      if (std::isnan(B[j])) {
        CHECK(std::isnan(got[i * N + j]));
        continue;
      }
      if (std::fpclassify(B[j]) == FP_SUBNORMAL) continue;
      CHECK(got[i * N + j] == A[i] * from_bf16(to_bf16(B[j])));
    }
}

TEST_CASE("linear_backward against loops and against separate products, f32", "[ops][gemm]") {
  if (!runs({Op::LinearBackward})) return;
  check_linear_backward(ComputeType::F32);
}
TEST_CASE("linear_backward against loops and against separate products, bf16",
          "[ops][gemm][bf16]") {
  check_linear_backward(ComputeType::BF16);
}

TEST_CASE("bmm over batch x heads through head-split and transposed views", "[ops][gemm]") {
  if (!runs({Op::Gemm})) return;
  struct Shp {
    int64_t B, H, T, S, d;
  };
  for (DType dt : kDtypes)
    for (Shp s :
         {Shp{1, 1, 1, 1, 1}, Shp{2, 3, 4, 5, 8}, Shp{3, 4, 1, 9, 16}, Shp{2, 8, 30, 30, 64}})
      for (bool acc : {false, true}) {
        // Q (B*T, H*d) and K (B*S, ld) with K's heads starting at column 3.
        const int64_t ld = s.H * s.d + 5;
        auto Q = randv(s.B * s.T * s.H * s.d, 1), Kx = randv(s.B * s.S * ld, 2),
             C0 = randv(s.B * s.H * s.T * s.S, 3);
        Tensor q = dev(Q, Shape{s.B * s.T, s.H * s.d}), k = dev(Kx, Shape{s.B * s.S, ld});
        Tensor c = dev(C0, Shape{s.B, s.H, s.T, s.S});
        const float alpha = 0.25f;
        ops::bmm(ops::heads(q, s.B, s.T, s.H, s.d, 0),
                 ops::transposed(ops::heads(k, s.B, s.S, s.H, s.d, 3)), c, alpha, acc);
        std::vector<double> ref(C0.size());
        for (int64_t b = 0; b < s.B; ++b)
          for (int64_t h = 0; h < s.H; ++h)
            for (int64_t t = 0; t < s.T; ++t)
              for (int64_t u = 0; u < s.S; ++u) {
                double r = 0;
                for (int64_t i = 0; i < s.d; ++i)
                  r += double(Q[(b * s.T + t) * s.H * s.d + h * s.d + i]) *
                       Kx[(b * s.S + u) * ld + 3 + h * s.d + i];
                const int64_t o = ((b * s.H + h) * s.T + t) * s.S + u;
                ref[o] = alpha * r + (acc ? C0[o] : 0.0);
              }
        expect_close(host(c), ref, tolerance(dt), "bmm");
      }
}

TEST_CASE("attend: a decoding step's fused attention against the unfused formula",
          "[ops][attention]") {
  if (!runs({Op::Attend})) return;
  struct Shp {
    int64_t B, H, M, L, dk, dv;
  };
  for (Shp s : {Shp{1, 1, 1, 1, 1, 1}, Shp{3, 4, 1, 7, 16, 16}, Shp{2, 2, 4, 9, 8, 12},
                Shp{5, 8, 4, 40, 64, 64}, Shp{4, 8, 1, 16, 32, 32}, Shp{3, 2, 4, 17, 32, 32},
                Shp{2, 2, 1, 1, 128, 128}, Shp{2, 2, 1, 1, 64, 64}})
    for (bool masked : {false, true}) {
      // q from a (B*M, H*dk + 3) projection; k and v share one (B*L, ld) buffer.
      const int64_t qld = s.H * s.dk + 3, ld = s.H * (s.dk + s.dv) + 5;
      auto Q = randv(s.B * s.M * qld, 1), KV = randv(s.B * s.L * ld, 2);
      std::vector<float> Mk(s.B * s.L, 0.f);
      if (masked)
        for (int64_t b = 0; b < s.B; ++b)
          for (int64_t j = s.L / 2 + 1; j < s.L; ++j) Mk[b * s.L + j] = -1e9f;
      Tensor qb = dev(Q, Shape{s.B * s.M, qld}), kvb = dev(KV, Shape{s.B * s.L, ld});
      Tensor mask = dev(Mk, Shape{s.B, 1, 1, s.L}), out(Shape{s.B * s.M, s.H * s.dv}, g_device);
      const Tensor q = qb.strided(Shape{s.B, s.H, s.M, s.dk}, {s.M * qld, s.dk, qld, 1}, 3);
      const Tensor k = kvb.strided(Shape{s.B, s.H, s.L, s.dk}, {s.L * ld, s.dk, ld, 1}, 5);
      const Tensor v =
          kvb.strided(Shape{s.B, s.H, s.L, s.dv}, {s.L * ld, s.dv, ld, 1}, 5 + s.H * s.dk);
      Tensor ctx = out.strided(Shape{s.B, s.H, s.M, s.dv}, {s.M * s.H * s.dv, s.dv, s.H * s.dv, 1});
      const float scale = 0.3f;
      ops::attend(q, k, v, masked ? &mask : nullptr, scale, ctx);
      std::vector<double> ref(s.B * s.M * s.H * s.dv);
      for (int64_t b = 0; b < s.B; ++b)
        for (int64_t h = 0; h < s.H; ++h)
          for (int64_t i = 0; i < s.M; ++i) {
            std::vector<double> p(s.L);
            double mx = -1e300, z = 0;
            for (int64_t j = 0; j < s.L; ++j) {
              double d = 0;
              for (int64_t x = 0; x < s.dk; ++x)
                d += double(Q[(b * s.M + i) * qld + 3 + h * s.dk + x]) *
                     KV[(b * s.L + j) * ld + 5 + h * s.dk + x];
              p[j] = scale * d + Mk[b * s.L + j];
              mx = std::max(mx, p[j]);
            }
            for (double& x : p) z += (x = std::exp(x - mx));
            for (int64_t x = 0; x < s.dv; ++x) {
              double o = 0;
              for (int64_t j = 0; j < s.L; ++j)
                o += p[j] / z * KV[(b * s.L + j) * ld + 5 + s.H * s.dk + h * s.dv + x];
              ref[(b * s.M + i) * s.H * s.dv + h * s.dv + x] = o;
            }
          }
      expect_close(host(out), ref, tolerance(DType::F32),
                   "attend B" + std::to_string(s.B) + " L" + std::to_string(s.L) +
                       (masked ? " masked" : ""));
    }
}

TEST_CASE("softmax and log-softmax, forward and backward", "[ops][softmax]") {
  if (!runs({Op::Softmax, Op::SoftmaxBackward})) return;
  for (DType dt : kDtypes)
    for (auto [rows, cols] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {64, 1000}, {5, 8000}}) {
      auto X = randv(rows * cols, 1, 3.f), dY = randv(rows * cols, 2);
      Tensor x = dev(X, Shape{rows, cols}), y, ly, dx;
      ops::softmax(x, y);
      ops::log_softmax(x, ly);
      Tensor dy = dev(dY, Shape{rows, cols});
      ops::softmax_backward(y, dy, dx);
      std::vector<double> p(X.size()), lp(X.size()), g(X.size());
      for (int64_t r = 0; r < rows; ++r) {
        double mx = -1e300, z = 0, dot = 0;
        for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double(X[r * cols + c]));
        for (int64_t c = 0; c < cols; ++c) z += std::exp(X[r * cols + c] - mx);
        for (int64_t c = 0; c < cols; ++c) {
          p[r * cols + c] = std::exp(X[r * cols + c] - mx) / z;
          lp[r * cols + c] = X[r * cols + c] - mx - std::log(z);
          dot += p[r * cols + c] * dY[r * cols + c];
        }
        for (int64_t c = 0; c < cols; ++c) g[r * cols + c] = p[r * cols + c] * (dY[r * cols + c] - dot);
      }
      expect_close(host(y), p, tolerance(dt), "softmax");
      expect_close(host(ly), lp, tolerance(dt), "log_softmax");
      expect_close(host(dx), g, 10 * tolerance(dt), "softmax_backward");
    }
}

TEST_CASE("masked softmax with padding and causal masks", "[ops][softmax]") {
  if (!runs({Op::Softmax, Op::AddMask, Op::Masks})) return;
  const int64_t B = 2, H = 3, T = 4, S = 5;
  std::vector<int32_t> ids = {7, 8, 9, 3, 0, 5, 6, 3, 0, 0};  // the second sentence is shorter
  Tensor mask(Shape{B, 1, 1, S}, g_device), causal(Shape{1, 1, T, T}, g_device);
  ops::padding_mask(dev_ids(ids, Shape{B * S}), 0, mask);
  ops::causal_mask(causal);
  const auto hm = host(mask), hc = host(causal);
  for (int64_t i = 0; i < B * S; ++i) CHECK(hm[i] == (ids[i] == 0 ? -1e9f : 0.f));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) CHECK(hc[i * T + j] == (j > i ? -1e9f : 0.f));
  for (int kind = 0; kind < 2; ++kind) {
    const int64_t cols = kind == 0 ? S : T;
    auto X = randv(B * H * T * cols, 3);
    Tensor x = dev(X, Shape{B, H, T, cols});
    ops::masked_softmax_(x, kind == 0 ? &mask : &causal);
    std::vector<double> ref(X.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t row = ((b * H + h) * T + t) * cols;
          auto m = [&](int64_t c) { return kind == 0 ? hm[b * S + c] : hc[t * T + c]; };
          double mx = -1e300, z = 0;
          for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double(X[row + c]) + m(c));
          for (int64_t c = 0; c < cols; ++c) z += std::exp(X[row + c] + m(c) - mx);
          for (int64_t c = 0; c < cols; ++c) ref[row + c] = std::exp(X[row + c] + m(c) - mx) / z;
        }
    expect_close(host(x), ref, tolerance(DType::F32), kind == 0 ? "padding" : "causal");
  }
}

TEST_CASE("layer norm forward (with and without statistics) and backward", "[ops][norm]") {
  if (!runs({Op::LayerNorm, Op::LayerNormBackward})) return;
  for (DType dt : kDtypes)
    for (auto [rows, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {7, 16}, {96, 512}}) {
      const float eps = 1e-6f;
      auto X = randv(rows * D, 1, 2.f), G = randv(D, 2), Bv = randv(D, 3), dY = randv(rows * D, 4),
           dG0 = randv(D, 5), dB0 = randv(D, 6);
      Tensor x = dev(X, Shape{rows, D}), gamma = dev(G, Shape{D}), beta = dev(Bv, Shape{D});
      Tensor y, y2, dx, mean(Shape{0}, g_device), var(Shape{0}, g_device);
      ops::layer_norm(x, gamma, beta, eps, y, &mean, &var);
      ops::layer_norm(x, gamma, beta, eps, y2);
      Tensor dy = dev(dY, Shape{rows, D}), dg = dev(dG0, Shape{D}), db = dev(dB0, Shape{D});
      ops::layer_norm_backward(x, dy, gamma, mean, var, eps, dx, dg, db);
      std::vector<double> ry(X.size()), rdx(X.size()), rdg(dG0.begin(), dG0.end()),
          rdb(dB0.begin(), dB0.end());
      for (int64_t r = 0; r < rows; ++r) {
        double mu = 0, v = 0;
        for (int64_t i = 0; i < D; ++i) mu += X[r * D + i];
        mu /= D;
        for (int64_t i = 0; i < D; ++i) v += (X[r * D + i] - mu) * (X[r * D + i] - mu);
        v /= D;
        const double rs = 1 / std::sqrt(v + eps);
        double mg = 0, mgx = 0;  // means of g = dy * gamma and of g * xhat
        for (int64_t i = 0; i < D; ++i) {
          const double xh = (X[r * D + i] - mu) * rs, gi = dY[r * D + i] * G[i];
          ry[r * D + i] = xh * G[i] + Bv[i];
          mg += gi / D, mgx += gi * xh / D;
          rdg[i] += dY[r * D + i] * xh;
          rdb[i] += dY[r * D + i];
        }
        for (int64_t i = 0; i < D; ++i) {
          const double xh = (X[r * D + i] - mu) * rs;
          rdx[r * D + i] = rs * (dY[r * D + i] * G[i] - mg - xh * mgx);
        }
      }
      expect_close(host(y), ry, 10 * tolerance(dt), "layer_norm");
      expect_close(host(y2), ry, 10 * tolerance(dt), "layer_norm without statistics");
      expect_close(host(dx), rdx, 50 * tolerance(dt), "layer_norm_backward dx");
      expect_close(host(dg), rdg, 10 * tolerance(dt), "layer_norm_backward dgamma (accumulated)");
      expect_close(host(db), rdb, 10 * tolerance(dt), "layer_norm_backward dbeta (accumulated)");
    }
}

TEST_CASE("a residual and its layer norm in one op equal add then layer norm, to the bit",
          "[ops][norm]") {
  if (!runs({Op::LayerNorm, Op::Elementwise})) return;
  for (auto [rows, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {7, 16}, {96, 512}}) {
    INFO(rows << " x " << D);
    const float eps = 1e-6f;
    auto X = randv(rows * D, 7, 2.f), A = randv(rows * D, 8), G = randv(D, 9), Bv = randv(D, 10);
    Tensor x = dev(X, Shape{rows, D}), a = dev(A, Shape{rows, D}), gamma = dev(G, Shape{D}),
           beta = dev(Bv, Shape{D});
    Tensor sum, y_ref, y, sum2, y2;
    ops::add(x, a, sum);
    ops::layer_norm(sum, gamma, beta, eps, y_ref);
    ops::add_layer_norm(x, a, gamma, beta, eps, nullptr, y);  // the sum not kept
    CHECK(host(y) == host(y_ref));
    ops::add_layer_norm(x, a, gamma, beta, eps, &sum2, y2);  // kept
    CHECK(host(sum2) == host(sum));
    CHECK(host(y2) == host(y_ref));
    ops::add_layer_norm(x, a, gamma, beta, eps, &x, y2);  // kept in x itself
    CHECK(host(x) == host(sum));
    CHECK(host(y2) == host(y_ref));
  }
}

TEST_CASE("element-wise: add, add_, scale_, copy, copy_rows, activations, column sums",
          "[ops][elementwise]") {
  if (!runs({Op::Elementwise, Op::Activate, Op::ColumnSums})) return;
  for (int64_t n : {1, 100, 70000}) {
    auto A = randv(n, 1), B = randv(n, 2);
    Tensor a = dev(A, Shape{n}), b = dev(B, Shape{n}), out;
    ops::add(a, b, out);
    std::vector<double> r(n);
    for (int64_t i = 0; i < n; ++i) r[i] = double(A[i]) + B[i];
    expect_close(host(out), r, 1e-7, "add");
    ops::add_(a, b);
    expect_close(host(a), r, 1e-7, "add_");
    ops::scale_(a, 0.5f);
    for (auto& x : r) x *= 0.5;
    expect_close(host(a), r, 1e-7, "scale_");
    Tensor c;
    ops::copy(a, c);
    CHECK(host(c) == host(a));
    // Each activation against its definition, and its derivative against
    // central differences of the definition (in double, on inputs spread
    // spread over about [-5, 5]).
    std::vector<float> X(n);
    for (int64_t i = 0; i < n; ++i) X[i] = 2.5f * A[i];
    for (Activation act : kActivations) {
      const std::string name = "activation " + std::to_string(static_cast<int>(act));
      Tensor x = dev(X, Shape{n}), yv, dy = dev(B, Shape{n});
      ops::activate(x, yv, act);
      std::vector<double> ry(n), rd(n);
      for (int64_t i = 0; i < n; ++i) {
        const double h = 1e-4, v = X[i];
        ry[i] = act_reference(act, v);
        const double d = act == Activation::Relu
                             ? (v > 0 ? 1.0 : 0.0)
                             : (act_reference(act, v + h) - act_reference(act, v - h)) / (2 * h);
        rd[i] = d * B[i];
      }
      expect_close(host(yv), ry, 1e-6, name);
      ops::activation_backward_(x, dy, act);
      expect_close(host(dy), rd, 1e-5, name + " backward");
    }
    // ReLU's backward pass may read its output instead of its input.
    Tensor y = dev(A, Shape{n}), dy = dev(B, Shape{n});
    ops::activation_backward_(y, dy, Activation::Relu);
    for (int64_t i = 0; i < n; ++i) r[i] = A[i] > 0 ? B[i] : 0.0;
    expect_close(host(dy), r, 0, "relu backward");
  }
  auto S = randv(300 * 40, 3), D0 = randv(40, 4);
  Tensor src = dev(S, Shape{300, 40}), dst = dev(D0, Shape{40});
  ops::add_column_sums(src, dst);
  std::vector<double> r(D0.begin(), D0.end());
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 40; ++j) r[j] += S[i * 40 + j];
  expect_close(host(dst), r, tolerance(DType::F32), "add_column_sums");
  // copy_rows: 3 rows of 4 from a (3, 10) matrix at column 2 into a (3, 6) one at column 1.
  auto X = randv(30, 5), Y = randv(18, 6);
  Tensor x = dev(X, Shape{3, 10}), yv = dev(Y, Shape{3, 6});
  Tensor dv = yv.strided(Shape{3, 4}, {6, 1, 0, 0}, 1);
  ops::copy_rows(x.strided(Shape{3, 4}, {10, 1, 0, 0}, 2), dv);
  std::vector<double> ry(Y.begin(), Y.end());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) ry[i * 6 + 1 + j] = X[i * 10 + 2 + j];
  expect_close(host(yv), ry, 0, "copy_rows");
}

TEST_CASE("dropout is the counter hash, the same on every device and thread count",
          "[ops][elementwise]") {
  if (!runs({Op::Dropout})) return;
  for (float p : {0.f, 0.1f, 0.5f})
    for (int64_t n : {100000, 100001}) {  // an odd count ends with half a pair
      auto X = randv(n, 1);
      Tensor x = dev(X, Shape{n});
      ops::dropout_(x, p, 1234);
      std::vector<double> ref(n);
      int64_t dropped = 0, both = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref[i] = p > 0 ? dropout_value(X[i], 1234, i, uint32_t(p * 4294967296.0), 1.f / (1.f - p))
                       : X[i];
        dropped += ref[i] == 0;
        if (i % 2 && ref[i] == 0 && ref[i - 1] == 0) ++both;
      }
      expect_close(host(x), ref, 0, "dropout");
      CHECK(std::abs(double(dropped) / n - p) < 0.01);
      // A pair's two elements share a hash, one half each: they must still
      // drop independently.
      CHECK(std::abs(double(both) / (n / 2) - double(p) * p) < 0.01);
    }
}

TEST_CASE("embedding lookup and its scatter-add gradient", "[ops][embedding]") {
  if (!runs({Op::Embedding, Op::EmbeddingBackward})) return;
  const int64_t V = 11, D = 6, B = 3, T = 4, P = 16, pos0 = 2;
  const float scale = 2.5f;
  auto E = randv(V * D, 1), Pe = randv(P * D, 2), dY = randv(B * T * D, 3), dE0 = randv(V * D, 4),
       dP0 = randv(P * D, 5);
  std::vector<int32_t> tok = {1, 4, 4, 0, 10, 4, 2, 2, 7, 7, 7, 3};  // repeats on purpose
  Tensor table = dev(E, Shape{V, D}), pos = dev(Pe, Shape{P, D}), ids = dev_ids(tok, Shape{B * T});
  Tensor out;
  ops::embedding(table, ids, pos, pos0, T, scale, out);
  std::vector<double> r(B * T * D);
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t d = 0; d < D; ++d)
      r[i * D + d] = double(E[tok[i] * D + d]) * scale + Pe[(pos0 + i % T) * D + d];
  expect_close(host(out), r, tolerance(DType::F32), "embedding");
  Tensor dy = dev(dY, Shape{B * T, D}), dE = dev(dE0, Shape{V, D}), dP = dev(dP0, Shape{P, D});
  ops::embedding_backward(ids, dy, T, scale, dE, &dP);
  std::vector<double> rE(dE0.begin(), dE0.end()), rP(dP0.begin(), dP0.end());
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t d = 0; d < D; ++d) {
      rE[tok[i] * D + d] += double(dY[i * D + d]) * scale;
      rP[(i % T) * D + d] += dY[i * D + d];
    }
  expect_close(host(dE), rE, tolerance(DType::F32), "embedding_backward table");
  expect_close(host(dP), rP, tolerance(DType::F32), "embedding_backward positions");
  // Ids are range-checked where they can be read without a copy back.
  if (g_device == Device::CPU)
    CHECK_THROWS(ops::embedding(table, dev_ids({0, 11, 2, 3}, Shape{4}), pos, 0, 4, 1.f, out));
}

TEST_CASE("label-smoothed cross-entropy: totals and gradient, pads ignored", "[ops][loss]") {
  if (!runs({Op::Xent})) return;
  for (auto [N, V] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {9, 37}, {64, 8000}}) {
    const float eps = 0.1f, scale = 1.f / 7;
    auto X = randv(N * V, 1, 2.f);
    std::vector<int32_t> tgt(N);
    for (int64_t i = 0; i < N; ++i) tgt[i] = i % 4 == 3 ? 0 : int32_t((i * 7 + 1) % V);
    Tensor x = dev(X, Shape{N, V}), t = dev_ids(tgt, Shape{N}), dx;
    const auto totals = ops::label_smoothed_xent(x, t, eps, 0, &dx, scale);
    double loss = 0, nll = 0;
    int64_t tokens = 0;
    std::vector<double> g(N * V, 0.0);
    for (int64_t i = 0; i < N; ++i) {
      if (tgt[i] == 0) continue;
      double mx = -1e300, z = 0, sum = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(X[i * V + v]));
      for (int64_t v = 0; v < V; ++v) z += std::exp(X[i * V + v] - mx), sum += X[i * V + v];
      const double lz = mx + std::log(z), lp = X[i * V + tgt[i]] - lz;
      nll -= lp;
      loss += -(1 - eps) * lp - eps * (sum / V - lz);
      ++tokens;
      for (int64_t v = 0; v < V; ++v)
        g[i * V + v] = (std::exp(X[i * V + v] - lz) - eps / V - (v == tgt[i]) * (1 - eps)) * scale;
    }
    CHECK(totals.tokens == tokens);
    CHECK(totals.loss == Approx(loss).epsilon(1e-6));
    CHECK(totals.nll == Approx(nll).epsilon(1e-6));
    expect_close(host(dx), g, 10 * tolerance(DType::F32), "xent gradient");
    // Totals added on the device, as a step's batches add them: twice over
    // on top of what the tensor held.
    Tensor acc(Shape{3}, g_device, DType::F64);
    const std::vector<double> start = {1.5, -2.0, 3.0};
    ops::upload(start.data(), acc);
    ops::add_label_smoothed_xent(x, t, eps, 0, nullptr, scale, acc);
    ops::add_label_smoothed_xent(x, t, eps, 0, nullptr, scale, acc);
    std::vector<double> sum(3);
    ops::read_f64(acc, sum.data());
    CHECK(sum[0] == Approx(1.5 + 2 * loss).epsilon(1e-6));
    CHECK(sum[1] == Approx(-2.0 + 2 * nll).epsilon(1e-6));
    CHECK(sum[2] == 3.0 + 2 * double(tokens));
  }
}

TEST_CASE("Adam update and the gradient norm", "[ops][optim]") {
  if (!runs({Op::Adam, Op::SumSquares})) return;
  const int64_t n = 5000;
  auto P = randv(n, 1), G = randv(n, 2, 0.1f);
  Tensor p = dev(P, Shape{n}), g = dev(G, Shape{n}), m(Shape{n}, g_device), v(Shape{n}, g_device);
  std::vector<double> rp(P.begin(), P.end()), rm(n, 0), rv(n, 0);
  for (int64_t t = 1; t <= 3; ++t) {
    ops::AdamStep s;
    s.lr = 1e-3;
    s.t = t;
    ops::adam_update(p, g, m, v, s);
    for (int64_t i = 0; i < n; ++i) {
      rm[i] = 0.9 * rm[i] + 0.1 * G[i];
      rv[i] = 0.98 * rv[i] + 0.02 * double(G[i]) * G[i];
      const double mh = rm[i] / (1 - std::pow(0.9, t)), vh = rv[i] / (1 - std::pow(0.98, t));
      rp[i] -= 1e-3 * mh / (std::sqrt(vh) + 1e-9);
    }
  }
  expect_close(host(p), rp, 1e-6, "adam");
  double ss = 0;
  for (float x : G) ss += double(x) * x;
  CHECK(ops::l2_norm(g) == Approx(std::sqrt(ss)).epsilon(1e-9));

  // Clipping inside the update, by the norm on the device: as scaling the
  // gradient first, to the bit; a norm under the limit changes nothing.
  Tensor sums(Shape{2}, g_device, DType::F64);
  ops::sum_squares(g, sums, 1);
  double two[2];
  ops::read_f64(sums, two);
  CHECK(two[1] == Approx(ss).epsilon(1e-12));
  for (double clip : {0.5 * std::sqrt(ss), 2 * std::sqrt(ss)}) {
    INFO("clip " << clip << ", norm " << std::sqrt(ss));
    Tensor p1 = dev(P, Shape{n}), m1(Shape{n}, g_device), v1(Shape{n}, g_device);
    Tensor p2 = dev(P, Shape{n}), m2(Shape{n}, g_device), v2(Shape{n}, g_device);
    m1.zero(), v1.zero(), m2.zero(), v2.zero();
    Tensor g2 = dev(G, Shape{n});
    const double norm = std::sqrt(two[1]);
    if (norm > clip) ops::scale_(g2, static_cast<float>(clip / norm));
    ops::AdamStep s;
    s.lr = 1e-3;
    ops::adam_update(p2, g2, m2, v2, s);
    s.clip_sumsq = &sums, s.clip_at = 1, s.clip_norm = clip;
    ops::adam_update(p1, g, m1, v1, s);
    CHECK(host(p1) == host(p2));
    CHECK(host(m1) == host(m2));
    CHECK(host(g) == G);  // the gradient itself is never changed
  }
}

TEST_CASE("top-k of a log-softmax with banned ids and ties, pick, gather rows and cache prefixes",
          "[ops][decode]") {
  if (!runs({Op::TopkLogSoftmax, Op::Pick, Op::Elementwise})) return;
  const int64_t rows = 3, V = 50, k = 6;
  auto L = randv(rows * V, 1);
  L[1 * V + 10] = L[1 * V + 20] = 5.f;  // a tie: the lower id comes first
  L[2 * V + 33] = 40.f;                 // a row whose mass sits on one id
  Tensor logits = dev(L, Shape{rows, V});
  std::vector<double> base = {0.5, -1.0, 2.0}, vals;
  std::vector<int32_t> idx;
  std::vector<float> eos;
  // Two chosen columns per row: </s> (7) and another (row 1: none).
  const std::vector<int32_t> cols = {7, 11, 7, -1, 7, 33};
  ops::topk_log_softmax(logits, base, k, {0, 2}, cols, 2, vals, idx, eos);
  for (int64_t r = 0; r < rows; ++r) {
    // The reference: a log-softmax in double, then a full sort.
    double mx = -1e300, sum = 0;
    for (int32_t v = 0; v < V; ++v) mx = std::max(mx, double(L[r * V + v]));
    for (int32_t v = 0; v < V; ++v) sum += std::exp(double(L[r * V + v]) - mx);
    const double lse = mx + std::log(sum);
    std::vector<std::pair<double, int32_t>> all;
    for (int32_t v = 0; v < V; ++v)
      if (v != 0 && v != 2) all.push_back({-(base[r] + L[r * V + v] - lse), v});
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (int64_t j = 0; j < k; ++j) {
      CHECK(idx[r * k + j] == all[j].second);
      CHECK(vals[r * k + j] == Approx(-all[j].first).margin(1e-5));
    }
    for (int c = 0; c < 2; ++c) {
      const int32_t col = cols[r * 2 + c];
      if (col < 0)
        CHECK(std::isinf(eos[r * 2 + c]));
      else
        CHECK(eos[r * 2 + c] == Approx(L[r * V + col] - lse).margin(1e-5));
    }
  }
  // Fewer candidates than k: the rest are -inf with id -1.
  ops::topk_log_softmax(logits, std::vector<double>(rows, 0.0), V, {0, 2}, {7, 7, 7}, 1, vals, idx,
                        eos);
  CHECK(idx[V - 1] == -1);
  CHECK(idx[V - 3] != -1);
  CHECK(std::isinf(vals[V - 1]));
  // Allowed columns (a shortlist), a list per two rows: each row as if the
  // columns outside its list were -inf. Row 2's list has fewer than k.
  ops::ColumnLists own;
  own.cols = {1, 2, 7, 10, 20, 30, 40, 45, 3, 7, 33, 34};
  own.offsets = {0, 8, 12};
  ops::topk_log_softmax(logits, base, k, {0, 2}, cols, 2, vals, idx, eos, &own, 2);
  for (int64_t r = 0; r < rows; ++r) {
    INFO("allowed, row " << r);
    const std::vector<int32_t> list(own.cols.begin() + own.offsets[r / 2],
                                    own.cols.begin() + own.offsets[r / 2 + 1]);
    double mx = -1e300, sum = 0;
    for (int32_t v : list) mx = std::max(mx, double(L[r * V + v]));
    for (int32_t v : list) sum += std::exp(double(L[r * V + v]) - mx);
    const double lse = mx + std::log(sum);
    std::vector<std::pair<double, int32_t>> all;
    for (int32_t v : list)
      if (v != 0 && v != 2) all.push_back({-(base[r] + L[r * V + v] - lse), v});
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (int64_t j = 0; j < k; ++j) {
      if (j < static_cast<int64_t>(all.size())) {
        CHECK(idx[r * k + j] == all[j].second);
        CHECK(vals[r * k + j] == Approx(-all[j].first).margin(1e-5));
      } else {
        CHECK(idx[r * k + j] == -1);
        CHECK(std::isinf(vals[r * k + j]));
      }
    }
    for (int c = 0; c < 2; ++c) {
      const int32_t col = cols[r * 2 + c];
      if (col < 0 || std::find(list.begin(), list.end(), col) == list.end())
        CHECK(eos[r * 2 + c] == -std::numeric_limits<float>::infinity());
      else
        CHECK(eos[r * 2 + c] == Approx(L[r * V + col] - lse).margin(1e-5));
    }
  }
  std::swap(own.cols[3], own.cols[4]);
  CHECK_THROWS_WITH(
      ops::topk_log_softmax(logits, base, k, {0, 2}, cols, 2, vals, idx, eos, &own, 2),
      Catch::Matchers::Contains("ascending"));
  own.offsets = {0, 8};
  CHECK_THROWS_WITH(
      ops::topk_log_softmax(logits, base, k, {0, 2}, cols, 2, vals, idx, eos, &own, 2),
      Catch::Matchers::Contains("per group of rows"));
  Tensor lp = dev(L, Shape{rows, V});
  std::vector<float> picked;
  ops::pick(lp, {4, 10, 49}, picked);
  CHECK(picked == std::vector<float>{L[4], L[V + 10], L[2 * V + 49]});
  // Rows 2, 0, 2 of a (3, 4, 2) tensor, and the first 2 of 4 positions of a cache.
  auto X = randv(24, 2);
  Tensor x = dev(X, Shape{3, 4, 2}), g, c;
  ops::gather_rows(x, {2, 0, 2}, g);
  auto hg = host(g);
  for (int i = 0; i < 8; ++i)
    CHECK((hg[i] == X[16 + i] && hg[8 + i] == X[i] && hg[16 + i] == X[16 + i]));
  ops::gather_cache(x, {1, 1}, 2, c);
  auto hc = host(c);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i) CHECK(hc[r * 8 + i] == X[8 + i]);
}

TEST_CASE("reorder a cache in place as gather_cache does", "[ops][decode]") {
  if (!runs({Op::Elementwise})) return;
  // Swaps, cycles, fan-out from one parent, rows dropped, and more rows
  // than before (the first step of a beam).
  const int64_t N = 6, cap = 5, W = 3, len = 4;
  const std::vector<std::vector<int64_t>> orders = {{0, 1, 2, 3, 4, 5},
                                                    {1, 0, 2, 3, 5, 4},
                                                    {1, 2, 0, 4, 5, 3},
                                                    {0, 0, 0, 3, 3, 1},
                                                    {5, 4, 3, 2, 1, 0},
                                                    {2, 2, 5},
                                                    {4, 0},
                                                    {0, 0, 1, 1, 2, 2, 3, 3}};
  for (const auto& idx : orders) {
    auto X = randv(N * cap * W, 9);
    Tensor cache = dev(X, Shape{N, cap, W}), want, scratch;
    ops::gather_cache(cache, idx, len, want);
    ops::reorder_cache(cache, idx, len, scratch);
    REQUIRE(cache.dim(0) == static_cast<int64_t>(idx.size()));
    auto got = host(cache), ref = host(want);
    for (size_t r = 0; r < idx.size(); ++r)
      for (int64_t p = 0; p < len * W; ++p) CHECK(got[r * cap * W + p] == ref[r * cap * W + p]);
  }
}

TEST_CASE("reorder a cache of bf16 in place as gather_cache does", "[ops][decode]") {
  if (!runs({Op::Elementwise})) return;
  // int8 decoding's caches hold bf16 (2-byte elements); the scratch is f32.
  const int64_t N = 6, cap = 5, W = 3, len = 4;
  const std::vector<std::vector<int64_t>> orders = {
      {1, 2, 0, 4, 5, 3}, {0, 0, 0, 3, 3, 1}, {2, 2, 5}, {0, 0, 1, 1, 2, 2, 3, 3}};
  for (const auto& idx : orders) {
    std::vector<uint16_t> X(N * cap * W);
    std::mt19937 g(static_cast<uint32_t>(idx.size()));
    for (auto& x : X) x = static_cast<uint16_t>(g());
    Tensor cache(Shape{N, cap, W}, g_device, DType::BF16), want, scratch;
    backend(g_device).from_host(cache.raw(), X.data(), X.size() * 2);
    ops::gather_cache(cache, idx, len, want);
    ops::reorder_cache(cache, idx, len, scratch);
    REQUIRE(cache.dim(0) == static_cast<int64_t>(idx.size()));
    REQUIRE(cache.dtype() == DType::BF16);
    REQUIRE(want.dtype() == DType::BF16);
    std::vector<uint16_t> got(cache.numel()), ref(want.numel());
    backend(g_device).to_host(got.data(), cache.raw(), got.size() * 2);
    backend(g_device).to_host(ref.data(), want.raw(), ref.size() * 2);
    for (size_t r = 0; r < idx.size(); ++r)
      for (int64_t p = 0; p < len * W; ++p) CHECK(got[r * cap * W + p] == ref[r * cap * W + p]);
  }
}

int main(int argc, char** argv) {
  std::string device = argc > 1 && argv[1][0] != '-' ? argv[1] : "cpu";
  if (device == "cuda" && !cuda_available()) {
    std::cout << "backend parity on cuda: skipped (no CUDA device, or built without CUDA)\n";
    return 77;
  }
  g_device = parse_device(device);
  std::vector<char*> rest = {argv[0]};
  for (int i = argc > 1 && argv[1][0] != '-' ? 2 : 1; i < argc; ++i) rest.push_back(argv[i]);
  if (const int rc = nmt::test::take_needs(rest, g_device)) return rc;
  std::cout << "backend parity on " << device << ": " << backend(g_device).version() << "\n";
  return Catch::Session().run(static_cast<int>(rest.size()), rest.data());
}
