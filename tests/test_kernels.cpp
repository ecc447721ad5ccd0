// oneDNN kernels against naive reference loops.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "core/cpu_kernels.h"
#include "core/elementwise.h"

using namespace nmt;

namespace {

std::vector<float> randv(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Reference for any MatRef layout.
float at(const cpu::MatRef& m, int64_t b, int64_t h, int64_t i, int64_t j) {
  return m.ptr[b * m.strides[0] + h * m.strides[1] + i * m.strides[2] + j * m.strides[3]];
}

void ref_gemm(const cpu::MatRef& a, const cpu::MatRef& b, const cpu::MatRef& c,
              const cpu::GemmAttr& attr) {
  float* out = const_cast<float*>(c.ptr);
  for (int64_t bb = 0; bb < c.dims[0]; ++bb)
    for (int64_t hh = 0; hh < c.dims[1]; ++hh)
      for (int64_t i = 0; i < c.dims[2]; ++i)
        for (int64_t j = 0; j < c.dims[3]; ++j) {
          double s = 0;
          for (int64_t k = 0; k < a.dims[3]; ++k)
            s += double(at(a, a.dims[0] == 1 ? 0 : bb, a.dims[1] == 1 ? 0 : hh, i, k)) *
                 at(b, b.dims[0] == 1 ? 0 : bb, b.dims[1] == 1 ? 0 : hh, k, j);
          s *= attr.alpha;
          if (attr.bias) s += attr.bias[j];
          if (attr.relu && s < 0) s = 0;
          float* o =
              out + bb * c.strides[0] + hh * c.strides[1] + i * c.strides[2] + j * c.strides[3];
          if (attr.accumulate) s += *o;
          *o = float(s);
        }
}

void require_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == Approx(b[i]).margin(tol).epsilon(tol));
}

}  // namespace

TEST_CASE("gemm matches the reference: plain, transposed, bias, relu, accumulate", "[kernels]") {
  const int64_t M = 37, K = 29, N = 23;
  for (int variant = 0; variant < 6; ++variant) {
    auto A = randv(M * K, 1), B = randv(K * N, 2), bias = randv(N, 3);
    auto C = randv(M * N, 4), R = C;
    cpu::GemmAttr attr;
    cpu::MatRef a = cpu::mat(A.data(), M, K, K), b = cpu::mat(B.data(), K, N, N);
    if (variant == 1) a = cpu::mat_t(A.data(), K, M, M);  // A stored (K, M)
    if (variant == 2) b = cpu::mat_t(B.data(), N, K, K);  // B stored (N, K): x W^T
    if (variant == 3) {
      attr.bias = bias.data();
      attr.relu = true;
    }
    if (variant == 4) {
      attr.accumulate = true;
      attr.alpha = 0.5f;
    }
    if (variant == 5) {
      attr.bias = bias.data();
      attr.accumulate = true;
    }
    cpu::gemm(a, b, cpu::mat(C.data(), M, N, N), attr);
    ref_gemm(a, b, cpu::mat(R.data(), M, N, N), attr);
    require_close(C, R, 1e-4f);
  }
}

TEST_CASE("batched gemm over heads with strided views, and a broadcast mask", "[kernels]") {
  const int64_t B = 3, H = 4, T = 7, S = 9, dk = 8, D = H * dk;
  auto Q = randv(B * T * D, 5), Kx = randv(B * S * D, 6), M = randv(B * S, 7);
  std::vector<float> scores(B * H * T * S), ref(B * H * T * S);
  cpu::GemmAttr attr;
  attr.alpha = 1.f / std::sqrt(float(dk));
  auto q = cpu::heads(Q.data(), B, H, T, dk, D);
  auto kt = cpu::heads_t(Kx.data(), B, H, S, dk, D);
  cpu::MatRef dst{scores.data(), {B, H, T, S}, {H * T * S, T * S, S, 1}};
  cpu::MatRef rdst{ref.data(), {B, H, T, S}, {H * T * S, T * S, S, 1}};
  cpu::gemm(q, kt, dst, attr);
  ref_gemm(q, kt, rdst, attr);
  require_close(scores, ref, 1e-4f);
  cpu::add_mask(scores.data(), {B, H, T, S}, M.data(), {B, 1, 1, S});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < H * T * S; ++i) ref[b * H * T * S + i] += M[b * S + i % S];
  require_close(scores, ref, 1e-4f);

  // P @ V written straight back into the (B*T, D) layout.
  auto V = randv(B * S * D, 8);
  std::vector<float> out(B * T * D), rout(B * T * D);
  auto p = cpu::MatRef{scores.data(), {B, H, T, S}, {H * T * S, T * S, S, 1}};
  cpu::gemm(p, cpu::heads(V.data(), B, H, S, dk, D), cpu::heads(out.data(), B, H, T, dk, D));
  ref_gemm(p, cpu::heads(V.data(), B, H, S, dk, D), cpu::heads(rout.data(), B, H, T, dk, D), {});
  require_close(out, rout, 1e-4f);
}

TEST_CASE("softmax and log-softmax match the formula", "[kernels]") {
  const int64_t R = 13, C = 31;
  auto x = randv(R * C, 9, 3.f);
  std::vector<float> y(R * C), ly(R * C);
  cpu::softmax(x.data(), y.data(), R, C);
  cpu::softmax(x.data(), ly.data(), R, C, /*log=*/true);
  for (int64_t r = 0; r < R; ++r) {
    double mx = -1e30, z = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(x[r * C + c]));
    for (int64_t c = 0; c < C; ++c) z += std::exp(x[r * C + c] - mx);
    for (int64_t c = 0; c < C; ++c) {
      REQUIRE(y[r * C + c] == Approx(std::exp(x[r * C + c] - mx) / z).margin(1e-6));
      REQUIRE(ly[r * C + c] == Approx(x[r * C + c] - mx - std::log(z)).margin(1e-5));
    }
  }
  // Backward: dx = y * (dy - sum(dy * y)).
  auto dy = randv(R * C, 10);
  std::vector<float> dx(R * C);
  cpu::softmax_backward(y.data(), dy.data(), dx.data(), R, C);
  for (int64_t r = 0; r < R; ++r) {
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) dot += double(dy[r * C + c]) * y[r * C + c];
    for (int64_t c = 0; c < C; ++c)
      REQUIRE(dx[r * C + c] == Approx(y[r * C + c] * (dy[r * C + c] - dot)).margin(1e-5));
  }
}

TEST_CASE("layer norm forward and backward match the formula", "[kernels]") {
  const int64_t R = 11, D = 24;
  const float eps = 1e-5f;
  auto x = randv(R * D, 11, 2.f), g = randv(D, 12), b = randv(D, 13), dy = randv(R * D, 14);
  std::vector<float> y(R * D), mean(R), var(R), dx(R * D), dg(D, 0.f), db(D, 0.f);
  cpu::layer_norm(x.data(), y.data(), g.data(), b.data(), mean.data(), var.data(), R, D, eps, true);
  cpu::layer_norm_backward(x.data(), dy.data(), g.data(), mean.data(), var.data(), dx.data(),
                           dg.data(), db.data(), R, D, eps);
  std::vector<double> rdg(D, 0), rdb(D, 0);
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = &x[r * D];
    double mu = 0, v = 0;
    for (int64_t i = 0; i < D; ++i) mu += xr[i];
    mu /= D;
    for (int64_t i = 0; i < D; ++i) v += (xr[i] - mu) * (xr[i] - mu);
    v /= D;
    const double rstd = 1 / std::sqrt(v + eps);
    double s1 = 0, s2 = 0;
    for (int64_t i = 0; i < D; ++i) {
      const double xh = (xr[i] - mu) * rstd;
      REQUIRE(y[r * D + i] == Approx(xh * g[i] + b[i]).margin(1e-4));
      const double gy = dy[r * D + i] * g[i];
      s1 += gy;
      s2 += gy * xh;
      rdg[i] += dy[r * D + i] * xh;
      rdb[i] += dy[r * D + i];
    }
    for (int64_t i = 0; i < D; ++i) {
      const double xh = (xr[i] - mu) * rstd;
      const double ref = rstd * (dy[r * D + i] * g[i] - s1 / D - xh * s2 / D);
      REQUIRE(dx[r * D + i] == Approx(ref).margin(1e-4));
    }
  }
  for (int64_t i = 0; i < D; ++i) {
    REQUIRE(dg[i] == Approx(rdg[i]).margin(1e-4));
    REQUIRE(db[i] == Approx(rdb[i]).margin(1e-4));
  }
}

TEST_CASE("a warm gemm builds no new primitive", "[kernels]") {
  auto A = randv(16 * 8, 1), B = randv(8 * 4, 2);
  std::vector<float> C(16 * 4);
  cpu::gemm(cpu::mat(A.data(), 16, 8, 8), cpu::mat(B.data(), 8, 4, 4),
            cpu::mat(C.data(), 16, 4, 4));
  const auto before = cpu::primitives_created();
  for (int i = 0; i < 10; ++i)
    cpu::gemm(cpu::mat(A.data(), 16, 8, 8), cpu::mat(B.data(), 8, 4, 4),
              cpu::mat(C.data(), 16, 4, 4));
  REQUIRE(cpu::primitives_created() == before);
}
